import CounterCore
import Persistence
import ShardRouter
import Synchronization

/// One shard: owns the posts of its slots and serialises every operation on them, without locks.
///
/// Operations queue while a batch is being processed; the next batch takes all of them. A batch
/// costs one Redis read round trip (is the post hydrated, its count, the membership of the batch's
/// users), a decision in memory (`ShardDecider`), and one Redis write round trip that carries every
/// change with its write-behind log entry, atomically per slot (`MULTI`/`EXEC`). Thousands of
/// concurrent likes on one post therefore cost a few round trips, not thousands.
///
/// The actor is the I/O shell of that protocol: admission, the inbox, and calling Redis and
/// PostgreSQL with what `BatchStateMachine` asks for; every decision of a batch is the machine's.
///
/// Counts and memberships are read from Redis in every batch (the count costs nothing extra: it
/// rides in the read pipeline the memberships need anyway), so memory holds no per-post state
/// beyond a bounded list of posts known not to exist.
actor ShardActor {
    private struct Pending {
        let request: ShardDecider.Request
        let completion: @Sendable (Result<LikeState, Error>) -> Void

        func resume(with result: Result<LikeState, CounterError>) { completion(result.mapError { $0 }) }
        func resume(throwing error: Error) { completion(.failure(error)) }
    }

    let index: Int
    private let redis: RedisClient
    /// Large posts' background loads write their pages here, so the batches' own connection
    /// never waits behind a page.
    private let hydrationRedis: RedisClient
    private let pool: PostgresPool
    private let layout: RedisKeyLayout
    private let configuration: WritePathConfiguration
    private let flusher: WriteBehindFlusher
    private let gauge: BacklogGauge
    private let log: NodeLog
    /// Sends the writes, with this node's epoch for each slot.
    private let writer: SlotWriter
    private let ownership: OwnedSlots
    /// Whether writes are being refused for the backlog: logged when it starts and ends, not per
    /// refused write.
    private let refusingWrites = Atomic<Bool>(false)

    /// Posts PostgreSQL does not have, refused without asking it again for a while.
    private var unknownPosts: UnknownPostMemory
    /// Large posts being loaded in the background, with the operations waiting for them.
    private var largeHydrations: [Int64: LargeHydration] = [:]

    private struct LargeHydration {
        var parked: [Pending]
        /// The epoch held when the batch that deferred the post began (`nil` for a sole writer):
        /// the load is published only under it.
        let epoch: Int64?
        /// Whether its load has started (at most `concurrentLargeLoads` run at once).
        var started = false
        /// Redis's copy of the post was reset or dropped meanwhile: the load is not published;
        /// its operations go to the next batch, which loads the post afresh (or refuses it).
        var cancelled = false
    }

    /// Large posts a shard loads at once; others wait their turn. Each load holds a PostgreSQL
    /// connection of the pool (shared with the flusher and the batches) while it runs.
    static let concurrentLargeLoads = 2

    /// A background load that ended, for the drain loop to publish between batches.
    private struct LoadedPost {
        let hydration: LargePostHydration
        let result: Result<Int, Error>
        let started: ContinuousClock.Instant
    }
    /// Operations waiting for the next batch. A lock, not actor isolation, guards it, so callers
    /// on any thread (the HTTP thread included) can add to it without a hop; the drain task is
    /// started once per busy period, not once per operation.
    private let inbox = Mutex(Inbox())
    private let accepting = Atomic<Bool>(true)
    /// Operations parked on large posts being loaded, as of the end of the last batch: they
    /// count toward `maximumQueuedOperationsPerShard` with the queue.
    private let parkedOperations = Atomic<Int>(0)

    private struct Inbox {
        var pending: [Pending] = []
        /// Requests to load posts into Redis afresh from PostgreSQL, run between batches.
        var resyncs: [Resync] = []
        /// Callers of `waitForQueuedOperations()`, resumed after the batch taken with them.
        var barriers: [CheckedContinuation<Void, Never>] = []
        /// Large posts whose background load ended, published between batches.
        var loaded: [LoadedPost] = []
        var draining = false
    }

    private struct Resync {
        let posts: [Int64]
        let completion: @Sendable (Set<Int64>) -> Void
    }
    private var stats = ShardStats()

    init(index: Int, redis: RedisClient, hydrationRedis: RedisClient? = nil, pool: PostgresPool, layout: RedisKeyLayout,
         configuration: WritePathConfiguration, flusher: WriteBehindFlusher, gauge: BacklogGauge,
         ownership: OwnedSlots = .soleWriter(), log: NodeLog = .silent) {
        self.writer = SlotWriter(redis: redis, ownership: ownership, layout: layout, log: log)
        self.ownership = ownership
        self.index = index
        self.redis = redis
        self.hydrationRedis = hydrationRedis ?? redis
        self.pool = pool
        self.layout = layout
        self.configuration = configuration
        self.flusher = flusher
        self.gauge = gauge
        self.log = log
        self.unknownPosts = UnknownPostMemory(capacity: max(1, configuration.unknownPostsRemembered), lifetime: configuration.unknownPostMemory)
    }

    /// Performs one operation and returns the state after it, once it is acknowledged as
    /// configured.
    /// - Throws: `CounterError` — `.unknownPost`, `.backlogFull`, `.unavailable`, `.shuttingDown`.
    func perform(_ request: ShardDecider.Request) async throws -> LikeState {
        try await withCheckedThrowingContinuation { continuation in
            submit(request) { continuation.resume(with: $0) }
        }
    }

    /// Queues one operation; `completion` runs once it is answered (on the shard's executor, or
    /// at once when the operation is refused). Callable from any thread, without waiting.
    nonisolated func submit(_ request: ShardDecider.Request, completion: @escaping @Sendable (Result<LikeState, Error>) -> Void) {
        do {
            try admit(request)
            enqueue(Pending(request: request, completion: completion))
        } catch {
            completion(.failure(error))
        }
    }

    /// Performs several operations in one batch (a feed page's reads, say) and returns one
    /// result per request, in order.
    func performAll(_ requests: [ShardDecider.Request]) async -> [Result<LikeState, Error>] {
        let collector = ResultCollector(count: requests.count)
        return await withCheckedContinuation { continuation in
            collector.onComplete { continuation.resume(returning: $0) }
            for (offset, request) in requests.enumerated() {
                submit(request) { collector.set(offset, $0) }
            }
        }
    }

    private nonisolated func admit(_ request: ShardDecider.Request) throws {
        guard accepting.load(ordering: .relaxed) else { throw CounterError(code: .shuttingDown, message: "the node is shutting down") }
        guard request.operation.mayWrite else { return }
        let pending = gauge.value
        if pending < configuration.backlogLimitPerShard {
            if refusingWrites.load(ordering: .relaxed), refusingWrites.exchange(false, ordering: .relaxed) {
                log.log(.info, "writes_accepted", ["shard": String(index), "pending_changes": String(pending)])
            }
        } else {
            if !refusingWrites.exchange(true, ordering: .relaxed) {
                log.log(.warn, "writes_refused", ["shard": String(index), "pending_changes": String(pending),
                                                  "backlog_limit": String(configuration.backlogLimitPerShard),
                                                  "why": "PostgreSQL is behind; writes get 503 backlog_full until the flusher catches up"])
            }
            throw CounterError(code: .backlogFull,
                               message: "\(gauge.value) changes of this shard wait for PostgreSQL (limit \(configuration.backlogLimitPerShard)); retry later",
                               retryAfterSeconds: 1)
        }
    }

    private nonisolated func enqueue(_ pending: Pending) {
        let limit = configuration.maximumQueuedOperationsPerShard
        let parked = parkedOperations.load(ordering: .relaxed)
        var refused = false
        addToInbox { inbox in
            if inbox.pending.count + parked >= limit { refused = true } else { inbox.pending.append(pending) }
        }
        if refused {
            pending.resume(with: .failure(CounterError(
                code: .overloaded, message: "shard \(index) already holds \(limit) operations waiting to be decided; retry later",
                retryAfterSeconds: 1)))
        }
    }

    /// Adds work to the inbox and starts the drain task unless one runs: the one way in, for
    /// operations, resyncs and finished background loads alike.
    private nonisolated func addToInbox(_ add: (inout Inbox) -> Void) {
        let startDrain = inbox.withLock { inbox in
            add(&inbox)
            if inbox.draining { return false }
            inbox.draining = true
            return true
        }
        if startDrain { Task { await self.drain() } }
    }

    /// Makes Redis forget `posts` (hydration marker, likers set), so the next touch loads them from PostgreSQL — for posts whose Redis state drifted from
    /// PostgreSQL (after a Redis failover lost writes it had acknowledged). Runs between batches,
    /// so no change of the shard is in flight; a post whose slot still has changes waiting for
    /// PostgreSQL is left alone, since PostgreSQL does not have them yet.
    /// - Returns: the posts that were reset.
    func resyncFromPostgres(_ posts: [Int64]) async -> Set<Int64> {
        await withCheckedContinuation { continuation in
            addToInbox { $0.resyncs.append(Resync(posts: posts) { continuation.resume(returning: $0) }) }
        }
    }

    /// Returns once every operation queued before the call has been processed: its changes written
    /// to Redis and noted by the flusher, or failed. An answer from memory comes before its write,
    /// so a flush that must include every acknowledged change waits for this first.
    func waitForQueuedOperations() async {
        await withCheckedContinuation { continuation in
            let queued = inbox.withLock { inbox in
                // Not draining: nothing is queued or being processed.
                if inbox.draining { inbox.barriers.append(continuation) }
                return inbox.draining
            }
            if !queued { continuation.resume() }
        }
    }

    /// Refuses new operations from now on; queued ones are still answered.
    func stopAccepting() {
        accepting.store(false, ordering: .relaxed)
    }

    /// Forgets posts that turned out not to exist (deleted from `posts`): operations on them are
    /// refused for `unknownPostMemory` without asking PostgreSQL.
    func forget(posts: [Int64]) {
        unknownPosts.remember(posts, at: .now)
    }

    /// Drops posts PostgreSQL no longer has (the flusher found changes to them): forgets them
    /// (`forget(posts:)`) and deletes their Redis keys (hydration marker, likers set), so that
    /// once the memory expires the next touch asks PostgreSQL again instead of trusting what Redis
    /// still holds. A failed delete is counted; the post is then refused only while remembered.
    func dropDeletedPosts(_ posts: [Int64]) async {
        guard !posts.isEmpty else { return }
        forget(posts: posts)
        cancelLargeHydrations(of: posts)
        let results = await writer.execute(PostHydration.transactions(unloading: posts, layout: layout))
        if !PostHydration.failures(of: posts, results).isEmpty { stats.redisErrors += 1 }
    }

    /// Drops the memory that posts do not exist, so the next touch asks PostgreSQL again.
    func recheckExistence(of posts: [Int64]) {
        unknownPosts.remove(posts)
    }

    func currentStats() -> ShardStats {
        stats
    }

    // MARK: - Batches

    private func drain() async {
        while true {
            // Take everything queued, or, when nothing is, end this busy period — atomically, so
            // an operation added meanwhile always finds a drain running or starts one.
            let (queued, resyncs, barriers, loaded) = inbox.withLock { inbox in
                if inbox.pending.isEmpty && inbox.resyncs.isEmpty && inbox.barriers.isEmpty && inbox.loaded.isEmpty {
                    inbox.draining = false
                    return ([Pending](), [Resync](), [CheckedContinuation<Void, Never>](), [LoadedPost]())
                }
                defer {
                    inbox.pending.removeAll(keepingCapacity: true)
                    inbox.resyncs.removeAll()
                    inbox.barriers.removeAll()
                    inbox.loaded.removeAll()
                }
                return (inbox.pending, inbox.resyncs, inbox.barriers, inbox.loaded)
            }
            if queued.isEmpty && resyncs.isEmpty && barriers.isEmpty && loaded.isEmpty { return }
            for resync in resyncs { resync.completion(await resetRedis(resync.posts)) }
            // Operations that waited for a large post go first, in their order.
            // Counted once, when they arrive (those that waited for a large post were counted then).
            stats.operations += queued.count
            var batch: [Pending] = []
            for done in loaded { batch += await publish(done) }
            batch += queued
            if !batch.isEmpty { await process(batch) }
            parkedOperations.store(largeHydrations.values.reduce(0) { $0 + $1.parked.count }, ordering: .relaxed)
            // Everything queued before these callers was in this batch or an earlier one.
            for barrier in barriers { barrier.resume() }
        }
    }

    private func resetRedis(_ posts: [Int64]) async -> Set<Int64> {
        cancelLargeHydrations(of: posts)
        var quiet: [Int64] = []
        for post in posts where !(await flusher.hasPendingChanges(inSlot: HashSlot(post: post).rawValue)) { quiet.append(post) }
        let results = await writer.execute(PostHydration.transactions(unloading: quiet, layout: layout))
        return Set(quiet).subtracting(PostHydration.failures(of: quiet, results).keys)
    }

    /// Runs one batch: refuses posts known not to exist, then performs what the batch's state
    /// machine asks for until it finishes, answering as it says.
    private func process(_ batch: [Pending]) async {
        let live = refusingUnknownPosts(parkingOnLargeHydrations(batch))
        guard !live.isEmpty else { return }
        // The epochs held as the batch begins: its writes carry them, so a batch whose slot
        // changed owner meanwhile (even back to this node) is refused rather than written on
        // reads made under another owner.
        let epochs = ownership.isFenced ? heldEpochs(of: live) : nil
        var machine = BatchStateMachine(requests: live.map(\.request), acknowledgement: configuration.acknowledgement, layout: layout)
        var action = machine.start()
        while true {
            settle(machine.takeSettled(), of: live, epochs: epochs)
            switch action {
            case .read(let groups):
                action = machine.redisReplied(await redis.execute(groups))
            case .hydrate(let groups), .write(let groups):
                action = machine.redisReplied(await writer.execute(epochs: epochs, groups))
            case .findPosts(let posts):
                do {
                    let rows = try await pool.query(PostHydration.existingPostsQuery, [.int64Array(posts)])
                    action = machine.postsFound(try PostHydration.postIDs(in: rows),
                                                large: try PostHydration.largePosts(in: rows, threshold: configuration.streamingHydrationThreshold))
                } catch {
                    action = machine.postgresFailed(error)
                }
            case .loadLikers(let posts):
                do {
                    let started = ContinuousClock.now
                    let rows = try await pool.query(PostHydration.likersQuery, [.int64Array(posts)])
                    let likers = try PostHydration.likers(in: rows)
                    for (post, users) in likers where users.count >= Self.largePostLikers {
                        log.log(.info, "hydrating_large_post", ["shard": String(index), "post": String(post), "likers": String(users.count),
                                                                "postgres_ms": String(Int((ContinuousClock.now - started).inSeconds * 1_000))])
                    }
                    action = machine.likersLoaded(likers)
                } catch {
                    action = machine.postgresFailed(error)
                }
            case .finish(let completion):
                await finish(completion, of: live)
                return
            }
        }
    }

    /// The epoch held now for each slot of `batch` that this node may write.
    private func heldEpochs(of batch: [Pending]) -> [UInt16: Int64] {
        var epochs: [UInt16: Int64] = [:]
        for pending in batch {
            let slot = HashSlot(post: pending.request.postID).rawValue
            if epochs[slot] == nil, let epoch = ownership.writeEpoch(slot) { epochs[slot] = epoch }
        }
        return epochs
    }

    /// Posts with at least this many likers are logged when they are loaded into Redis: their
    /// first touch costs a large read and write, which shows in the latency of their batch.
    static let largePostLikers = 10_000

    /// `batch` without the operations on posts remembered as missing, which are answered.
    private func refusingUnknownPosts(_ batch: [Pending]) -> [Pending] {
        if unknownPosts.isEmpty { return batch }
        let now = ContinuousClock.now
        unknownPosts.dropExpired(at: now)
        if unknownPosts.isEmpty { return batch }
        var live: [Pending] = []
        live.reserveCapacity(batch.count)
        for pending in batch {
            if unknownPosts.isUnknown(pending.request.postID, at: now) {
                pending.resume(throwing: CounterError.unknownPost(pending.request.postID))
            } else {
                live.append(pending)
            }
        }
        return live
    }

    /// Gives the answers due now, remembers the posts found missing, and parks the operations
    /// on large posts while those load in the background.
    /// - Parameter epochs: those held as the batch began (`nil` for a sole writer).
    private func settle(_ settled: BatchStateMachine.Settled, of live: [Pending], epochs: [UInt16: Int64]?) {
        if !settled.missingPosts.isEmpty { forget(posts: settled.missingPosts) }
        for answer in settled.answers { live[answer.request].resume(with: answer.result) }
        for (post, requests) in settled.deferred { park(requests.map { live[$0] }, onLargePost: post, epochs: epochs) }
    }

    // MARK: - Large posts

    /// `batch` without the operations on posts being loaded in the background, which wait for it.
    private func parkingOnLargeHydrations(_ batch: [Pending]) -> [Pending] {
        if largeHydrations.isEmpty { return batch }
        var rest: [Pending] = []
        rest.reserveCapacity(batch.count)
        for pending in batch {
            if largeHydrations[pending.request.postID] != nil {
                largeHydrations[pending.request.postID]!.parked.append(pending)
            } else {
                rest.append(pending)
            }
        }
        return rest
    }

    /// Parks `operations` until `post` is loaded, and starts its background load when its turn
    /// comes. A fenced batch that no longer held the post's slot as it began refuses them
    /// instead (`notOwner`: they go to the owner).
    private func park(_ operations: [Pending], onLargePost post: Int64, epochs: [UInt16: Int64]?) {
        if largeHydrations[post] != nil {
            largeHydrations[post]!.parked += operations
            return
        }
        let slot = HashSlot(post: post)
        let epoch = epochs?[slot.rawValue]
        if epochs != nil && epoch == nil {
            let refusal = BatchStateMachine.counterError(SlotWriter.notHeld(slot))
            for pending in operations { pending.resume(with: .failure(refusal)) }
            return
        }
        largeHydrations[post] = LargeHydration(parked: operations, epoch: epoch)
        startLargeLoads()
    }

    /// Starts waiting loads while fewer than `concurrentLargeLoads` run.
    private func startLargeLoads() {
        var running = largeHydrations.values.filter(\.started).count
        for (post, state) in largeHydrations where !state.started && running < Self.concurrentLargeLoads {
            largeHydrations[post]!.started = true
            running += 1
            let hydration = LargePostHydration(post: post, pool: pool, redis: hydrationRedis, layout: layout,
                                               pageSize: configuration.hydrationPageSize)
            log.log(.info, "hydrating_large_post", ["shard": String(index), "post": String(post), "phase": "started"])
            let started = ContinuousClock.now
            Task {
                let result: Result<Int, Error>
                do { result = .success(try await hydration.load()) } catch { result = .failure(error) }
                self.enqueueLoaded(LoadedPost(hydration: hydration, result: result, started: started))
            }
        }
    }

    private nonisolated func enqueueLoaded(_ loaded: LoadedPost) {
        addToInbox { $0.loaded.append(loaded) }
    }

    /// Ends a background load, between batches: publishes it (unless Redis's copy of the post
    /// was reset or dropped meanwhile) and returns the operations that waited for it, for the
    /// next batch; if it failed, they fail with its error.
    private func publish(_ done: LoadedPost) async -> [Pending] {
        let post = done.hydration.post
        guard let state = largeHydrations.removeValue(forKey: post) else { return [] }
        defer { startLargeLoads() }
        if state.cancelled {
            await done.hydration.discard()
            return state.parked
        }
        do {
            let loaded = try done.result.get()
            try await done.hydration.publish(loaded: loaded, epoch: state.epoch)
            log.log(.info, "hydrating_large_post", ["shard": String(index), "post": String(post), "phase": "loaded",
                                                    "likers": String(loaded), "waiting": String(state.parked.count),
                                                    "ms": String(Int((ContinuousClock.now - done.started).inSeconds * 1_000))])
            return state.parked
        } catch {
            if error is RedisError { stats.redisErrors += 1 }
            if error is PostgresError { stats.postgresErrors += 1 }
            await done.hydration.discard()
            log.log(.warn, "hydrating_large_post", ["shard": String(index), "post": String(post), "phase": "failed", "error": "\(error)"])
            let failure = BatchStateMachine.counterError(error)
            for pending in state.parked { pending.resume(with: .failure(failure)) }
            return []
        }
    }

    /// Redis's copy of `posts` is being reset or dropped: loads of them under way are not published.
    private func cancelLargeHydrations(of posts: [Int64]) {
        for post in posts where largeHydrations[post] != nil { largeHydrations[post]!.cancelled = true }
    }

    /// Tells the flusher what the write did (before answering, so that a caller's `flush()`
    /// after its answer covers its change), then answers — in `postgres` mode once the flush
    /// holding the batch commits, while the shard moves on.
    private func finish(_ completion: BatchStateMachine.Completion, of live: [Pending]) async {
        if !completion.uncertainSlots.isEmpty { await flusher.noteUncertain(completion.uncertainSlots) }
        stats.record(completion.statistics)
        if !completion.appended.isEmpty { await flusher.noteAppended(completion.appended) }
        for answer in completion.answers { live[answer.request].resume(with: answer.result) }
        guard let (marks, waiting) = completion.afterApplied else { return }
        // Answered by the flusher once the flush holding the batch commits; the shard moves on.
        await flusher.whenApplied(marks) { outcome in
            switch outcome {
            case .success: for answer in waiting { live[answer.request].resume(with: answer.result) }
            case .failure(let error): for answer in waiting { live[answer.request].resume(throwing: error) }
            }
        }
    }
}
