import CounterCore
import Persistence
import ShardRouter
import Synchronization

/// The write path of one node: its shard actors and their write-behind flushers.
///
/// `start()` first reads where Redis keeps each slot (one server, or the masters of a Redis
/// Cluster), recovers what the logs still hold from before a crash or restart, then starts the
/// flushers; operations are routed to the shard that owns the post's slot. `shutdown()` refuses
/// new operations, flushes everything to PostgreSQL and stops the flushers.
public final class CounterService: Service {
    /// How the shards and flushers behave.
    public let configuration: WritePathConfiguration
    /// Which shard owns which slot.
    public let shardMap: ShardMap
    private let shards: [ShardActor]
    /// Internal (not private) so tests can reach a shard's flusher.
    let flushers: [WriteBehindFlusher]
    /// Acknowledgement → PostgreSQL commit, per change, over all flushers.
    public let writeBehindLag = WriteBehindLag()
    private let clients: [RedisClient]
    private let flusherTasks = Mutex<[Task<Void, Never>]>([])
    private let topologyTask = Mutex<Task<Void, Never>?>(nil)
    /// Where Redis keeps each slot, shared by every Redis client of this service.
    public let redisTopology: RedisTopology
    /// Which slots this node decides for, under which epochs.
    public let ownership: OwnedSlots
    private let layout: RedisKeyLayout
    private let log: NodeLog

    /// Builds the shards; nothing connects or runs until `start()`. `log` hears of flush
    /// retries, dead letters, Redis nodes lost and found, large posts loaded and refused writes.
    /// - Throws: `CounterError(.invalidArgument)` for an unusable configuration.
    public convenience init(configuration: WritePathConfiguration, postgres: PostgresPool, redis: RedisConfiguration,
                            ownership: OwnedSlots = .soleWriter(), log: NodeLog = .silent) throws {
        try self.init(configuration: configuration, postgres: postgres, topology: RedisTopology(configuration: redis, log: log),
                      ownership: ownership, log: log)
    }

    /// Builds the shards over `topology` (discovered, for a cluster, in `start()`).
    /// - Parameter ownership: which slots this node decides for: every one, unfenced
    ///   (`soleWriter()`, the default), or what a cluster's membership gives it (`acquire`).
    /// - Throws: `CounterError(.invalidArgument)` for an unusable configuration.
    public init(configuration: WritePathConfiguration, postgres: PostgresPool, topology: RedisTopology,
                ownership: OwnedSlots = .soleWriter(), log: NodeLog = .silent) throws {
        guard let map = try? ShardMap(shardCount: configuration.shardCount) else {
            throw CounterError(code: .invalidArgument, message: "shard count must be between 1 and \(HashSlot.count)")
        }
        guard configuration.backlogLimitPerShard >= 1,
              configuration.flushBatchSize >= 1 else {
            throw CounterError(code: .invalidArgument, message: "backlog limit and flush batch size must be at least 1")
        }
        self.configuration = configuration
        self.shardMap = map
        self.ownership = ownership
        self.log = log
        let layout = RedisKeyLayout(prefix: configuration.keyPrefix)
        self.layout = layout
        var shards: [ShardActor] = []
        var flushers: [WriteBehindFlusher] = []
        var clients: [RedisClient] = []
        for index in 0..<configuration.shardCount {
            let gauge = BacklogGauge()
            let flusherRedis = RedisClient(topology: topology)
            let shardRedis = RedisClient(topology: topology)
            let flusher = WriteBehindFlusher(shardIndex: index, slots: map.slots(ofShard: index), redis: flusherRedis,
                                             pool: postgres, layout: layout, configuration: configuration, gauge: gauge,
                                             ownership: ownership, lag: writeBehindLag, log: log)
            let hydrationRedis = RedisClient(topology: topology)
            shards.append(ShardActor(index: index, redis: shardRedis, hydrationRedis: hydrationRedis, pool: postgres, layout: layout,
                                     configuration: configuration, flusher: flusher, gauge: gauge, ownership: ownership, log: log))
            flushers.append(flusher)
            clients += [flusherRedis, shardRedis, hydrationRedis]
        }
        self.shards = shards
        self.flushers = flushers
        self.clients = clients
        self.redisTopology = topology
    }

