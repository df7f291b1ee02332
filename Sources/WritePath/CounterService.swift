import CounterCore
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter

/// The write path of one node: its shards, each the one owner of its slots' decisions,
/// write-behind and ownership (`Shard`, `ShardStateMachine`).
///
/// As a `Service` (`run(_:)`), it reads where Redis keeps each slot (one server, or the masters
/// of a Redis Cluster), moves dead letters kept under an older key, runs the shards and the slot
/// map's refresh, and — for a sole writer — recovers what the logs still hold from before a
/// crash or restart before it says it has started; operations are routed to the shard that owns
/// the post's slot. Asked to stop, it refuses new operations, answers those queued, flushes
/// everything to PostgreSQL and returns.
public final class CounterService: Service {
    /// How the shards behave.
    public let configuration: WritePathConfiguration
    /// Which shard owns which slot.
    public let shardMap: ShardMap
    /// The shards, by index (`shardMap`).
    let shards: [Shard]
    /// Acknowledgement → PostgreSQL commit, per change, over all shards.
    public let writeBehindLag = WriteBehindLag()
    /// Rung after every flush transaction of this node that commits: whoever sleeps on it (the
    /// change events' long polls) looks for what it wrote at once, not at its next poll.
    public let flushCommits = LoopAlarm()
    private let clients: [RedisClient]
    /// Where Redis keeps each slot, shared by every Redis client of this service.
    public let redisTopology: RedisTopology
    /// Which slots this node decides for, under which epochs, as the shards publish them.
    public let ownership: OwnedSlots
    private let layout: RedisKeyLayout
    private let log: NodeLog
    /// Walks Redis for hot posts from before this process, and holds the memory target.
    private let sweeper: HotSetSweeper

    /// Builds the shards; nothing connects or runs until `run(_:)`. `log` hears of flush
    /// retries, dead letters, Redis nodes lost and found, large posts loaded and refused writes.
    /// - Throws: `CounterError(.invalidArgument)` for an unusable configuration.
    public convenience init(
        configuration: WritePathConfiguration, postgres: PostgresPool, redis: RedisConfiguration,
        ownership: OwnedSlots = .soleWriter(), log: NodeLog = .silent
    ) throws {
        try self.init(
            configuration: configuration, postgres: postgres, topology: RedisTopology(configuration: redis, log: log),
            ownership: ownership, log: log)
    }

    /// Builds the shards over `topology` (discovered, for a cluster, when the service runs).
    /// - Parameter ownership: which slots this node decides for: every one, unfenced
    ///   (`soleWriter()`, the default), or what a cluster's membership gives it (`acquire`).
    /// - Throws: `CounterError(.invalidArgument)` for an unusable configuration.
    public init(
        configuration: WritePathConfiguration, postgres: PostgresPool, topology: RedisTopology,
        ownership: OwnedSlots = .soleWriter(), log: NodeLog = .silent
    ) throws {
        guard let map = try? ShardMap(shardCount: configuration.shardCount) else {
            throw CounterError(code: .invalidArgument, message: "shard count must be between 1 and \(HashSlot.count)")
        }
        guard configuration.backlogLimitPerShard >= 1,
            configuration.flushBatchSize >= 1
        else {
            throw CounterError(code: .invalidArgument, message: "backlog limit and flush batch size must be at least 1")
        }
        self.configuration = configuration
        self.shardMap = map
        self.ownership = ownership
        self.log = log
        let layout = RedisKeyLayout(prefix: configuration.keyPrefix)
        self.layout = layout
        var shards: [Shard] = []
        var clients: [RedisClient] = []
        for index in 0..<configuration.shardCount {
            let io = ShardIO(
                index: index, batchRedis: RedisClient(topology: topology, timeout: configuration.batchRedisTimeout),
                flushRedis: RedisClient(topology: topology),
                hydrationRedis: RedisClient(topology: topology), pool: postgres, layout: layout,
                configuration: configuration, ownership: ownership, lag: writeBehindLag, commits: flushCommits, log: log)
            shards.append(
                Shard(
                    index: index, slots: map.slots(ofShard: index), io: io, configuration: configuration,
                    ownership: ownership, log: log))
            clients += [io.batchRedis, io.flushRedis, io.hydrationRedis]
        }
        let sweeperRedis = RedisClient(topology: topology)
        let lettersRedis = RedisClient(topology: topology)
        self.sweeper = HotSetSweeper(
            redis: sweeperRedis, lettersRedis: lettersRedis, layout: layout, configuration: configuration,
            shardMap: map, shards: shards, repeatsDiscovery: ownership.isFenced, log: log)
        self.shards = shards
        self.clients = clients + [sweeperRedis, lettersRedis]
        self.redisTopology = topology
        // A Redis master that failed over lost what it had not replicated: the shards that
        // serve its slots repair them (`ShardStateMachine+Repair`).
        let built = shards
        topology.onFailover { slots in
            var byShard: [Int: [UInt16]] = [:]
            for slot in slots { byShard[map.shard(for: HashSlot(rawValue: slot)!), default: []].append(slot) }
            for (shard, part) in byShard { built[shard].tell(.redisFailedOver(part)) }
        }
    }

