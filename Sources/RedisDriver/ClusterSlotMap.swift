import ShardRouter

/// Which master serves each of the 16,384 hash slots of a Redis Cluster. Pure: built from a
/// `CLUSTER SLOTS` reply (or one server for every slot), changed by `MOVED` redirects.
public struct ClusterSlotMap: Sendable, Equatable {
    /// The masters, in the order first seen.
    public private(set) var masters: [RedisEndpoint] = []
    /// The replicas a `CLUSTER SLOTS` answer named, in order (nodes to ask when masters fail).
    public private(set) var replicas: [RedisEndpoint] = []
    /// Per slot, an index into `masters`, or -1 when no master serves it.
    private var owners: [Int16]
    /// Each replica's master, as the `CLUSTER SLOTS` answer paired them.
    private var masterOfReplica: [RedisEndpoint: RedisEndpoint] = [:]

    /// A map in which no slot is served.
    public init() {
        owners = [Int16](repeating: -1, count: HashSlot.count)
    }

    /// One server that serves every slot (a Redis that is not a cluster).
    public init(single endpoint: RedisEndpoint) {
        masters = [endpoint]
        owners = [Int16](repeating: 0, count: HashSlot.count)
    }

    /// Reads a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, …], replicas…], …]`.
    /// A master listed with an empty host (or `?`) is on the host that was asked (`askedHost`).
    /// - Throws: `RedisError(.unexpectedReply)` when the reply has another shape.
    public init(clusterSlots reply: RedisReply, askedHost: String) throws(RedisError) {
        self.init()
        guard let ranges = reply.array else { throw Self.unexpected(reply) }
        for range in ranges {
            guard let fields = range.array, fields.count >= 3,
                let start = fields[0].integer, let end = fields[1].integer,
                (0..<Int64(HashSlot.count)).contains(start), (start..<Int64(HashSlot.count)).contains(end),
                let endpoint = Self.endpoint(fields[2], askedHost: askedHost)
            else {
                throw Self.unexpected(range)
            }
            for slot in Int(start)...Int(end) { assign(slot, to: endpoint) }
            for replica in fields.dropFirst(3).compactMap({ Self.endpoint($0, askedHost: askedHost) }) {
                masterOfReplica[replica] = endpoint
                if !replicas.contains(replica) { replicas.append(replica) }
            }
        }
    }

    /// A node of a `CLUSTER SLOTS` range: `[host, port, id, …]`.
    private static func endpoint(_ node: RedisReply, askedHost: String) -> RedisEndpoint? {
        guard let fields = node.array, fields.count >= 2, let host = fields[0].string,
            let port = fields[1].integer, (1...65535).contains(port)
        else { return nil }
        return RedisEndpoint(host: host.isEmpty || host == "?" ? askedHost : host, port: Int(port))
    }

    /// The master that serves `slot`, or `nil` when none does.
    public func master(of slot: HashSlot) -> RedisEndpoint? {
        let owner = owners[Int(slot.rawValue)]
        return owner < 0 ? nil : masters[Int(owner)]
    }

    /// The slots `endpoint` serves.
    public func slots(of endpoint: RedisEndpoint) -> Set<UInt16> {
        guard let index = masters.firstIndex(of: endpoint) else { return [] }
        var slots: Set<UInt16> = []
        for (slot, owner) in owners.enumerated() where Int(owner) == index { slots.insert(UInt16(slot)) }
        return slots
    }

    /// Whether `endpoint` serving `slot` instead of its master in this map is a failover: it
    /// was that master's replica here (promoted, with whatever it had not replicated lost),
    /// not another master the slot migrated to.
    public func isPromotion(of slot: HashSlot, to endpoint: RedisEndpoint) -> Bool {
        guard let master = master(of: slot), master != endpoint else { return false }
        return masterOfReplica[endpoint] == master
    }

