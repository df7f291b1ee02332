/// The answer of `GET /v1/cluster`: the slot map as the answering node last read it, for
/// slot-aware clients (which send each request straight to its slot's owner) and for
/// `counter-node cluster status`.
public struct ClusterMapBody: Sendable, Equatable, Codable {
    /// Rises with every change of a slot's owner: a client holding an older version should read
    /// the map again.
    public var version: Int64
    /// The node that answered.
    public var answeredBy: String
    public var nodes: [ClusterNodeBody]
    /// Slots whose owner is not the one the live nodes' target gives them: hand-offs and
    /// takeovers still to come.
    public var movesPending: Int

    public init(version: Int64, answeredBy: String, nodes: [ClusterNodeBody], movesPending: Int) {
        self.version = version
        self.answeredBy = answeredBy
        self.nodes = nodes
        self.movesPending = movesPending
    }

    enum CodingKeys: String, CodingKey {
        case version
        case answeredBy = "answered_by"
        case nodes
        case movesPending = "moves_pending"
    }

    /// The URL of the live node that owns `slot` (0…16383), if the map names one.
    public func ownerURL(ofSlot slot: Int) -> String? {
        nodes.first { node in node.live && node.slots.contains { $0.count == 2 && $0[0] <= slot && slot <= $0[1] } }?.url
    }
}

/// One node of `ClusterMapBody`.
public struct ClusterNodeBody: Sendable, Equatable, Codable {
    public var id: String
    /// Where it listens for the API (`--advertise-url`).
    public var url: String
    /// Its process start's number: a restart under the same id has a higher one.
    public var incarnation: Int64
    /// Whether its lease is running.
    public var live: Bool
    /// Whether an operator asked it to give up its slots (`cluster drain`).
    public var draining: Bool
    /// Milliseconds its lease still runs without a renewal.
    public var leaseRemainingMs: Int64
    /// How many slots it owns, and which: `[first, last]` ranges, ascending.
    public var ownedSlots: Int
    public var slots: [[Int]]
    /// The lowest and highest epoch among its slots (0 when it owns none).
    public var lowestEpoch: Int64
    public var highestEpoch: Int64

    public init(
        id: String, url: String, incarnation: Int64, live: Bool, draining: Bool, leaseRemainingMs: Int64,
        ownedSlots: Int, slots: [[Int]], lowestEpoch: Int64, highestEpoch: Int64
    ) {
        self.id = id
        self.url = url
        self.incarnation = incarnation
        self.live = live
        self.draining = draining
        self.leaseRemainingMs = leaseRemainingMs
        self.ownedSlots = ownedSlots
        self.slots = slots
        self.lowestEpoch = lowestEpoch
        self.highestEpoch = highestEpoch
    }

    enum CodingKeys: String, CodingKey {
        case id, url, incarnation, live, draining
        case leaseRemainingMs = "lease_remaining_ms"
        case ownedSlots = "owned_slots"
        case slots
        case
            lowestEpoch = "lowest_epoch"
        case highestEpoch = "highest_epoch"
    }
}

/// The body of `POST /admin/cluster/drain`: mark a node as draining (it hands its slots to the
/// others and takes none) or, with `"draining":false`, take it back.
public struct DrainRequest: Sendable, Equatable, Codable {
    public var nodeID: String
    public var draining: Bool?

    public init(nodeID: String, draining: Bool? = nil) {
        self.nodeID = nodeID
        self.draining = draining
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case nodeID = "node_id"
        case draining
    }

    public init(from decoder: any Decoder) throws {
        try UnknownMembers.refuse(in: decoder, allowed: CodingKeys.allCases)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        nodeID = try container.decode(String.self, forKey: .nodeID)
        draining = try container.decodeUnlessAbsent(Bool.self, forKey: .draining)
    }
}

/// The answer of `POST /admin/cluster/drain`: the node's mark as it now is.
public struct DrainResult: Sendable, Equatable, Codable {
    public var nodeID: String
    public var draining: Bool

    public init(nodeID: String, draining: Bool) {
        self.nodeID = nodeID
        self.draining = draining
    }

    enum CodingKeys: String, CodingKey {
        case nodeID = "node_id"
        case draining
    }
}