    // MARK: - Running

    /// Waits while Redis is still loading its data after a restart (it answers `LOADING`), saying
    /// so in the log when it starts waiting and every 5 s, and when it is done.
    private func waitForRedis(_ lifecycle: ServiceLifecycle) async throws {
        func seconds(_ duration: Duration) -> String { String((duration.inSeconds * 10).rounded() / 10) }
        var lastSaid: Duration?
        var waitedInAll: Duration?
        try await clients[0].waitWhileLoading(shouldStop: { lifecycle.isStopRequested }) { waited, error in
            waitedInAll = waited
            guard lastSaid.map({ waited - $0 >= .seconds(5) }) ?? true else { return }
            lastSaid = waited
            log.log(.warn, "redis_loading", ["waited_s": seconds(waited), "reply": error.message])
        }
        if let waitedInAll { log.log(.info, "redis_loaded", ["waited_s": seconds(waitedInAll)]) }
    }

    /// Waits while Redis is still loading its data (`waitForRedis`), reads the Redis Cluster's
    /// slot map (for a cluster), moves dead letters kept under an older key, runs the shards and
    /// the map's periodic refresh, and (for a sole writer) recovers each shard's unflushed log
    /// entries; then it has started. Asked to stop, it
    /// refuses new operations, answers those queued, drains everything acknowledged to
    /// PostgreSQL (unless `abandonDrain()` was called) and closes its connections.
    /// - Throws: `RedisError(.clusterConfiguration)` when the seeds are not a usable cluster;
    ///   other errors when Redis cannot be read at start (what started is stopped first).
    public func run(_ lifecycle: ServiceLifecycle) async throws {
        do {
            try await waitForRedis(lifecycle)
            try await redisTopology.discover()
            try await DeadLetterKeyUpgrade.run(clients[0], layout: layout)
        } catch {
            await closeConnections()
            throw error
        }
        let shards = self.shards
        let topology = redisTopology
        let sweeper = self.sweeper
        let recovering = !ownership.isFenced
        var failure: Error?
        await withDiscardingTaskGroup { group in
            group.addTask { await topology.run() }
            group.addTask { await sweeper.run() }
            await withDiscardingTaskGroup { running in
                for shard in shards { running.addTask { await shard.run() } }
                // A node of a cluster drains each slot's log when it wins the slot (`acquire`).
                if recovering { failure = await Self.recover(shards) }
                if failure == nil {
                    lifecycle.started()
                    await lifecycle.stopRequested()
                }
                // Each shard ends once it has answered what was queued and (unless told to
                // abandon it) drained its logs.
                for shard in shards { shard.tell(.stop(drain: failure == nil)) }
            }
            group.cancelAll()
        }
        await closeConnections()
        if let failure { throw failure }
    }

    /// Reads what every shard's logs still hold from before (a sole writer's start).
    /// - Returns: the first failure, if any.
    private static func recover(_ shards: [Shard]) async -> Error? {
        await withTaskGroup(of: Error?.self) { recoveries in
            for shard in shards {
                recoveries.addTask {
                    if case .failure(let error) = await shard.ask({ .recover($0) }) { return error }
                    return nil
                }
            }
            var first: Error?
            for await error in recoveries where first == nil { first = error }
            return first
        }
    }

    private func closeConnections() async {
        for client in clients { await client.close() }
        await redisTopology.close()
    }