    /// Reads the Redis Cluster's slot map (for a cluster), moves dead letters kept under an
    /// older key, recovers each shard's unflushed log entries, then starts the flushers and the
    /// slot map's periodic refresh.
    /// - Throws: `RedisError(.clusterConfiguration)` when the seeds are not a usable cluster;
    ///   other errors when Redis cannot be read (nothing is started then).
    public func start() async throws {
        try await redisTopology.discover()
        try await DeadLetterKeyUpgrade.run(clients[0], layout: RedisKeyLayout(prefix: configuration.keyPrefix))
        for (shard, flusher) in zip(shards, flushers) {
            // A node of a cluster drains each slot's log when it wins the slot (`acquire`).
            if !ownership.isFenced { try await flusher.recover() }
            await flusher.setMissingPostsHandler { [shard] posts in await shard.dropDeletedPosts(posts) }
        }
        let tasks = flushers.map { flusher in Task { await flusher.run() } }
        flusherTasks.withLock { $0 = tasks }
        let topology = redisTopology
        topologyTask.withLock { $0 = Task { await topology.run() } }
    }

    /// Performs `operation` for user `userID` on post `postID`.
    /// - Returns: the membership and count after it.
    /// - Throws: `CounterError`.
    public func perform(_ operation: LikeOperation, post postID: Int64, user userID: Int64) async throws -> LikeState {
        guard postID > 0, userID > 0 || operation == .count else {
            throw CounterError(code: .invalidArgument, message: "ids must be positive 64-bit integers (post \(postID), user \(userID))")
        }
        let slot = HashSlot(post: postID)
        try await admit(slot.rawValue)
        let shard = shards[shardMap.shard(for: slot)]
        return try await shard.perform(ShardDecider.Request(operation: operation, postID: postID, userID: userID))
    }

    /// Returns when operations on `slot` may be decided here: at once while it is served;
    /// after a wait of at most `slotMoveWait` while it changes owner.
    /// - Throws: `CounterError(.notOwner)` when another node owns it (or comes to),
    ///   `CounterError(.slotMoving)` when the move did not settle in time.
    private func admit(_ slot: UInt16) async throws {
        switch ownership.admission(slot) {
        case .serve: return
        case .elsewhere: throw CounterError.notOwner(slot)
        case .wait: break
        }
        let deadline = ContinuousClock.now + configuration.slotMoveWait
        while ContinuousClock.now < deadline {
            // A cancelled caller stops waiting (its sleep would return at once, spinning).
            try await Task.sleep(for: .milliseconds(10))
            switch ownership.admission(slot) {
            case .serve: return
            case .elsewhere: throw CounterError.notOwner(slot)
            case .wait: continue
            }
        }
        throw CounterError(code: .slotMoving,
                           message: "slot \(slot) is changing owner and did not settle within \(configuration.slotMoveWait); nothing was done",
                           retryAfterSeconds: 1)
    }

    /// Queues `operation` and calls `completion` with the answer, without waiting: for callers on
    /// threads of their own (the HTTP thread). `completion` runs on the shard's executor, or at
    /// once when the operation is refused.
    public func submit(_ operation: LikeOperation, post postID: Int64, user userID: Int64,
                       completion: @escaping @Sendable (Result<LikeState, Error>) -> Void) {
        guard postID > 0, userID > 0 || operation == .count else {
            completion(.failure(CounterError(code: .invalidArgument, message: "ids must be positive 64-bit integers (post \(postID), user \(userID))")))
            return
        }
        let request = ShardDecider.Request(operation: operation, postID: postID, userID: userID)
        let hashSlot = HashSlot(post: postID)
        let shard = shards[shardMap.shard(for: hashSlot)]
        let slot = hashSlot.rawValue
        switch ownership.admission(slot) {
        case .serve:
            shard.submit(request, completion: completion)
        case .elsewhere:
            completion(.failure(CounterError.notOwner(slot)))
        case .wait:
            Task {
                do {
                    try await self.admit(slot)
                    shard.submit(request, completion: completion)
                } catch {
                    completion(.failure(error))
                }
            }
        }
    }

