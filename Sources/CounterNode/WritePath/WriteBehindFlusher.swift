import Foundation
import Persistence
import ShardRouter

/// Drains one shard's write-behind logs (one Redis stream per slot) into PostgreSQL.
///
/// Each flush reads the oldest waiting entries of the dirty slots, applies them with
/// `LikeBatchApplier` in one transaction that also records each log's progress, and only then
/// trims what it applied. A crash anywhere in between re-reads entries that the recorded progress
/// then skips: nothing is lost and nothing is applied twice. Changes to posts that no longer exist
/// go to the dead-letter stream (before the commit, so none is dropped; a crash in between may
/// leave a duplicate there, which a replay applies idempotently).
actor WriteBehindFlusher {
    private struct SlotBacklog {
        /// Entries counted as waiting in the slot's log.
        var pending = 0
        /// When the slot's oldest waiting change became dirty, as far as this process knows.
        var dirtySince: ContinuousClock.Instant?
        /// Newest entry appended, and newest applied to PostgreSQL.
        var appended: StreamEntryID?
        var applied: StreamEntryID?

        /// Whether the log may hold something not yet in PostgreSQL.
        var hasWork: Bool {
            if pending > 0 { return true }
            guard let appended else { return false }
            return applied.map { $0 < appended } ?? true
        }
    }

    private struct Waiter {
        let marks: [UInt16: StreamEntryID]
        let continuation: CheckedContinuation<Void, Error>
    }

    /// Thrown inside a flush transaction to roll it back when posts turn out to be missing that
    /// have no dead letters yet.
    private struct NewlyMissingPosts: Error {
        let posts: Set<Int64>
    }

    let shardIndex: Int
    private let slots: Range<Int>
    private let redis: RedisClient
    private let pool: PostgresPool
    private let layout: RedisKeyLayout
    private let configuration: WritePathConfiguration
    private let gauge: BacklogGauge
    private var onMissingPosts: @Sendable ([Int64]) async -> Void = { _ in }

    private var backlog: [UInt16: SlotBacklog] = [:]
    private var uncertainSlots: Set<UInt16> = []
    private var waiters: [Waiter] = []
    private var lastFlush = ContinuousClock.now
    private var stopping = false
    private var stopped = false
    private var retryBackoff: ReconnectBackoff
    private(set) var stats = ShardStats()

    init(shardIndex: Int, slots: Range<Int>, redis: RedisClient, pool: PostgresPool,
         layout: RedisKeyLayout, configuration: WritePathConfiguration, gauge: BacklogGauge) {
        self.shardIndex = shardIndex
        self.slots = slots
        self.redis = redis
        self.pool = pool
        self.layout = layout
        self.configuration = configuration
        self.gauge = gauge
        self.retryBackoff = ReconnectBackoff(initial: configuration.retryInitialDelay, maximum: configuration.retryMaximumDelay)
    }

    /// Who to tell when posts turn out not to exist (the shard forgets them).
    func setMissingPostsHandler(_ handler: @escaping @Sendable ([Int64]) async -> Void) {
        onMissingPosts = handler
    }

    // MARK: - What the shard tells the flusher

    /// Entries the shard appended, per slot: how many, and the newest id.
    func noteAppended(_ appended: [UInt16: (count: Int, newest: StreamEntryID)]) {
        let now = ContinuousClock.now
        for (slot, batch) in appended {
            var state = backlog[slot, default: SlotBacklog()]
            if state.pending == 0 { state.dirtySince = now }
            state.pending += batch.count
            state.appended = max(state.appended ?? batch.newest, batch.newest)
            backlog[slot] = state
            gauge.add(batch.count)
        }
    }

    /// Slots whose Redis writes broke mid-way: entries may exist that were never noted.
    func noteUncertain(_ slots: Set<UInt16>) {
        uncertainSlots.formUnion(slots)
    }

    /// Returns once every entry in `marks` (newest id per slot) is in PostgreSQL.
    /// - Throws: `CounterError(.shuttingDown)` if the flusher stops first.
    func waitUntilApplied(_ marks: [UInt16: StreamEntryID]) async throws {
        if isApplied(marks) { return }
        guard !stopped else { throw CounterError(code: .shuttingDown, message: "the flusher has stopped") }
        try await withCheckedThrowingContinuation { continuation in
            waiters.append(Waiter(marks: marks, continuation: continuation))
        }
    }

    /// Returns once everything appended so far is in PostgreSQL.
    func flushAll() async throws {
        if let failure = try await rescanUncertainSlots() { throw failure }
        var marks: [UInt16: StreamEntryID] = [:]
        for (slot, state) in backlog where state.hasWork { if let id = state.appended { marks[slot] = id } }
        try await waitUntilApplied(marks)
    }

    private func isApplied(_ marks: [UInt16: StreamEntryID]) -> Bool {
        marks.allSatisfy { slot, id in (backlog[slot]?.applied).map { $0 >= id } ?? false }
    }

    // MARK: - Recovery

    /// Finds what the logs of this shard's slots still hold (after a crash or restart), so it is
    /// flushed before anything else. Call before the shard takes writes.
    func recover() async throws {
        uncertainSlots.formUnion(slots.map { UInt16($0) })
        if let failure = try await rescanUncertainSlots() { throw failure }
    }

    // MARK: - The loop

    /// Flushes until `stop()`, retrying failures with capped exponential backoff.
    func run() async {
        while !stopped {
            guard shouldFlush(now: .now) else {
                if stopping && !backlog.values.contains(where: \.hasWork) && uncertainSlots.isEmpty { break }
                try? await Task.sleep(for: configuration.flusherTick)
                continue
            }
            do {
                try await flushOnce()
                retryBackoff.reset()
            } catch {
                stats.flushRetries += 1
                stats.lastFlushError = "\(error)"
                if error is RedisError { stats.redisErrors += 1 }
                if error is PostgresError { stats.postgresErrors += 1 }
                try? await Task.sleep(for: retryBackoff.nextDelay())
            }
        }
        stopped = true
        for waiter in waiters {
            waiter.continuation.resume(throwing: CounterError(code: .shuttingDown, message: "the flusher has stopped"))
        }
        waiters = []
    }

    /// Asks the loop to end once nothing waits (`drain`) or at once.
    func stop(drain: Bool) {
        stopping = true
        if !drain { stopped = true }
    }

    private func shouldFlush(now: ContinuousClock.Instant) -> Bool {
        if !uncertainSlots.isEmpty { return true }
        guard backlog.values.contains(where: \.hasWork) else { return false }
        let pending = gauge.value
        if stopping || !waiters.isEmpty || pending >= configuration.flushBatchSize { return true }
        if now - lastFlush >= configuration.flushInterval { return true }
        let oldest = backlog.values.compactMap(\.dirtySince).min()
        return oldest.map { now - $0 >= configuration.flushMaxAge } ?? false
    }

    /// One flush: read, apply in one transaction, dead-letter, trim. Slots whose Redis node
    /// failed are left for the next attempt while the others are flushed; the failure is thrown
    /// afterwards, so the loop backs off.
    private func flushOnce() async throws {
        var nodeFailure = try await rescanUncertainSlots()
        // The oldest dirty slots first, at most about `flushBatchSize` entries in all (at least
        // 64 per slot, so a backlog spread over many slots still moves in sizeable steps).
        let allDirty = backlog.filter { $0.value.hasWork }
            .sorted { ($0.value.dirtySince ?? .now) < ($1.value.dirtySince ?? .now) }
        guard !allDirty.isEmpty else { return }
        let perSlot = max(64, configuration.flushBatchSize / allDirty.count)
        let dirty = allDirty.prefix(max(1, configuration.flushBatchSize / perSlot)).map(\.key)
        // What was known before the read: appends noted while it is in flight stay unaccounted here.
        let before = backlog
        let readStarted = ContinuousClock.now
        let (reads, readFailure) = try await readLogs(dirty, perSlot: perSlot)
        nodeFailure = nodeFailure ?? readFailure

        var entries: [LoggedLikeChange] = []
        var malformed: [(slot: UInt16, entry: StreamEntry)] = []
        var newestRead: [UInt16: StreamEntryID] = [:]
        var fullReads: Set<UInt16> = []
        for (slot, read) in zip(dirty, reads) {
            guard let read else { continue }
            if read.count >= perSlot { fullReads.insert(slot) }
            for entry in read {
                newestRead[slot] = entry.id
                if let change = ChangeLogEntry.change(from: entry) {
                    entries.append(LoggedLikeChange(log: logKey(slot), slot: slot, entryID: entry.id, change: change))
                } else {
                    malformed.append((slot, entry))
                }
            }
        }
        // Slots whose logs were empty: whatever was appended there has been applied and trimmed.
        for (slot, read) in zip(dirty, reads) where read != nil && newestRead[slot] == nil {
            settle(slot, removed: before[slot]?.pending ?? 0, applied: before[slot]?.appended, stillDirtySince: nil)
        }
        guard !newestRead.isEmpty else {
            if let nodeFailure { throw nodeFailure }
            return
        }

        if !malformed.isEmpty {
            try await addDeadLetters(malformed.map { ($0.slot, $0.entry.id, $0.entry.fields.description, nil) },
                                     reason: "malformed log entry")
        }
        let missing = entries.isEmpty ? [] : try await apply(entries)

        // Applied: trim the logs up to what was read, and account for it. A trim that failed is
        // harmless: the next read skips what the recorded progress shows applied.
        let trimmed = Array(newestRead)
        let trimResults = await redis.execute(trimmed.map { slot, newest in
            SlotCommands(slot: HashSlot(rawValue: slot)!, commands: [.xtrim(logKey(slot), olderThan: newest.successor)])
        })
        for ((slot, newest), result) in zip(trimmed, trimResults) {
            let removed = (try? result.get()).flatMap { Int($0[0].integer ?? 0) } ?? 0
            settle(slot, removed: removed, applied: newest, stillDirtySince: fullReads.contains(slot) ? nil : readStarted)
        }
        stats.flushTransactions += entries.isEmpty ? 0 : 1
        stats.flushedEntries += entries.count + malformed.count
        stats.largestFlush = max(stats.largestFlush, entries.count)
        lastFlush = .now
        resolveWaiters()
        if !missing.isEmpty {
            // Forget the posts in Redis too, so the next touch asks PostgreSQL again (and is refused).
            _ = await redis.execute(missing.map { post in
                SlotCommands(slot: HashSlot(post: post),
                             commands: [.del([layout.hydratedMarker(ofPost: post)]), .del([layout.likers(ofPost: post)])])
            })
            await onMissingPosts(Array(missing))
        }
        if let nodeFailure { throw nodeFailure }
    }

    /// Most entries one Redis command returns: Redis is single-threaded, and one huge `XRANGE`
    /// makes every shard's round trip wait behind it.
    static let readSlice = 500

    /// Up to `perSlot` of the oldest entries of each slot's log, read in slices of at most
    /// `readSlice` entries, one round trip (per Redis node) per slice round. A slot whose node
    /// failed reads as `nil`, and the first such failure is returned.
    private func readLogs(_ slots: [UInt16], perSlot: Int) async throws -> (reads: [[StreamEntry]?], failure: Error?) {
        var reads = [[StreamEntry]?](repeating: [], count: slots.count)
        var failure: Error?
        var open = Array(slots.indices)
        while !open.isEmpty {
            let groups = open.map { index -> SlotCommands in
                let start = reads[index]!.last.map { "(" + $0.id.description } ?? "-"
                return SlotCommands(slot: HashSlot(rawValue: slots[index])!, commands: [
                    .xrange(logKey(slots[index]), start: start, count: min(Self.readSlice, perSlot - reads[index]!.count)),
                ])
            }
            var stillOpen: [Int] = []
            for (index, result) in zip(open, await redis.execute(groups)) {
                switch result {
                case .success(let replies):
                    let slice = try replies[0].streamEntries()
                    reads[index]! += slice
                    if slice.count == Self.readSlice && reads[index]!.count < perSlot { stillOpen.append(index) }
                case .failure(let error):
                    reads[index] = nil
                    failure = failure ?? error
                }
            }
            open = stillOpen
        }
        return (reads, failure)
    }

    /// Applies `entries` in one transaction; posts found missing get their changes dead-lettered
    /// first, then the transaction is tried again (it records progress past them).
    /// - Returns: the posts that did not exist.
    private func apply(_ entries: [LoggedLikeChange]) async throws -> Set<Int64> {
        var knownMissing: Set<Int64> = []
        while true {
            let expected = knownMissing
            do {
                _ = try await pool.withTransaction { connection in
                    let outcome = try LikeBatchApplier.apply(entries, on: connection)
                    let newlyMissing = Set(outcome.missingPosts.keys).subtracting(expected)
                    if !newlyMissing.isEmpty { throw NewlyMissingPosts(posts: newlyMissing) }
                    return outcome
                }
                return knownMissing
            } catch let error as NewlyMissingPosts {
                knownMissing.formUnion(error.posts)
                let doomed = entries.filter { error.posts.contains($0.change.postID) }
                try await addDeadLetters(doomed.map { entry in
                    (entry.slot, entry.entryID,
                     "user \(entry.change.userID) post \(entry.change.postID) liked \(entry.change.liked)", entry.change)
                }, reason: "post does not exist in posts")
            }
        }
    }

    private func addDeadLetters(_ letters: [(slot: UInt16, id: StreamEntryID, summary: String, change: LikeChange?)],
                                reason: String) async throws {
        guard !letters.isEmpty else { return }
        let at = String(Int64(Date().timeIntervalSince1970 * 1000))
        let commands = letters.map { letter -> RedisCommand in
            var fields: [(String, RedisArgument)] = [
                ("log", logKey(letter.slot)), ("entry", letter.id.description), ("reason", reason), ("at", at),
            ]
            if let change = letter.change {
                fields += ChangeLogEntry.fields(of: change)
            } else {
                fields.append(("raw", letter.summary))
            }
            return .xadd(layout.deadLetters, fields: fields)
        }
        for reply in try await redis.pipeline(commands, slot: layout.deadLettersSlot) { _ = try reply.throwingServerError() }
        stats.deadLetters += letters.count
    }

    /// Reads the length and newest entry of every uncertain slot's log, 4,096 slots per call
    /// (one pipeline per Redis node), and takes them as the truth about what waits there. Slots
    /// whose node failed stay uncertain; the first such failure is returned.
    @discardableResult
    private func rescanUncertainSlots() async throws -> Error? {
        guard !uncertainSlots.isEmpty else { return nil }
        var failure: Error?
        let all = uncertainSlots.sorted()
        for start in stride(from: 0, to: all.count, by: 4_096) {
            let part = Array(all[start..<min(start + 4_096, all.count)])
            let results = await redis.execute(part.map { slot in
                SlotCommands(slot: HashSlot(rawValue: slot)!, commands: [.xlen(logKey(slot)), .xrevrange(logKey(slot), count: 1)])
            })
            let now = ContinuousClock.now
            for (slot, result) in zip(part, results) {
                let reply: [RedisReply]
                switch result {
                case .success(let replies): reply = replies
                case .failure(let error):
                    failure = failure ?? error
                    continue
                }
                let length = Int(try reply[0].throwingServerError().integer ?? 0)
                let newest = try reply[1].streamEntries().first?.id
                var state = backlog[slot, default: SlotBacklog()]
                gauge.add(length - state.pending)
                state.pending = length
                if let newest { state.appended = max(state.appended ?? newest, newest) }
                if length > 0 && state.dirtySince == nil { state.dirtySince = now }
                if length > 0 || state.appended != nil { backlog[slot] = state }
                uncertainSlots.remove(slot)
            }
        }
        return failure
    }

    /// Accounts for a flushed slot: `removed` entries left the log; `applied` is in PostgreSQL.
    private func settle(_ slot: UInt16, removed: Int, applied: StreamEntryID?, stillDirtySince: ContinuousClock.Instant?) {
        var state = backlog[slot, default: SlotBacklog()]
        let removed = min(removed, state.pending)
        state.pending -= removed
        gauge.add(-removed)
        if let applied { state.applied = max(state.applied ?? applied, applied) }
        if state.pending == 0 {
            state.dirtySince = nil
        } else if let stillDirtySince {
            state.dirtySince = stillDirtySince
        }
        backlog[slot] = state
    }

    private func resolveWaiters() {
        var remaining: [Waiter] = []
        for waiter in waiters {
            if isApplied(waiter.marks) { waiter.continuation.resume() } else { remaining.append(waiter) }
        }
        waiters = remaining
    }

    /// Whether `slot`'s log may hold changes PostgreSQL does not have yet (also when a write's
    /// outcome there is unknown and the log has not been read again).
    func hasPendingChanges(inSlot slot: UInt16) -> Bool {
        uncertainSlots.contains(slot) || (backlog[slot]?.hasWork ?? false)
    }

    /// Stats with the backlog figures of this moment.
    func currentStats() -> ShardStats {
        var current = stats
        current.shard = shardIndex
        current.pendingChanges = gauge.value
        current.secondsSinceFlush = (ContinuousClock.now - lastFlush).inSeconds
        if let oldest = backlog.values.compactMap(\.dirtySince).min() {
            current.oldestPendingAgeSeconds = (ContinuousClock.now - oldest).inSeconds
        }
        return current
    }


    // MARK: - Log entries

    private func logKey(_ slot: UInt16) -> String {
        layout.changeLog(of: HashSlot(rawValue: slot)!)
    }
}