    /// Gives up draining: the shards stop after the flush under way (callers waiting for
    /// PostgreSQL are told the write path is shutting down), leaving what waits in the Redis logs
    /// for the next start. For a shutdown that ran out of time.
    public func abandonDrain() async {
        for shard in shards { shard.tell(.stop(drain: false)) }
    }

    // MARK: - Operations

    /// Performs `operation` for user `userID` on post `postID`.
    /// - Parameter waitingForSlot: wait (up to `slotMoveWait`) even if the post's slot is not
    ///   owned here yet: the caller has reason to think it is on its way (the map names this
    ///   node its owner).
    /// - Parameter acknowledgedAt: for a change made earlier and written again (a dead letter
    ///   replayed): when it was first acknowledged (Unix milliseconds), which its row keeps.
    /// - Returns: the membership and count after it.
    /// - Throws: `CounterError` (`.notOwner` when another node owns the post's slot,
    ///   `.slotMoving` when its move did not settle in time).
    public func perform(
        _ operation: LikeOperation, post postID: Int64, user userID: Int64, kind: ReactionKind = .like,
        waitingForSlot: Bool = false, acknowledgedAt: Int64? = nil
    ) async throws -> LikeState {
        guard postID > 0, userID > 0 || operation == .count else {
            throw CounterError(code: .invalidArgument, message: "ids must be positive 64-bit integers (post \(postID), user \(userID))")
        }
        if let refusal = refusal(of: kind) { throw refusal }
        let slot = HashSlot(post: postID)
        return try await shards[shardMap.shard(for: slot)].perform(
            ShardDecider.Request(operation: operation, postID: postID, userID: userID, kind: kind, acknowledgedAt: acknowledgedAt),
            slot: slot.rawValue, waitsForSlot: waitingForSlot)
    }

    /// The deployment's reaction model.
    public var reactions: ReactionModel { configuration.reactions }

    /// Why an operation may not name `kind` (one the deployment's fixed kinds do not list), or
    /// `nil` when it may.
    public func refusal(of kind: ReactionKind) -> CounterError? {
        guard !configuration.reactions.allows(kind) else { return nil }
        let known: String
        switch configuration.reactions.kinds {
        case .fixed(let list): known = list.map(\.name).joined(separator: ", ")
        case .open: known = "any"
        }
        return CounterError(
            code: .unknownKind, message: "'\(kind)' is not a reaction kind of this deployment (kinds: \(known)); nothing was changed")
    }

