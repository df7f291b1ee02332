/// One node's part of a cluster-wide operator call: the node, and its answer — or why there is
/// none (`error`; then `answer` is `null`).
public struct ClusterNodeAnswer<Answer: Sendable & Equatable & Codable>: Sendable, Equatable, Codable {
    public var nodeID: String
    public var url: String
    public var answer: Answer?
    public var error: String?

    public init(nodeID: String, url: String, answer: Answer?, error: String?) {
        self.nodeID = nodeID
        self.url = url
        self.answer = answer
        self.error = error
    }

    enum CodingKeys: String, CodingKey {
        case nodeID = "node_id"
        case url, answer, error
    }
}

/// What every cluster-wide answer says of itself: whether it is whole — every live node
/// answered, and every slot had a live owner (`unserved_slots` empty) — and each node's part.
/// An answer that is not complete leaves something out, and says what.
public protocol ClusterAnswer: Sendable, Equatable, Codable {
    associatedtype NodePart: Sendable & Equatable & Codable
    var complete: Bool { get }
    var unservedSlots: [[Int]] { get }
    var nodes: [ClusterNodeAnswer<NodePart>] { get }
}

/// The answer of `POST /admin/cluster/flush`: every live node flushed (waiting, unless
/// `?wait=false`, until PostgreSQL had every change it acknowledged before the call).
/// `flushed` holds only when every node's flush did and no slot was without a live owner
/// (whose log then waits in Redis for the takeover that drains it).
public struct ClusterFlushResult: ClusterAnswer {
    public var flushed: Bool
    /// Changes waiting for PostgreSQL on the nodes that answered, when they answered.
    public var pendingChanges: Int
    public var complete: Bool
    public var unservedSlots: [[Int]]
    public var nodes: [ClusterNodeAnswer<FlushResult>]

    public init(flushed: Bool, pendingChanges: Int, complete: Bool, unservedSlots: [[Int]], nodes: [ClusterNodeAnswer<FlushResult>]) {
        self.flushed = flushed
        self.pendingChanges = pendingChanges
        self.complete = complete
        self.unservedSlots = unservedSlots
        self.nodes = nodes
    }

    enum CodingKeys: String, CodingKey {
        case flushed
        case pendingChanges = "pending_changes"
        case complete
        case unservedSlots = "unserved_slots"
        case nodes
    }
}

/// The answer of `GET /admin/cluster/stats`: every live node's statistics, and their total
/// (counts added up; ages and largest sizes the maxima).
public struct ClusterStatistics: ClusterAnswer {
    public var total: ShardStatistics
    public var complete: Bool
    public var unservedSlots: [[Int]]
    public var nodes: [ClusterNodeAnswer<ServiceStatistics>]

    public init(total: ShardStatistics, complete: Bool, unservedSlots: [[Int]], nodes: [ClusterNodeAnswer<ServiceStatistics>]) {
        self.total = total
        self.complete = complete
        self.unservedSlots = unservedSlots
        self.nodes = nodes
    }

    enum CodingKeys: String, CodingKey {
        case total, complete
        case unservedSlots = "unserved_slots"
        case nodes
    }
}

/// The answer of `POST /admin/cluster/reconcile`: the posts asked (or a page of all posts),
/// each checked by the node that owns its slot — which alone knows what waits in Redis for it
/// and may repair it —, the reports merged in `report`. Posts whose slot had no live owner, or
/// whose owner did not answer, are in `unchecked_posts`.
public struct ClusterReconcileReport: ClusterAnswer {
    public var report: ReconcileReport
    public var uncheckedPosts: [Int64]
    public var complete: Bool
    public var unservedSlots: [[Int]]
    public var nodes: [ClusterNodeAnswer<ReconcileReport>]

    public init(report: ReconcileReport, uncheckedPosts: [Int64], complete: Bool, unservedSlots: [[Int]], nodes: [ClusterNodeAnswer<ReconcileReport>])
    {
        self.report = report
        self.uncheckedPosts = uncheckedPosts
        self.complete = complete
        self.unservedSlots = unservedSlots
        self.nodes = nodes
    }

    enum CodingKeys: String, CodingKey {
        case report
        case uncheckedPosts = "unchecked_posts"
        case complete
        case unservedSlots = "unserved_slots"
        case nodes
    }
}

/// The answer of `POST /admin/cluster/dead-letters/replay`: each letter replayed by the node
/// that owns its post's slot, the outcomes merged in `result` (a letter that could not reach
/// an owner is among `failed`, and stays).
public struct ClusterReplayResult: ClusterAnswer {
    public var result: ReplayResult
    public var complete: Bool
    public var unservedSlots: [[Int]]
    public var nodes: [ClusterNodeAnswer<ReplayResult>]

    public init(result: ReplayResult, complete: Bool, unservedSlots: [[Int]], nodes: [ClusterNodeAnswer<ReplayResult>]) {
        self.result = result
        self.complete = complete
        self.unservedSlots = unservedSlots
        self.nodes = nodes
    }

    enum CodingKeys: String, CodingKey {
        case result, complete
        case unservedSlots = "unserved_slots"
        case nodes
    }
}