    /// The slots that `newer` gives to a replica of their master in this map: the slots of the
    /// masters that failed over between the two maps. Also a master all of whose slots went, at
    /// once, to one endpoint that served none here, while it serves none in `newer`: a failover
    /// even when this map did not name that endpoint as its replica (one that joined, or was
    /// first listed, after this map was read — `CLUSTER SLOTS` leaves out a replica that has not
    /// reported its offset yet). A resharding moves slots one at a time, so a map read in between
    /// sees a master keep some of them; a master that held only moved slots and lost them all at
    /// once is taken for a failover, whose repair is only extra work.
    public func promotedSlots(in newer: ClusterSlotMap) -> [UInt16] {
        var promoted: [UInt16] = []
        // Per master here, the owners (indices into `newer.masters`, -1: none) its slots have there.
        var wentTo: [Int16: Set<Int16>] = [:]
        for slot in 0..<HashSlot.count where owners[slot] >= 0 {
            let (before, now) = (owners[slot], newer.owners[slot])
            wentTo[before, default: []].insert(now)
            if now >= 0, masterOfReplica[newer.masters[Int(now)]] == masters[Int(before)] { promoted.append(UInt16(slot)) }
        }
        let servedBefore = Set(wentTo.keys.map { masters[Int($0)] })
        let servedNow = Set(newer.owners.filter { $0 >= 0 }.map { newer.masters[Int($0)] })
        let unnamed = Set(
            wentTo.compactMap { master, owners -> Int16? in
                guard owners.count == 1, let to = owners.first, to >= 0 else { return nil }
                let (old, new) = (masters[Int(master)], newer.masters[Int(to)])
                return masterOfReplica[new] != old && !servedBefore.contains(new) && !servedNow.contains(old) ? master : nil
            })
        guard !unnamed.isEmpty else { return promoted }
        for slot in 0..<HashSlot.count where unnamed.contains(owners[slot]) { promoted.append(UInt16(slot)) }
        return promoted.sorted()
    }

    /// Keeps from `older` the replicas this map does not name at all. A `CLUSTER SLOTS` answer
    /// leaves out a replica flagged as failing (paused, cut off, slow) — the one a failover may
    /// promote a moment later: remembered, its promotion is still seen as one (`promotedSlots`,
    /// `isPromotion`), not as a migration whose slots need no repair.
    public mutating func rememberReplicas(of older: ClusterSlotMap) {
        let named = Set(masters).union(replicas)
        for (replica, master) in older.masterOfReplica where !named.contains(replica) {
            masterOfReplica[replica] = master
        }
    }

    /// Records that `endpoint` now serves `slot` (a `MOVED` redirect).
    public mutating func move(_ slot: HashSlot, to endpoint: RedisEndpoint) {
        assign(Int(slot.rawValue), to: endpoint)
    }

    /// Slots no master serves, as ranges of slot numbers.
    public var uncoveredSlots: [ClosedRange<Int>] {
        var ranges: [ClosedRange<Int>] = []
        var start: Int?
        for slot in 0...HashSlot.count {
            let uncovered = slot < HashSlot.count && owners[slot] < 0
            if uncovered, start == nil { start = slot }
            if !uncovered, let first = start {
                ranges.append(first...(slot - 1))
                start = nil
            }
        }
        return ranges
    }

    /// How many slots no master serves.
    public var uncoveredSlotCount: Int {
        owners.reduce(0) { $0 + ($1 < 0 ? 1 : 0) }
    }

    /// How many slots each master serves (masters that serve none are left out).
    public var slotCounts: [RedisEndpoint: Int] {
        var counts: [RedisEndpoint: Int] = [:]
        for owner in owners where owner >= 0 { counts[masters[Int(owner)], default: 0] += 1 }
        return counts
    }

    /// `0-5460, 5462` for messages.
    public static func describe(_ ranges: [ClosedRange<Int>]) -> String {
        let shown = ranges.prefix(5).map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound)" }
        return shown.joined(separator: ", ") + (ranges.count > 5 ? " and \(ranges.count - 5) more ranges" : "")
    }

    private mutating func assign(_ slot: Int, to endpoint: RedisEndpoint) {
        let index: Int
        if let known = masters.firstIndex(of: endpoint) {
            index = known
        } else {
            masters.append(endpoint)
            index = masters.count - 1
        }
        owners[slot] = Int16(index)
    }

    private static func unexpected(_ reply: RedisReply) -> RedisError {
        RedisError(code: .unexpectedReply, message: "not a CLUSTER SLOTS reply: \(reply)")
    }
}