    /// Queues `operation` and calls `completion` with the answer, without waiting: for callers on
    /// threads of their own (the HTTP thread). `completion` runs on the shard's loop, or at once
    /// when the operation is refused.
    public func submit(
        _ operation: LikeOperation, post postID: Int64, user userID: Int64, kind: ReactionKind = .like,
        completion: @escaping @Sendable (Result<LikeState, Error>) -> Void
    ) {
        guard postID > 0, userID > 0 || operation == .count else {
            completion(
                .failure(CounterError(code: .invalidArgument, message: "ids must be positive 64-bit integers (post \(postID), user \(userID))")))
            return
        }
        if let refusal = refusal(of: kind) {
            completion(.failure(refusal))
            return
        }
        let slot = HashSlot(post: postID)
        shards[shardMap.shard(for: slot)].submit(
            ShardDecider.Request(operation: operation, postID: postID, userID: userID, kind: kind),
            slot: slot.rawValue, completion: completion)
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

    /// Whether this node decides for its slots: a node of a cluster stops (operations on its
    /// slots are refused, `unavailable`) while its lease may be running out, and starts again
    /// once a renewal gets through.
    public func setDeciding(_ deciding: Bool) async {
        for shard in shards { shard.tell(.deciding(deciding)) }
    }

    /// PostgreSQL answers again after an outage (seen by the cluster lease's renewals): every
    /// shard's flusher tries at once instead of waiting out the backoff its failures built up
    /// (up to `retryMaximumDelay`), so the backlog a failover left starts draining on the new
    /// primary within a renewal's retry.
    public func retryFlushesNow() async {
        for shard in shards { shard.tell(.postgresReachable) }
    }

    // MARK: - Lists

    /// The changes of `postID` acknowledged here that PostgreSQL may not have yet, one per
    /// user (the newest): laid over PostgreSQL's rows, they make a list of its likers exact at
    /// the time of the call. A log the shard has not seen whole (a write whose outcome is
    /// unknown, a sole writer's log from before its start) is flushed first.
    /// - Parameter waitingForSlot: wait (up to `slotMoveWait`) for a slot not owned here yet.
    /// - Throws: `CounterError` (`.notOwner` when another node owns the post's slot,
    ///   `.slotMoving` when its move did not settle in time, `.shuttingDown`); a flush's error.
    public func pendingLikes(ofPost postID: Int64, waitingForSlot: Bool = false) async throws -> [PendingLike] {
        guard postID > 0 else { throw CounterError(code: .invalidArgument, message: "post id \(postID) is not a positive 64-bit integer") }
        return try await pendingLikes(.post(postID), of: shards[shardMap.shard(forPost: postID)], waitingForSlot: waitingForSlot)
    }

    /// The changes of `posts` (a feed page's, all of their slots served here) acknowledged here
    /// that PostgreSQL may not have yet, one per (user, post), by post.
    /// - Throws: as `pendingLikes(ofPost:)`.
    public func pendingLikes(ofPosts posts: [Int64]) async throws -> [Int64: [PendingLike]] {
        var byShard: [Int: [Int64]] = [:]
        for post in posts where post > 0 { byShard[shardMap.shard(forPost: post), default: []].append(post) }
        let shards = self.shards
        let changes = try await withThrowingTaskGroup(of: [PendingLike].self) { group in
            for (shard, part) in byShard { group.addTask { try await self.pendingLikes(.posts(part), of: shards[shard], waitingForSlot: false) } }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        return Dictionary(grouping: changes, by: \.postID)
    }

    /// The changes of `userID` acknowledged here that PostgreSQL may not have yet, one per post,
    /// from every shard, and the slots they answered for: those this node serves (a node of a
    /// cluster is asked for its own; the others answer for theirs).
    /// - Throws: as `pendingLikes(ofPost:)`; `.slotMoving` while a slot this node is winning is
    ///   still draining its previous owner's log after `slotMoveWait`.
    public func pendingLikes(ofUser userID: Int64) async throws -> UserPendingLikes {
        guard userID > 0 else { throw CounterError(code: .invalidArgument, message: "user id \(userID) is not a positive 64-bit integer") }
        let shards = self.shards
        return try await withThrowingTaskGroup(of: UserPendingLikes.self) { group in
            for shard in shards {
                group.addTask {
                    let (changes, served) = try await self.shardPendingLikes(.user(userID), of: shard, waitingForSlot: false)
                    return UserPendingLikes(changes: changes, servedSlots: served ?? SlotSet())
                }
            }
            return try await group.reduce(into: UserPendingLikes(changes: [], servedSlots: SlotSet())) { all, shard in
                all.changes += shard.changes
                all.servedSlots.formUnion(shard.servedSlots)
            }
        }
    }

    private func pendingLikes(_ question: ShardStateMachine.PendingQuestion, of shard: Shard, waitingForSlot: Bool) async throws -> [PendingLike] {
        try await shardPendingLikes(question, of: shard, waitingForSlot: waitingForSlot).changes
    }

    /// A shard's answer: the changes, and the slots it answered for when asked for a user's.
    private func shardPendingLikes(
        _ question: ShardStateMachine.PendingQuestion, of shard: Shard,
        waitingForSlot: Bool
    ) async throws -> (changes: [PendingLike], served: SlotSet?) {
        // An answer from memory comes before its Redis write, and the index is filled by the write.
        if configuration.acknowledgement == .memory { _ = await shard.ask { .queuedOperationsDone($0) } }
        let deadline = ContinuousClock.now + configuration.slotMoveWait
        var flushed = false
        // A slot that is moving is asked again once it has moved (or at the deadline).
        let watch = ownership.watch()
        defer { watch.end() }
        while true {
            switch await shard.ask({ .pendingLikes(question, $0) }) {
            case .changes(let changes):
                return (changes, nil)
            case .userChanges(let changes, let served):
                return (changes, served)
            case .notOwner(let slot):
                guard waitingForSlot, ContinuousClock.now < deadline else { throw CounterError.notOwner(slot) }
            case .slotMoving(let slot):
                guard ContinuousClock.now < deadline else {
                    throw CounterError(
                        code: .slotMoving,
                        message: "slot \(slot) is changing owner and did not settle within \(configuration.slotMoveWait); nothing was done",
                        retryAfterSeconds: 1)
                }
            case .incomplete:
                guard !flushed else {
                    throw CounterError(code: .unavailable, message: "a write-behind log could not be read whole; retry", retryAfterSeconds: 1)
                }
                try await shard.ask { .flushAll($0) }.get()
                flushed = true
                continue
            }
            await watch.waitForMove(until: deadline)
            try Task.checkCancellation()
        }
    }

    // MARK: - Flushing

    /// Returns once every change acknowledged before the call is in PostgreSQL.
    public func flush() async throws {
        // An answer from memory (`AcknowledgementMode.memory`) comes before its Redis write: let
        // every shard write, and note, what it was given before this call.
        for shard in shards { _ = await shard.ask { .queuedOperationsDone($0) } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for shard in shards { group.addTask { try await shard.ask { .flushAll($0) }.get() } }
            try await group.waitForAll()
        }
    }

    /// Starts flushing everything acknowledged so far and returns at once (`flush()` waits).
    public func requestFlush() async {
        // As in `flush()`: what the shards were given (answered from memory, perhaps) is written
        // and noted first, so the flush covers it; this waits at most for the batches in flight.
        for shard in shards { _ = await shard.ask { .queuedOperationsDone($0) } }
        for shard in shards { shard.tell(.requestFlushAll) }
    }

    /// Seconds since the shard of `postID` last committed a flush.
    public func secondsSinceFlush(forPost postID: Int64) async -> Double {
        await shards[shardMap.shard(forPost: postID)].ask { .statistics($0) }.secondsSinceFlush
    }

    /// Per shard: operations, group commits, backlog, flushes, retries, errors, dead letters.
    public func stats() async -> [ShardStats] {
        var result: [ShardStats] = []
        for shard in shards { result.append(await shard.ask { .statistics($0) }) }
        return result
    }

    /// The slots whose write-behind logs hold changes not yet in PostgreSQL, with how many
    /// changes are counted in each (0: the log's content is not known until it is read again).
    public func pendingBySlot() async -> [UInt16: Int] {
        var pending: [UInt16: Int] = [:]
        for shard in shards { pending.merge(await shard.ask { .pendingBySlot($0) }) { $0 + $1 } }
        return pending
    }

    // MARK: - Operators' looks at posts

    /// Posts looked at by the shard that owns them, between two of its batches: Redis and
    /// PostgreSQL as of one moment, with whether the slot had changes waiting (`PostProbe`).
    /// Each shard reads at most `probeChunk` posts at a time, so its writes wait at most one
    /// chunk's reads.
    /// - Throws: Redis's or PostgreSQL's error; `CounterError` (`shuttingDown`) once stopped.
    public func probe(_ probe: PostProbe) async throws -> PostProbeResult {
        switch probe {
        case .inspect(let post, _), .likers(let post):
            return try await shards[shardMap.shard(forPost: post)].ask { .probe(probe, $0) }.get()
        case .counts(let posts, let kinds):
            var read: [PostCountsRead] = []
            for (shard, part) in byShard(posts).sorted(by: { $0.key < $1.key }) {
                for start in stride(from: 0, to: part.count, by: Self.probeChunk) {
                    let chunk = PostProbe.counts(Array(part[start..<min(part.count, start + Self.probeChunk)]), kinds: kinds)
                    if case .counts(let counts) = try await shards[shard].ask({ .probe(chunk, $0) }).get() { read += counts }
                }
            }
            return .counts(read.sorted { $0.postID < $1.postID })
        }
    }

    /// Most posts one shard reads for a probe at a time.
    static let probeChunk = 500

    // MARK: - Posts whose Redis copy is wrong

    /// Forgets that `posts` were found missing, so the next operation asks PostgreSQL again
    /// (for an operator who has just restored them).
    public func recheckExistence(of posts: [Int64]) async {
        for (shard, part) in byShard(posts) { shards[shard].tell(.recheckExistence(part)) }
        // Answered once each shard has taken it in.
        for (shard, _) in byShard(posts) { _ = await shards[shard].ask { .pendingBySlot($0) } }
    }

    /// Makes Redis load `posts` afresh from PostgreSQL on their next touch, for posts whose
    /// Redis state drifted (a Redis failover can lose writes it acknowledged). Posts whose slot
    /// has changes waiting for PostgreSQL are left alone.
    /// - Returns: the posts that were reset.
    public func resyncRedisFromPostgres(_ posts: [Int64]) async -> Set<Int64> {
        var reset: Set<Int64> = []
        for (shard, part) in byShard(posts.filter { $0 > 0 }) {
            reset.formUnion(await shards[shard].ask { .resync(part, $0) })
        }
        return reset
    }

    private func byShard(_ posts: [Int64]) -> [Int: [Int64]] {
        var byShard: [Int: [Int64]] = [:]
        for post in posts { byShard[shardMap.shard(forPost: post), default: []].append(post) }
        return byShard
    }

    // MARK: - Slots changing owner (a node of a cluster)

    /// Serves `epochs`' slots, just won in PostgreSQL: raises their epoch keys in Redis (from
    /// then on the previous owner's writes are refused), drains what their logs hold to
    /// PostgreSQL, and only then serves them. Operations on them wait meanwhile. A slot whose
    /// key already holds a higher epoch was overtaken by a later claim and is not served.
    /// - Returns: the slots now served.
    /// - Throws: when Redis or PostgreSQL fail; those slots are let go, and the caller tries again.
    @discardableResult
    public func acquire(_ epochs: [UInt16: Int64]) async throws -> Set<UInt16> {
        guard !epochs.isEmpty else { return [] }
        let parts = bySlotShard(epochs)
        let shards = self.shards
        return try await withThrowingTaskGroup(of: Set<UInt16>.self) { group in
            for (shard, part) in parts { group.addTask { try await shards[shard].ask { .claim(part, $0) }.get() } }
            return try await group.reduce(into: Set<UInt16>()) { $0.formUnion($1) }
        }
    }

    /// Prepares served `slots` to be handed to another node: new operations on them wait, the
    /// batches in flight are written (under the epochs held), and everything written for them
    /// is flushed to PostgreSQL. The caller then changes the owner in PostgreSQL and calls
    /// `handedOff`; until then the slots stay releasing.
    public func release(_ slots: Set<UInt16>) async throws {
        let parts = bySlotShard(Dictionary(uniqueKeysWithValues: slots.map { ($0, Int64(0)) }))
        let shards = self.shards
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (shard, part) in parts { group.addTask { try await shards[shard].ask { .release(Set(part.keys), $0) }.get() } }
            try await group.waitForAll()
        }
    }

    /// Serves again the `slots` whose hand-off failed (still under the epochs held).
    public func resumeServing(_ slots: Set<UInt16>) {
        for (shard, part) in bySlotShard(Dictionary(uniqueKeysWithValues: slots.map { ($0, Int64(0)) })) {
            shards[shard].tell(.resume(Set(part.keys)))
        }
    }

    /// After a hand-off changed the owner in PostgreSQL: raises the slots' epoch keys to their
    /// new epochs (`epochs`), so this node's writes are refused from now on whatever it still
    /// has in flight, and drops them and `alsoDropping` (whose change in PostgreSQL found
    /// another owner already).
    public func handedOff(_ epochs: [UInt16: Int64], alsoDropping: Set<UInt16>) async {
        var parts = bySlotShard(epochs)
        var dropping: [Int: Set<UInt16>] = [:]
        for slot in alsoDropping { dropping[shardMap.shard(for: HashSlot(rawValue: slot)!), default: []].insert(slot) }
        for shard in dropping.keys where parts[shard] == nil { parts[shard] = [:] }
        for (shard, part) in parts {
            await shards[shard].ask { .handedOff(part, alsoDropping: dropping[shard] ?? [], $0) }
        }
    }

    /// Stops deciding for `slots` (found to be another node's): operations on them are refused
    /// as `notOwner`, and what their shards knew of their logs is forgotten (the new owner
    /// drains them).
    public func drop(_ slots: Set<UInt16>) async {
        for (shard, part) in bySlotShard(Dictionary(uniqueKeysWithValues: slots.map { ($0, Int64(0)) })) {
            await shards[shard].ask { .drop(Set(part.keys), $0) }
        }
    }

    private func bySlotShard(_ epochs: [UInt16: Int64]) -> [Int: [UInt16: Int64]] {
        var parts: [Int: [UInt16: Int64]] = [:]
        for (slot, epoch) in epochs { parts[shardMap.shard(for: HashSlot(rawValue: slot)!), default: [:]][slot] = epoch }
        return parts
    }
}