    /// Performs many operations (a feed page, say) with one batch per shard; one result per
    /// request, in order. Invalid ids fail alone.
    public func performMany(_ requests: [(operation: LikeOperation, post: Int64, user: Int64)]) async -> [Result<LikeState, Error>] {
        var results = [Result<LikeState, Error>?](repeating: nil, count: requests.count)
        var byShard: [Int: [(offset: Int, request: ShardDecider.Request)]] = [:]
        for (offset, request) in requests.enumerated() {
            guard request.post > 0, request.user > 0 || request.operation == .count else {
                results[offset] = .failure(CounterError(code: .invalidArgument, message: "ids must be positive 64-bit integers"))
                continue
            }
            if ownership.isFenced {
                do {
                    try await admit(HashSlot(post: request.post).rawValue)
                } catch {
                    results[offset] = .failure(error)
                    continue
                }
            }
            byShard[shardMap.shard(forPost: request.post), default: []].append(
                (offset, ShardDecider.Request(operation: request.operation, postID: request.post, userID: request.user)))
        }
        let shards = self.shards
        let answered = await withTaskGroup(of: [(Int, Result<LikeState, Error>)].self) { group in
            for (shard, items) in byShard {
                group.addTask {
                    let outcome = await shards[shard].performAll(items.map(\.request))
                    return Array(zip(items.map(\.offset), outcome))
                }
            }
            return await group.reduce(into: [(Int, Result<LikeState, Error>)]()) { $0 += $1 }
        }
        for (offset, result) in answered { results[offset] = result }
        return results.map { $0! }
    }

    /// Returns once every change acknowledged before the call is in PostgreSQL.
    public func flush() async throws {
        // An answer from memory (`AcknowledgementMode.memory`) comes before its Redis write: let
        // every shard write, and tell its flusher of, what it was given before this call.
        for shard in shards { await shard.waitForQueuedOperations() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for flusher in flushers { group.addTask { try await flusher.flushAll() } }
            try await group.waitForAll()
        }
    }

    /// Starts flushing everything acknowledged so far and returns at once (`flush()` waits).
    public func requestFlush() async {
        // As in `flush()`: what the shards were given (answered from memory, perhaps) is written
        // and noted first, so the flush covers it; this waits at most for the batches in flight.
        for shard in shards { await shard.waitForQueuedOperations() }
        for flusher in flushers { await flusher.requestFlushAll() }
    }

    /// Whether changes to `postID`'s slot may still be waiting for PostgreSQL.
    public func hasPendingChanges(forPost postID: Int64) async -> Bool {
        await flushers[shardMap.shard(forPost: postID)].hasPendingChanges(inSlot: HashSlot(post: postID).rawValue)
    }

    /// Seconds since the flusher of `postID`'s shard last committed.
    public func secondsSinceFlush(forPost postID: Int64) async -> Double {
        await flushers[shardMap.shard(forPost: postID)].currentStats().secondsSinceFlush
    }

    /// Per shard: operations, group commits, backlog, flushes, retries, errors, dead letters.
    public func stats() async -> [ShardStats] {
        var result: [ShardStats] = []
        for (shard, flusher) in zip(shards, flushers) {
            var stats = await flusher.currentStats()
            let shardStats = await shard.currentStats()
            stats.operations = shardStats.operations
            stats.groupCommits = shardStats.groupCommits
            stats.groupCommittedChanges = shardStats.groupCommittedChanges
            stats.largestGroupCommit = shardStats.largestGroupCommit
            stats.averageGroupCommit = shardStats.averageGroupCommit
            stats.lostMemoryAcknowledgements = shardStats.lostMemoryAcknowledgements
            stats.redisErrors += shardStats.redisErrors
            stats.postgresErrors += shardStats.postgresErrors
            result.append(stats)
        }
        return result
    }

