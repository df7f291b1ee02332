import CounterCore
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import Synchronization
import WritePath

/// One node's membership of a cluster: its registration and lease in PostgreSQL, and the rounds
/// that claim, adopt, hand off and drop its slots (`MembershipRound`), performed on the write
/// path (`CounterService.acquire`, `release`, `drop`). Also keeps the slot map routing reads.
///
/// `join()` registers (waiting out the lease of a killed predecessor with the same id, refusing
/// an id a live process holds) and runs the first round, so a node serves its slots before it
/// listens. `run()` renews the lease every `renewInterval` and runs a round every
/// `roundInterval` until cancelled; then the node leaves: it marks itself draining, hands every
/// slot to the others, and ends its lease.
public actor ClusterMember: Service {
    /// How the node takes part.
    public struct Configuration: Sendable, Equatable {
        /// This node's id, stable across restarts (`--node-id`).
        public var nodeID: String
        /// Where the other nodes and slot-aware clients reach this node (`--advertise-url`); may
        /// be given later, to `join(advertising:)`, once the listening port is known.
        public var advertiseURL: String
        /// How long a lease lasts without renewal, by PostgreSQL's clock: a node silent this long
        /// loses its slots. Defaults to 3 s.
        public var lease: Duration = .seconds(3)
        /// How often the lease is renewed. Defaults to 1 s.
        public var renewInterval: Duration = .seconds(1)
        /// How often the map is read and acted on. Defaults to 250 ms.
        public var roundInterval: Duration = .milliseconds(250)
        /// Most slots handed between live nodes at once (takeovers of dead nodes' slots are not
        /// limited). Defaults to 256.
        public var maximumMoves: Int = 256
        /// The settings every node of the deployment must share (`ReactionModel.agreementText`):
        /// a node whose settings differ from a live node's refuses to join. Defaults to likes only.
        public var settings: String = NodeRegistry.likesOnlySettings

        public init(nodeID: String, advertiseURL: String) {
            self.nodeID = nodeID
            self.advertiseURL = advertiseURL
        }
    }

    /// What the node did, for metrics and `cluster status`.
    public struct Counters: Sendable, Equatable {
        /// Rounds that claimed slots from a gone owner, and the slots claimed.
        public var takeovers = 0
        public var takenOverSlots = 0
        /// Seconds from claim to serving, of the last takeover and of all together.
        public var lastTakeoverSeconds = 0.0
        public var takeoverSecondsTotal = 0.0
        /// Slots handed to other nodes, and slots adopted from them.
        public var handedOffSlots = 0
        public var adoptedSlots = 0
        /// Slots dropped because PostgreSQL gave them to another owner.
        public var droppedSlots = 0
        /// Rounds that failed (PostgreSQL or Redis unreachable).
        public var failedRounds = 0
    }

    /// This node's id was taken over by another process (its lease ran out): it must stop.
    public struct Superseded: Error, CustomStringConvertible {
        public let nodeID: String
        public var description: String {
            "node id \"\(nodeID)\" was taken by another process after this one's lease ran out; stopping"
        }
    }

    public nonisolated let configuration: Configuration
    // Module-visible for ClusterMember+Lease, which renews and watches the lease; nothing else
    // there changes them.
    let service: CounterService
    private let registry: NodeRegistry
    /// The registry on a connection of its own, for renewals only: a renewal must never wait
    /// behind a round or a map read (a claim may wait for a paused node's locks).
    nonisolated let leaseRegistry: NodeRegistry
    private let table: SlotTable
    /// While a map read is under way, the callers that asked meanwhile; they share its outcome.
    private var mapReaders: [CheckedContinuation<Void, Error>]?
    /// Rings when the next round should not wait for its interval.
    private nonisolated let roundAlarm = LoopAlarm()
    /// Whether the map, as last read, gives this node slots it does not serve yet.
    private var hasIncomingSlots = false
    /// Whether the last round took and handed over no slots because renewals failed within the
    /// last lease (`LeaseValidity.mayMoveSlots`): its changes are logged.
    private var slotMovesHeld = false
    nonisolated let log: NodeLog
    private var incarnationNumber: Int64 = 0
    private var advertised: String
    private var lastMapRead: ContinuousClock.Instant?
    /// The slot table as last read, under its version: rounds read the rows again only when the
    /// version moved (the 16,384 rows every 250 ms cost PostgreSQL and this node more than the
    /// rest of a round).
    private var cachedSlots: (version: SlotTable.Version, rows: [SlotTable.Row])?
    private let latestMap = Mutex(ClusterMap.empty)
    private let counters = Mutex(Counters())
    /// Until when the lease lets this node decide, and the renewals' round trips.
    nonisolated let leaseValidity: Mutex<LeaseValidity>
    /// Rung whenever the lease's validity changes (`updateLease`): the watch looks again.
    nonisolated let leaseChanged = LoopAlarm()
    /// Pings Redis before each renewal: a node that reaches no Redis master cannot serve its
    /// slots, so it lets its lease run out and the nodes that can take them.
    nonisolated let redisPing: RedisClient

    /// - Parameters:
    ///   - postgres: the connections of the rounds and map reads (two suffice).
    ///   - leasePostgres: a connection for lease renewals only.
    public init(
        configuration: Configuration, service: CounterService, postgres: PostgresPool, leasePostgres: PostgresPool,
        log: NodeLog = .silent
    ) {
        self.configuration = configuration
        self.service = service
        self.registry = NodeRegistry(pool: postgres, deployment: service.configuration.keyPrefix)
        self.leaseRegistry = NodeRegistry(pool: leasePostgres, deployment: service.configuration.keyPrefix)
        self.table = SlotTable(pool: postgres, deployment: service.configuration.keyPrefix)
        self.log = log
        self.advertised = configuration.advertiseURL
        self.leaseValidity = Mutex(LeaseValidity(lease: configuration.lease))
        self.redisPing = RedisClient(topology: service.redisTopology, timeout: configuration.lease / 4)
    }

    /// The lease as this node's clock sees it: whether it decides now, and the renewals' times.
    public nonisolated var lease: LeaseValidity { leaseValidity.withLock { $0 } }

    /// The slot map as last read.
    public nonisolated var map: ClusterMap { latestMap.withLock { $0 } }

    /// What the node did so far.
    public nonisolated var statistics: Counters { counters.withLock { $0 } }

    /// This process's incarnation (0 before `join()`).
    public var incarnation: Int64 { incarnationNumber }

    // MARK: - Joining and leaving

    /// Registers the node and runs the first round: after it, the node serves the slots it won.
    /// - Throws: `NodeRegistry.IDInUse` when a live process holds the id; PostgreSQL and Redis
    ///   errors.
    public func join(advertising url: String? = nil) async throws {
        if let url { advertised = url }
        let sent = ContinuousClock.now
        incarnationNumber = try await register()
        updateLease { $0.granted(sentAt: sent, answeredAt: .now) }
        try await table.createRows()
        log.log(
            .info, "joined",
            [
                "node": configuration.nodeID, "incarnation": String(incarnationNumber),
                "advertise_url": advertised,
            ])
        try await round()
    }

    /// Registers, waiting once for a holder's lease to run out: a process killed a moment ago
    /// holds the id until then, while a live one renews it meanwhile and is refused.
    private func register() async throws -> Int64 {
        do {
            return try await registry.register(
                nodeID: configuration.nodeID, advertiseURL: advertised,
                lease: configuration.lease, settings: configuration.settings)
        } catch let holder as NodeRegistry.IDInUse {
            let wait = max(0, holder.leaseRemainingMilliseconds) + 200
            log.log(
                .info, "waiting_for_node_id",
                [
                    "node": configuration.nodeID, "held_by_incarnation": String(holder.incarnation),
                    "lease_remaining_ms": String(holder.leaseRemainingMilliseconds),
                ])
            try await Task.sleep(for: .milliseconds(wait))
            return try await registry.register(
                nodeID: configuration.nodeID, advertiseURL: advertised,
                lease: configuration.lease, settings: configuration.settings)
        }
    }

    /// As a `Service`: joins (it has started once its first round has claimed and drained its
    /// slots), renews the lease and runs rounds until asked to stop, then leaves.
    /// - Throws: `NodeRegistry.IDInUse` at start; `Superseded` when another process took the
    ///   node's id (its slots are dropped first).
    public func run(_ lifecycle: ServiceLifecycle) async throws {
        try await run(lifecycle, advertising: nil)
    }

    /// `run(_:)`, advertising `url` (once the listening port is known).
    public func run(_ lifecycle: ServiceLifecycle, advertising url: String?) async throws {
        try await join(advertising: url)
        let incarnation = incarnationNumber
        lifecycle.started()
        // The lease is renewed and rounds run until the node is asked to stop or superseded.
        let superseded = await withTaskGroup(of: Superseded?.self) { group -> Superseded? in
            group.addTask { await self.renewLease(incarnation: incarnation) }
            group.addTask {
                await self.watchLease()
                return nil
            }
            group.addTask {
                await self.runRounds()
                return nil
            }
            group.addTask {
                await lifecycle.stopRequested()
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            await group.waitForAll()
            return first
        }
        if let superseded {
            await redisPing.close()
            await service.drop(Set((0..<UInt16(HashSlot.count)).filter { service.ownership.state(of: $0) != .notOwned }))
            throw superseded
        }
        // Leaving: the renewals go on while the slots are handed off.
        await withTaskGroup(of: Superseded?.self) { group in
            group.addTask { await self.renewLease(incarnation: incarnation) }
            group.addTask {
                await self.watchLease()
                return nil
            }
            await leave()
            group.cancelAll()
            await group.waitForAll()
        }
        try? await registry.release(nodeID: configuration.nodeID, incarnation: incarnationNumber)
        await redisPing.close()
        log.log(.info, "left", ["node": configuration.nodeID])
    }

    /// Runs a round every `roundInterval` (sooner when `roundSoon()` rings) until cancelled.
    private func runRounds() async {
        var handedOff = 0
        while !Task.isCancelled {
            // A round that handed slots off is followed at once by the next, so a rebalance
            // moves on as fast as each step completes.
            if handedOff == 0 { await roundAlarm.sleep(until: .now + configuration.roundInterval) }
            if Task.isCancelled { return }
            do {
                let started = ContinuousClock.now
                handedOff = try await round()
                updateLease { $0.roundCompleted(startedAt: started) }
            } catch {
                handedOff = 0
                counters.withLock { $0.failedRounds += 1 }
                log.log(.warn, "membership_round_failed", ["node": configuration.nodeID, "error": "\(error)"])
            }
        }
    }

    /// Leaving in good order: marked draining (nobody gives it slots any more), every slot
    /// handed to the others, until none is left or no other node is live (the slots then wait
    /// for the next node to start; the write path flushes them).
    private func leave() async {
        _ = try? await registry.setDraining(nodeID: configuration.nodeID, true)
        for _ in 0..<3 {
            do {
                if try await round(leaving: true) == 0 { return }
            } catch {
                log.log(.warn, "leaving_round_failed", ["node": configuration.nodeID, "error": "\(error)"])
            }
        }
    }

    // MARK: - Rounds

    /// Reads the map, then claims, adopts, hands off and drops as `MembershipRound` decides.
    /// - Returns: the slots handed off.
    @discardableResult
    func round(leaving: Bool = false) async throws -> Int {
        let nodes = try await registry.nodes()
        let rows = try await slotRows()
        publishMap(nodes: nodes, rows: rows)
        let states = service.ownership.snapshot()
        let plan = MembershipRound.plan(
            me: configuration.nodeID, incarnation: incarnationNumber,
            nodes: nodes.map { .init(id: $0.id, incarnation: $0.incarnation, isLive: $0.isLive, isDraining: $0.isDraining) },
            slots: rows,
            held: states.map(\.epoch),
            ready: states.map { if case .acquiring = $0 { return false } else { return true } },
            maximumMoves: configuration.maximumMoves, leaving: leaving,
            mayMoveSlots: mayMoveSlots(leaving: leaving))
        if !plan.drop.isEmpty {
            await service.drop(plan.drop)
            counters.withLock { $0.droppedSlots += plan.drop.count }
            log.log(
                .warn, "slots_dropped",
                [
                    "node": configuration.nodeID, "slots": SlotList.describe(plan.drop),
                    "why": "PostgreSQL gives them to another owner or epoch",
                ])
        }
        if !plan.claims.isEmpty {
            let started = ContinuousClock.now
            let won = try await table.assign(
                plan.claims,
                to: configuration.nodeID, incarnation: incarnationNumber)
            if !won.isEmpty {
                try await acquire(won)
                let seconds = (ContinuousClock.now - started).inSeconds
                counters.withLock {
                    $0.takeovers += 1
                    $0.takenOverSlots += won.count
                    $0.lastTakeoverSeconds = seconds
                    $0.takeoverSecondsTotal += seconds
                }
                log.log(
                    .info, "slots_taken_over",
                    [
                        "node": configuration.nodeID, "slots": SlotList.describe(Set(won.keys)),
                        "count": String(won.count), "ms": String(Int(seconds * 1_000)),
                    ])
            }
        }
        if !plan.adopt.isEmpty {
            try await acquire(plan.adopt)
            counters.withLock { $0.adoptedSlots += plan.adopt.count }
            log.log(
                .info, "slots_adopted",
                [
                    "node": configuration.nodeID, "slots": SlotList.describe(Set(plan.adopt.keys)),
                    "count": String(plan.adopt.count),
                ])
        }
        if !plan.handOffs.isEmpty { try await handOff(plan.handOffs) }
        // The map routing and `/v1/cluster` read shows what this round changed.
        if plan != MembershipRound() { try await refreshMap() }
        return plan.handOffs.count
    }

    /// Whether this round may take and hand over slots (a node leaving always may), logging
    /// when that changes: `slot_moves_held` once renewals failed within the last lease,
    /// `slot_moves_resumed` a lease after they got through again.
    private func mayMoveSlots(leaving: Bool) -> Bool {
        let lease = self.lease
        let may = leaving || lease.mayMoveSlots(at: .now)
        if may == slotMovesHeld {
            slotMovesHeld = !may
            log.log(
                may ? .info : .warn, may ? "slot_moves_resumed" : "slot_moves_held",
                may
                    ? ["node": configuration.nodeID]
                    : [
                        "node": configuration.nodeID,
                        "why": "lease renewals failed within the last lease: the others' leases may have run out only because PostgreSQL was away",
                    ])
        }
        return may
    }

    /// Serves `epochs`' slots once drained; if that fails the write path lets them go, so the
    /// next round adopts them again.
    private func acquire(_ epochs: [UInt16: Int64]) async throws {
        try await service.acquire(epochs)
    }

    /// Hands slots over: each target's slots wait, flush, change owner in PostgreSQL (only if
    /// still at the epoch held), get their new epoch in Redis (fencing this node out), and are
    /// dropped here.
    private func handOff(_ handOffs: [MembershipRound.HandOff]) async throws {
        var byTarget: [String: [MembershipRound.HandOff]] = [:]
        for handOff in handOffs { byTarget[handOff.to, default: []].append(handOff) }
        for (target, moves) in byTarget.sorted(by: { $0.key < $1.key }) {
            let slots = Set(moves.map(\.slot))
            do {
                try await service.release(slots)
            } catch {
                service.resumeServing(slots)
                throw error
            }
            let assigned = try await table.assign(
                moves.map { SlotTable.Claim(slot: $0.slot, expectedEpoch: $0.epoch) },
                to: target, incarnation: moves[0].toIncarnation)
            // The map names the new owner before the slots are dropped, so their requests are
            // forwarded there at once.
            try? await refreshMap()
            await service.handedOff(assigned, alsoDropping: slots)
            counters.withLock { $0.handedOffSlots += assigned.count }
            log.log(
                .info, "slots_handed_off",
                [
                    "node": configuration.nodeID, "to": target, "slots": SlotList.describe(Set(assigned.keys)),
                    "count": String(assigned.count),
                ])
        }
    }

    /// Marks `nodeID` as draining (it hands its slots to the others and takes none) or not, for
    /// an operator (`counter-node cluster drain`); every node acts on it at its next round.
    /// - Returns: `false` when no node has that id.
    public func setDraining(nodeID: String, _ draining: Bool) async throws -> Bool {
        let found = try await registry.setDraining(nodeID: nodeID, draining)
        if found { try? await refreshMap() }
        return found
    }

    /// Reads the map again unless it was read in the last 50 ms (many requests may ask at
    /// once). For the request path: it only reads; when the map gives this node slots it does
    /// not serve yet, the next round (the one place that moves slots) is asked to come sooner.
    public func refreshMapUnlessFresh() async throws {
        if let last = lastMapRead, ContinuousClock.now - last < .milliseconds(50) { return }
        try await refreshMap()
        if hasIncomingSlots { roundAlarm.ring() }
    }

    /// Asks for the next round now rather than at its interval.
    public nonisolated func roundSoon() {
        roundAlarm.ring()
    }

    /// Reads the map now (after a `421` said it is out of date), without acting on it. Callers
    /// that ask while a read is under way share it.
    public func refreshMap() async throws {
        if mapReaders != nil {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                mapReaders!.append(continuation)
            }
            return
        }
        mapReaders = []
        var failure: Error?
        do { try await readMap() } catch { failure = error }
        let waiting = mapReaders ?? []
        mapReaders = nil
        for reader in waiting {
            if let failure { reader.resume(throwing: failure) } else { reader.resume() }
        }
        if let failure { throw failure }
    }

    /// The slot table's rows, read again only when its version moved since the last read (the
    /// version is read first, so rows kept under it are never older than it).
    private func slotRows() async throws -> [SlotTable.Row] {
        let version = try await table.version()
        if let cached = cachedSlots, cached.version == version { return cached.rows }
        let rows = try await table.rows()
        cachedSlots = (version, rows)
        return rows
    }

    private func readMap() async throws {
        let nodes = try await registry.nodes()
        let rows = try await slotRows()
        publishMap(nodes: nodes, rows: rows)
    }

    /// Keeps the map routing reads and `/v1/cluster` show. It changes no slot: the rounds do.
    private func publishMap(nodes: [NodeRegistry.Node], rows: [SlotTable.Row]) {
        let me = configuration.nodeID
        let incarnation = incarnationNumber
        let states = service.ownership.snapshot()
        hasIncomingSlots = rows.indices.contains { rows[$0].owner == me && rows[$0].incarnation == incarnation && states[$0] == .notOwned }
        var index: [String: Int] = [:]
        for (position, node) in nodes.enumerated() { index[node.id] = position }
        let slots = rows.map { row -> ClusterMap.Slot in
            let owner = row.owner.flatMap { id in index[id].flatMap { nodes[$0].incarnation == row.incarnation ? $0 : nil } }
            return ClusterMap.Slot(owner: owner, epoch: row.epoch)
        }
        let map = ClusterMap(version: rows.map(\.epoch).max() ?? 0, nodes: nodes, slots: slots)
        latestMap.withLock { $0 = map }
        lastMapRead = .now
    }
}

/// Slot sets in log lines: contiguous runs as `a-b`, at most a few runs.
enum SlotList {
    static func describe(_ slots: Set<UInt16>) -> String {
        let sorted = slots.sorted()
        var runs: [String] = []
        var index = 0
        while index < sorted.count {
            var end = index
            while end + 1 < sorted.count && sorted[end + 1] == sorted[end] + 1 { end += 1 }
            runs.append(end == index ? "\(sorted[index])" : "\(sorted[index])-\(sorted[end])")
            index = end + 1
        }
        return runs.count > 8 ? runs.prefix(8).joined(separator: ",") + ",… (\(runs.count) runs)" : runs.joined(separator: ",")
    }
}
