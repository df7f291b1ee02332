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
/// Counts and memberships are read from Redis in every batch (the count costs nothing extra: it
/// rides in the read pipeline the memberships need anyway), so memory holds no per-post state
/// beyond a bounded list of posts known not to exist.
actor ShardActor {
    private struct Pending {
        let request: ShardDecider.Request
        let completion: @Sendable (Result<LikeState, Error>) -> Void

        func resume(returning state: LikeState) { completion(.success(state)) }
        func resume(throwing error: Error) { completion(.failure(error)) }
    }

    let index: Int
    private let redis: RedisClient
    private let pool: PostgresPool
    private let layout: RedisKeyLayout
    private let configuration: WritePathConfiguration
    private let flusher: WriteBehindFlusher
    private let gauge: BacklogGauge

    /// Posts PostgreSQL does not have, refused without asking it again for a while.
    private var unknownPosts: UnknownPostMemory
    /// Operations waiting for the next batch. A lock, not actor isolation, guards it, so callers
    /// on any thread (the HTTP thread included) can add to it without a hop; the drain task is
    /// started once per busy period, not once per operation.
    private let inbox = Mutex(Inbox())
    private let accepting = Atomic<Bool>(true)

    private struct Inbox {
        var pending: [Pending] = []
        /// Requests to load posts into Redis afresh from PostgreSQL, run between batches.
        var resyncs: [Resync] = []
        var draining = false
    }

    private struct Resync {
        let posts: [Int64]
        let completion: @Sendable (Set<Int64>) -> Void
    }
    private var stats = ShardStats()

    init(index: Int, redis: RedisClient, pool: PostgresPool, layout: RedisKeyLayout,
         configuration: WritePathConfiguration, flusher: WriteBehindFlusher, gauge: BacklogGauge) {
        self.index = index
        self.redis = redis
        self.pool = pool
        self.layout = layout
        self.configuration = configuration
        self.flusher = flusher
        self.gauge = gauge
        self.unknownPosts = UnknownPostMemory(lifetime: configuration.unknownPostMemory)
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
        if request.operation.mayWrite && gauge.value >= configuration.backlogLimitPerShard {
            throw CounterError(code: .backlogFull,
                               message: "\(gauge.value) changes of this shard wait for PostgreSQL (limit \(configuration.backlogLimitPerShard)); retry later",
                               retryAfterSeconds: 1)
        }
    }

    private nonisolated func enqueue(_ pending: Pending) {
        let startDrain = inbox.withLock { inbox in
            inbox.pending.append(pending)
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
            let startDrain = inbox.withLock { inbox in
                inbox.resyncs.append(Resync(posts: posts) { continuation.resume(returning: $0) })
                if inbox.draining { return false }
                inbox.draining = true
                return true
            }
            if startDrain { Task { await self.drain() } }
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
            let (batch, resyncs) = inbox.withLock { inbox in
                if inbox.pending.isEmpty && inbox.resyncs.isEmpty {
                    inbox.draining = false
                    return ([Pending](), [Resync]())
                }
                defer {
                    inbox.pending.removeAll(keepingCapacity: true)
                    inbox.resyncs.removeAll()
                }
                return (inbox.pending, inbox.resyncs)
            }
            if batch.isEmpty && resyncs.isEmpty { return }
            for resync in resyncs { resync.completion(await resetRedis(resync.posts)) }
            if !batch.isEmpty { await process(batch) }
        }
    }

    private func resetRedis(_ posts: [Int64]) async -> Set<Int64> {
        var quiet: [Int64] = []
        for post in posts where !(await flusher.hasPendingChanges(inSlot: HashSlot(post: post).rawValue)) { quiet.append(post) }
        let results = await redis.execute(quiet.map { post in
            SlotCommands(slot: HashSlot(post: post),
                         commands: [.del([layout.hydratedMarker(ofPost: post)]), .del([layout.likers(ofPost: post)])], atomic: true)
        })
        var reset: Set<Int64> = []
        for (post, result) in zip(quiet, results) {
            if case .success = result { reset.insert(post) }
        }
        return reset
    }

    private func process(_ batch: [Pending]) async {
        stats.operations += batch.count
        var live = refusingUnknownPosts(batch)
        guard !live.isEmpty else { return }

        // 1. Read what Redis knows, hydrating posts it has never seen. A post whose Redis node
        //    failed is answered with the failure; the others go on.
        var views: [Int64: ShardDecider.PostView]
        do {
            var read = await readViews(live.map(\.request))
            fail(&live, read.failures)
            views = read.views
            let unhydrated = Set(live.map(\.request.postID)).subtracting(views.keys)
            if !unhydrated.isEmpty {
                let hydration = try await hydrate(Array(unhydrated))
                forget(posts: Array(hydration.missing))
                live = live.filter { pending in
                    guard hydration.missing.contains(pending.request.postID) else { return true }
                    pending.resume(throwing: CounterError.unknownPost(pending.request.postID))
                    return false
                }
                fail(&live, hydration.failures)
                let hydrated = unhydrated.subtracting(hydration.missing).subtracting(hydration.failures.keys)
                read = await readViews(live.map(\.request).filter { hydrated.contains($0.postID) })
                fail(&live, read.failures)
                views.merge(read.views) { _, new in new }
                let unseen = hydrated.subtracting(read.failures.keys).subtracting(views.keys)
                fail(&live, Dictionary(uniqueKeysWithValues: unseen.map {
                    ($0, CounterError(code: .unavailable, message: "post \($0) was hydrated but Redis does not show it", retryAfterSeconds: 1) as Error)
                }))
            }
        } catch {
            fail(live, with: error)
            return
        }
        guard !live.isEmpty else { return }

        // 2. Decide, in arrival order.
        let requests = live.map(\.request)
        let decision = ShardDecider.decide(requests, views: &views)
        if configuration.acknowledgement == .memory {
            for (pending, answer) in zip(live, decision.answers) { pending.resume(returning: answer) }
        }

        // 3. Write the changes with their log entries, atomically per slot. A slot whose write
        //    failed has its posts answered with the failure; one whose outcome is unknown (the
        //    connection broke mid-way) also makes the flusher re-read the slot's log.
        var entryIDs: [StreamEntryID?] = []
        var writeFailures: [Int64: Error] = [:]
        if !decision.changes.isEmpty {
            let written = await write(decision.changes)
            entryIDs = written.entryIDs
            if !written.uncertainSlots.isEmpty { await flusher.noteUncertain(written.uncertainSlots) }
            writeFailures = written.failures
            if let error = written.failures.values.first { countFailure(error) }
            let committed = decision.changes.count - entryIDs.filter { $0 == nil }.count
            if committed > 0 {
                stats.groupCommits += 1
                stats.groupCommittedChanges += committed
                stats.largestGroupCommit = max(stats.largestGroupCommit, committed)
            }
        }

        // 4. Tell the flusher, answer.
        var appended: [UInt16: (count: Int, newest: StreamEntryID)] = [:]
        for (change, id) in zip(decision.changes, entryIDs) {
            guard let id else { continue }
            let slot = HashSlot(post: change.postID).rawValue
            let current = appended[slot]
            appended[slot] = ((current?.count ?? 0) + 1, max(current?.newest ?? id, id))
        }
        if !appended.isEmpty { await flusher.noteAppended(appended) }
        if configuration.acknowledgement == .memory {
            stats.lostMemoryAcknowledgements += entryIDs.filter { $0 == nil }.count
            return
        }

        var answered: [(Pending, LikeState)] = []
        for (offset, pending) in live.enumerated() {
            if let error = writeFailures[pending.request.postID] {
                pending.resume(throwing: Self.counterError(error))
            } else {
                answered.append((pending, decision.answers[offset]))
            }
        }
        if configuration.acknowledgement == .postgres && !appended.isEmpty {
            // Answered once the flush holding this batch commits; the shard moves on meanwhile.
            let marks = appended.mapValues(\.newest)
            let flusher = self.flusher
            Task {
                do {
                    try await flusher.waitUntilApplied(marks)
                    for (pending, answer) in answered { pending.resume(returning: answer) }
                } catch {
                    for (pending, _) in answered { pending.resume(throwing: error) }
                }
            }
        } else {
            for (pending, answer) in answered { pending.resume(returning: answer) }
        }
    }

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

    private func fail(_ pendings: [Pending], with error: Error) {
        countFailure(error)
        let counterError = Self.counterError(error)
        for pending in pendings { pending.resume(throwing: counterError) }
    }

    /// Answers the operations on `failures`' posts with their post's failure and drops them.
    private func fail(_ live: inout [Pending], _ failures: [Int64: Error]) {
        guard !failures.isEmpty else { return }
        if let error = failures.values.first { countFailure(error) }
        live = live.filter { pending in
            guard let error = failures[pending.request.postID] else { return true }
            pending.resume(throwing: Self.counterError(error))
            return false
        }
    }

    private static func counterError(_ error: Error) -> CounterError {
        (error as? CounterError) ?? CounterError(code: .unavailable, message: "\(error)", retryAfterSeconds: 1)
    }

    private func countFailure(_ error: Error) {
        if error is RedisError { stats.redisErrors += 1 }
        if error is PostgresError { stats.postgresErrors += 1 }
    }

    // MARK: - Redis and PostgreSQL

    /// One pipeline (per Redis node): per post, the hydration marker, the count, and the
    /// membership of the batch's users. Posts without the marker are left out of `views`; posts
    /// whose node failed are in `failures`.
    private func readViews(_ requests: [ShardDecider.Request]) async -> (views: [Int64: ShardDecider.PostView], failures: [Int64: Error]) {
        var usersByPost: [Int64: [Int64]] = [:]
        var order: [Int64] = []
        var seen: Set<ShardDecider.Request> = []
        for request in requests {
            if usersByPost[request.postID] == nil {
                order.append(request.postID)
                usersByPost[request.postID] = []
            }
            if request.operation != .count,
               seen.insert(ShardDecider.Request(operation: .read, postID: request.postID, userID: request.userID)).inserted {
                usersByPost[request.postID]!.append(request.userID)
            }
        }
        guard !order.isEmpty else { return ([:], [:]) }
        let groups = order.map { post -> SlotCommands in
            let likers = layout.likers(ofPost: post)
            var commands: [RedisCommand] = [.exists([layout.hydratedMarker(ofPost: post)]), .scard(likers)]
            if !usersByPost[post]!.isEmpty { commands.append(.smismember(likers, usersByPost[post]!)) }
            return SlotCommands(slot: HashSlot(post: post), commands: commands)
        }
        var views: [Int64: ShardDecider.PostView] = [:]
        var failures: [Int64: Error] = [:]
        for (post, result) in zip(order, await redis.execute(groups)) {
            do {
                let replies = try result.get()
                guard try replies[0].throwingServerError().integer == 1 else { continue }
                let count = try replies[1].throwingServerError().integer ?? 0
                let users = usersByPost[post]!
                let flags = users.isEmpty ? [] : try replies[2].throwingServerError().array ?? []
                guard flags.count == users.count else {
                    throw RedisError(code: .unexpectedReply, message: "SMISMEMBER returned \(flags.count) flags for \(users.count) users")
                }
                var members: [Int64: Bool] = [:]
                for (user, flag) in zip(users, flags) { members[user] = flag.integer == 1 }
                views[post] = ShardDecider.PostView(likesCount: count, members: members)
            } catch {
                failures[post] = error
            }
        }
        return (views, failures)
    }

    /// Loads posts Redis has never seen from PostgreSQL (existence, then their likers) into
    /// Redis, each in one `MULTI` that also sets its hydration marker.
    /// - Returns: the posts that do not exist, and those whose Redis write failed.
    /// - Throws: PostgreSQL's errors.
    private func hydrate(_ posts: [Int64]) async throws -> (missing: Set<Int64>, failures: [Int64: Error]) {
        let found = try await pool.query("SELECT id FROM posts WHERE id = ANY($1::bigint[])", [.int64Array(posts)])
        let existing = try found.map { try $0.int64(0) }
        let missing = Set(posts).subtracting(existing)
        guard !existing.isEmpty else { return (missing, [:]) }
        let rows = try await pool.query("SELECT post_id, user_id FROM likes WHERE post_id = ANY($1::bigint[])",
                                        [.int64Array(existing)])
        var likers: [Int64: [Int64]] = [:]
        for row in rows { likers[try row.int64(0), default: []].append(try row.int64(1)) }
        let groups = existing.map { post -> SlotCommands in
            let key = layout.likers(ofPost: post)
            var commands: [RedisCommand] = [.del([key])]
            let users = likers[post] ?? []
            for start in stride(from: 0, to: users.count, by: 10_000) {
                commands.append(.sadd(key, Array(users[start..<min(start + 10_000, users.count)])))
            }
            commands.append(.set(layout.hydratedMarker(ofPost: post), "1"))
            return SlotCommands(slot: HashSlot(post: post), commands: commands, atomic: true)
        }
        var failures: [Int64: Error] = [:]
        for (post, result) in zip(existing, await redis.execute(groups)) {
            if case .failure(let error) = result { failures[post] = error }
        }
        return (missing, failures)
    }

    /// What a group commit's Redis write did.
    private struct WriteOutcome {
        /// Each change's log entry id, or `nil` where its slot's transaction failed.
        var entryIDs: [StreamEntryID?]
        /// Why, per post of a failed slot.
        var failures: [Int64: Error] = [:]
        /// Slots whose transaction may or may not have run (the connection broke mid-way).
        var uncertainSlots: Set<UInt16> = []
    }

    /// Writes `changes` as one transaction per slot (split by Redis node): per post, one `SADD`
    /// of the users whose last change in the batch is a like and one `SREM` of those whose last
    /// change is an unlike, then one log entry per change.
    private func write(_ changes: [LikeChange]) async -> WriteOutcome {
        var groups: [UInt16: [Int]] = [:]
        var slotOrder: [UInt16] = []
        for (offset, change) in changes.enumerated() {
            let slot = HashSlot(post: change.postID).rawValue
            if groups[slot] == nil { slotOrder.append(slot) }
            groups[slot, default: []].append(offset)
        }
        var membershipCounts: [Int] = []
        let transactions = slotOrder.map { slot -> SlotCommands in
            let offsets = groups[slot]!
            let hashSlot = HashSlot(rawValue: slot)!
            let log = layout.changeLog(of: hashSlot)
            var commands = Self.membershipCommands(offsets.map { changes[$0] }, layout: layout)
            membershipCounts.append(commands.count)
            for offset in offsets { commands.append(ChangeLogEntry.append(changes[offset], to: log)) }
            return SlotCommands(slot: hashSlot, commands: commands, atomic: true)
        }
        var outcome = WriteOutcome(entryIDs: [StreamEntryID?](repeating: nil, count: changes.count))
        for ((slot, membershipCommands), result) in zip(zip(slotOrder, membershipCounts), await redis.execute(transactions)) {
            switch result {
            case .success(let results):
                for (index, offset) in groups[slot]!.enumerated() where membershipCommands + index < results.count {
                    if case .bulkString(let bytes) = results[membershipCommands + index] { outcome.entryIDs[offset] = StreamEntryID(bytes: bytes) }
                }
            case .failure(let error):
                if error.code == .connectionLost { outcome.uncertainSlots.insert(slot) }
            }
            for offset in groups[slot]! where outcome.entryIDs[offset] == nil {
                let post = changes[offset].postID
                if outcome.failures[post] == nil {
                    let why: Error
                    if case .failure(let error) = result { why = error } else {
                        why = CounterError(code: .unavailable, message: "Redis refused the write of post \(post)", retryAfterSeconds: 1)
                    }
                    outcome.failures[post] = why
                }
            }
        }
        return outcome
    }

    /// The `SADD`/`SREM` commands that bring each post's likers set to the state of the last
    /// change per user among `changes` (in order): at most one of each per post.
    static func membershipCommands(_ changes: [LikeChange], layout: RedisKeyLayout) -> [RedisCommand] {
        struct Pair: Hashable { let post: Int64; let user: Int64 }
        var last: [Pair: Bool] = [:]
        last.reserveCapacity(changes.count)
        var postOrder: [Int64] = []
        var seenPosts: Set<Int64> = []
        var pairOrder: [Pair] = []
        for change in changes {
            let pair = Pair(post: change.postID, user: change.userID)
            if last.updateValue(change.liked, forKey: pair) == nil { pairOrder.append(pair) }
            if seenPosts.insert(change.postID).inserted { postOrder.append(change.postID) }
        }
        var added: [Int64: [RedisArgument]] = [:]
        var removed: [Int64: [RedisArgument]] = [:]
        for pair in pairOrder {
            if last[pair]! { added[pair.post, default: []].append(pair.user) } else { removed[pair.post, default: []].append(pair.user) }
        }
        var commands: [RedisCommand] = []
        for post in postOrder {
            let likers = layout.likers(ofPost: post)
            if let users = added[post] { commands.append(.sadd(likers, users)) }
            if let users = removed[post] { commands.append(.srem(likers, users)) }
        }
        return commands
    }
}

/// Gathers the results of a batch of operations and hands them over once all are in.
private final class ResultCollector: Sendable {
    private struct State {
        var results: [Result<LikeState, Error>?]
        var remaining: Int
        var completion: (@Sendable ([Result<LikeState, Error>]) -> Void)?
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(results: Array(repeating: nil, count: count), remaining: count, completion: nil))
    }

    func onComplete(_ completion: @escaping @Sendable ([Result<LikeState, Error>]) -> Void) {
        let done: [Result<LikeState, Error>]? = state.withLock { state in
            if state.remaining == 0 { return state.results.map { $0! } }
            state.completion = completion
            return nil
        }
        if let done { completion(done) }
    }

    func set(_ index: Int, _ result: Result<LikeState, Error>) {
        let finished: ([Result<LikeState, Error>], (@Sendable ([Result<LikeState, Error>]) -> Void))? = state.withLock { state in
            guard state.results[index] == nil else { return nil }
            state.results[index] = result
            state.remaining -= 1
            guard state.remaining == 0, let completion = state.completion else { return nil }
            return (state.results.map { $0! }, completion)
        }
        if let (results, completion) = finished { completion(results) }
    }
}