    /// Forgets that `posts` were found missing, so the next operation asks PostgreSQL again
    /// (for an operator who has just restored them).
    public func recheckExistence(of posts: [Int64]) async {
        for post in posts { await shards[shardMap.shard(forPost: post)].recheckExistence(of: [post]) }
    }

    /// Makes Redis load `posts` afresh from PostgreSQL on their next touch, for posts whose
    /// Redis state drifted (a Redis failover can lose writes it acknowledged). Posts whose slot
    /// has changes waiting for PostgreSQL are left alone.
    /// - Returns: the posts that were reset.
    public func resyncRedisFromPostgres(_ posts: [Int64]) async -> Set<Int64> {
        var byShard: [Int: [Int64]] = [:]
        for post in posts where post > 0 { byShard[shardMap.shard(forPost: post), default: []].append(post) }
        var reset: Set<Int64> = []
        for (shard, shardPosts) in byShard { reset.formUnion(await shards[shard].resyncFromPostgres(shardPosts)) }
        return reset
    }

    // MARK: - Slots changing owner (a node of a cluster)

    /// Serves `epochs`' slots, just won in PostgreSQL: raises their epoch keys in Redis (from
    /// then on the previous owner's writes are refused), drains what their logs hold to
    /// PostgreSQL, and only then serves them. Operations on them wait meanwhile. A slot whose
    /// key already holds a higher epoch was overtaken by a later claim and is not served.
    /// - Returns: the slots now served.
    /// - Throws: when Redis or PostgreSQL fail; the slots stay waiting (`acquiring`), and the
    ///   caller tries again.
    @discardableResult
    public func acquire(_ epochs: [UInt16: Int64]) async throws -> Set<UInt16> {
        guard !epochs.isEmpty else { return [] }
        ownership.set(epochs.keys) { .acquiring(epoch: epochs[$0]!) }
        let ordered = epochs.sorted { $0.key < $1.key }
        let raised = await SlotEpochKeys.raise(ordered.map { (HashSlot(rawValue: $0.key)!, $0.value) }, layout: layout, redis: clients[0])
        var won: Set<UInt16> = []
        var overtaken: Set<UInt16> = []
        var failure: Error?
        for ((slot, epoch), result) in zip(ordered, raised) {
            switch result {
            case .success(let held) where held == epoch: won.insert(slot)
            case .success: overtaken.insert(slot)
            case .failure(let error): failure = failure ?? error
            }
        }
        if !overtaken.isEmpty { ownership.set(overtaken) { _ in .notOwned } }
        if let failure { throw failure }
        var byShard: [Int: Set<UInt16>] = [:]
        for slot in won { byShard[shardMap.shard(for: HashSlot(rawValue: slot)!), default: []].insert(slot) }
        let flushers = self.flushers
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (shard, slots) in byShard { group.addTask { try await flushers[shard].drain(slots) } }
            try await group.waitForAll()
        }
        var served: Set<UInt16> = []
        ownership.update(won) { slot, state in
            guard case .acquiring(let epoch) = state, epoch == epochs[slot] else { return state }
            served.insert(slot)
            return .serving(epoch: epoch)
        }
        return served
    }

    /// Prepares served `slots` to be handed to another node: new operations on them wait, the
    /// batches in flight are written (under the epochs held), and everything written for them
    /// is flushed to PostgreSQL. The caller then changes the owner in PostgreSQL and calls
    /// `drop(_:)`; until then the slots stay `releasing`.
    public func release(_ slots: Set<UInt16>) async throws {
        ownership.update(slots) { _, state in
            if case .serving(let epoch) = state { return .releasing(epoch: epoch) }
            return state
        }
        for shard in shards { await shard.waitForQueuedOperations() }
        var byShard: [Int: Set<UInt16>] = [:]
        for slot in slots { byShard[shardMap.shard(for: HashSlot(rawValue: slot)!), default: []].insert(slot) }
        let flushers = self.flushers
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (shard, part) in byShard { group.addTask { try await flushers[shard].flush(part) } }
            try await group.waitForAll()
        }
    }

    /// Serves again the `slots` whose hand-off failed (still under the epochs held).
    public func resumeServing(_ slots: Set<UInt16>) {
        ownership.update(slots) { _, state in
            if case .releasing(let epoch) = state { return .serving(epoch: epoch) }
            return state
        }
    }

    /// After a hand-off changed the owner in PostgreSQL: raises the slots' epoch keys to their
    /// new epochs (`epochs`), so this node's writes are refused from now on whatever it still
    /// has in flight, and drops them and `alsoDropping` (whose change in PostgreSQL found
    /// another owner already).
    public func handedOff(_ epochs: [UInt16: Int64], alsoDropping: Set<UInt16>) async {
        let ordered = epochs.sorted { $0.key < $1.key }
        _ = await SlotEpochKeys.raise(ordered.map { (HashSlot(rawValue: $0.key)!, $0.value) }, layout: layout, redis: clients[0])
        await drop(alsoDropping.union(epochs.keys))
    }

    /// Stops deciding for `slots` (handed off, or found to be another node's): operations on
    /// them are refused as `notOwner`, and their flushers forget them (the new owner drains
    /// their logs).
    public func drop(_ slots: Set<UInt16>) async {
        guard !slots.isEmpty else { return }
        ownership.set(slots) { _ in .notOwned }
        var byShard: [Int: Set<UInt16>] = [:]
        for slot in slots { byShard[shardMap.shard(for: HashSlot(rawValue: slot)!), default: []].insert(slot) }
        for (shard, part) in byShard { await flushers[shard].forget(part) }
    }

    /// As a `Service`: starts (unless `start()` already ran — a node calls it before its service
    /// group, so no request arrives before recovery), works until cancelled, then stops taking
    /// operations, drains everything acknowledged to PostgreSQL and stops the flushers.
    public func run() async throws {
        if flusherTasks.withLock({ $0.isEmpty }) { try await start() }
        await waitUntilCancelled()
        // The drain waits and sleeps, which a cancelled task cannot: it runs on a task of its own,
        // awaited here.
        let service = self
        await Task { await service.shutdown(drain: true) }.value
    }

    /// The slots whose write-behind logs hold changes not yet in PostgreSQL, with how many
    /// changes are counted in each (0: the log's content is not known until it is read again).
    public func pendingBySlot() async -> [UInt16: Int] {
        var pending: [UInt16: Int] = [:]
        for flusher in flushers { pending.merge(await flusher.pendingBySlot()) { $0 + $1 } }
        return pending
    }

    /// Gives up draining: the flushers stop after the flush under way (callers waiting for
    /// PostgreSQL are told the write path is shutting down), leaving what waits in the Redis logs
    /// for the next start. For a shutdown that ran out of time.
    public func abandonDrain() async {
        for flusher in flushers { await flusher.stop(drain: false) }
    }

    /// Stops taking operations, flushes everything acknowledged to PostgreSQL (when `drain`),
    /// and stops the flushers.
    public func shutdown(drain: Bool = true) async {
        for shard in shards { await shard.stopAccepting() }
        // Operations still queued are answered; their changes are drained too.
        if drain { for shard in shards { await shard.waitForQueuedOperations() } }
        for flusher in flushers { await flusher.stop(drain: drain) }
        let tasks = flusherTasks.withLock { $0 }
        for task in tasks { await task.value }
        if let refresher = topologyTask.withLock({ $0 }) {
            refresher.cancel()
            await refresher.value
        }
        for client in clients { await client.close() }
        await redisTopology.close()
    }
}
