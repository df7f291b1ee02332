import CounterCore
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
///
/// What waits where and when to flush is `FlushScheduler`'s to know and decide; this actor does
/// the I/O it asks for, reports the outcomes back, and sleeps in between (`LoopAlarm`).
actor WriteBehindFlusher {
    /// Thrown inside a flush transaction to roll it back when posts turn out to be missing that
    /// have no dead letters yet.
    private struct NewlyMissingPosts: Error {
        let posts: Set<Int64>
    }

    /// Thrown inside a flush transaction to roll it back when PostgreSQL refused changes of it
    /// that have no dead letters yet.
    private struct NewlyRejectedChanges: Error {
        let rejected: [RejectedLikeChange]
    }

    /// Thrown inside a flush transaction to roll it back when PostgreSQL shows that slots of it
    /// have another owner now (`SlotTable.staleSlots`).
    private struct StaleSlots: Error {
        let slots: [UInt16]
    }

    let shardIndex: Int
    private let slots: Range<Int>
    private let redis: RedisClient
    private let pool: PostgresPool
    private let layout: RedisKeyLayout
    private let gauge: BacklogGauge
    private let log: NodeLog
    /// Which slots this node holds, under which epochs: only those are flushed, and the flush
    /// transaction checks the epochs in PostgreSQL.
    private let ownership: OwnedSlots
    /// Trims with this node's epoch for each slot.
    private let writer: SlotWriter
    /// Where each commit's lag (acknowledgement → commit, per change) is recorded.
    private let lag: WriteBehindLag
    /// For tests: the table every applied entry is recorded in (`LikeBatchApplier`).
    private let auditTable: String?
    /// Failed flush attempts in a row, for the log.
    private var failuresInARow = 0
    private var onMissingPosts: @Sendable ([Int64]) async -> Void = { _ in }

    /// What waits where, who waits for what, and when to flush: every decision is the
    /// scheduler's; this actor performs them and reports back.
    private var scheduler: FlushScheduler
    /// The callers waiting for entries to reach PostgreSQL, under the scheduler's ids.
    private var waiting: [FlushScheduler.WaiterID: @Sendable (Result<Void, Error>) -> Void] = [:]
    /// Where the loop sleeps while nothing is due; rung when the scheduler says an event made a
    /// flush due sooner.
    private let alarm = LoopAlarm()
    private(set) var stats = ShardStats()

    init(shardIndex: Int, slots: Range<Int>, redis: RedisClient, pool: PostgresPool,
         layout: RedisKeyLayout, configuration: WritePathConfiguration, gauge: BacklogGauge,
         ownership: OwnedSlots = .soleWriter(), lag: WriteBehindLag = WriteBehindLag(), log: NodeLog = .silent) {
        self.ownership = ownership
        self.lag = lag
        self.writer = SlotWriter(redis: redis, ownership: ownership, layout: layout, log: log)
        self.auditTable = configuration.auditTable
        self.shardIndex = shardIndex
        self.slots = slots
        self.redis = redis
        self.pool = pool
        self.layout = layout
        self.gauge = gauge
        self.log = log
        self.scheduler = FlushScheduler(configuration: configuration, now: .now)
    }

    /// Who to tell when posts turn out not to exist (the shard forgets them and deletes their
    /// Redis keys: the shard owns its keys).
    func setMissingPostsHandler(_ handler: @escaping @Sendable ([Int64]) async -> Void) {
        onMissingPosts = handler
    }

    // MARK: - What the shard tells the flusher

    /// Entries the shard appended, per slot: how many, and the newest id.
    func noteAppended(_ appended: [UInt16: (count: Int, newest: StreamEntryID)]) {
        follow(scheduler.appended(appended, now: .now))
    }

    /// Slots whose Redis writes broke mid-way: entries may exist that were never noted.
    func noteUncertain(_ slots: Set<UInt16>) {
        follow(scheduler.uncertain(slots))
    }

    /// Returns once every entry in `marks` (newest id per slot) is in PostgreSQL.
    /// - Throws: `CounterError(.shuttingDown)` if the flusher stops first.
    func waitUntilApplied(_ marks: [UInt16: StreamEntryID]) async throws {
        try await withCheckedThrowingContinuation { continuation in
            whenApplied(marks) { continuation.resume(with: $0) }
        }
    }

    /// Calls `completion` once every entry in `marks` is in PostgreSQL (or with
    /// `CounterError(.shuttingDown)` if the flusher stops first) — the shard's `postgres`
    /// acknowledgements, without a task per batch.
    func whenApplied(_ marks: [UInt16: StreamEntryID], _ completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        switch scheduler.waiterAdded(marks: marks) {
        case .resumeNow:
            completion(.success(()))
        case .refuse:
            completion(.failure(Self.stopped))
        case .wait(let id, let signal):
            waiting[id] = completion
            follow(signal)
        }
    }

    /// Makes everything appended so far due for flushing now, without waiting for it: a waiter
    /// nobody waits on (its resumption finds no caller).
    func requestFlushAll() {
        if case .wait(_, let signal) = scheduler.waiterAdded(marks: scheduler.unflushedMarks) { follow(signal) }
    }

    /// Returns once everything appended so far is in PostgreSQL.
    func flushAll() async throws {
        if let failure = try await rescanUncertainSlots() { throw failure }
        try await waitUntilApplied(scheduler.unflushedMarks)
    }

    /// After an event: keeps the shard's gauge equal to the scheduler's backlog, and wakes the
    /// loop when the scheduler says so.
    private func follow(_ signal: FlushScheduler.LoopSignal) {
        publishBacklog()
        if signal == .wakeLoop { alarm.ring() }
    }

    /// Sets the gauge the shard reads to refuse writes above its backlog limit.
    private func publishBacklog() {
        gauge.set(scheduler.pendingTotal)
    }

    /// Resumes the callers whose entries are now all in PostgreSQL.
    private func resume(_ satisfied: [FlushScheduler.WaiterID]) {
        for id in satisfied { waiting.removeValue(forKey: id)?(.success(())) }
    }

    private static let stopped = CounterError(code: .shuttingDown, message: "the flusher has stopped")

    // MARK: - Recovery

    /// Finds what the logs of this shard's slots still hold (after a crash or restart), so it is
    /// flushed before anything else. Call before the shard takes writes.
    func recover() async throws {
        follow(scheduler.uncertain(Set(slots.map { UInt16($0) })))
        if let failure = try await rescanUncertainSlots() { throw failure }
    }

    // MARK: - Slots changing owner

    /// Reads the logs of `slots` (just won from another node) and returns once everything they
    /// hold is in PostgreSQL: the new owner serves a slot only after this.
    func drain(_ slots: Set<UInt16>) async throws {
        follow(scheduler.uncertain(slots))
        if let failure = try await rescanUncertainSlots() { throw failure }
        try await waitUntilApplied(scheduler.unflushedMarks.filter { slots.contains($0.key) })
    }

    /// Returns once everything appended to `slots` so far is in PostgreSQL (a hand-off flushes
    /// what it wrote before the slot changes owner).
    func flush(_ slots: Set<UInt16>) async throws {
        try await waitUntilApplied(scheduler.unflushedMarks.filter { slots.contains($0.key) })
    }

    /// Forgets `slots` (another node owns them now and drains their logs); callers waiting for
    /// their entries are told the outcome is not known here.
    func forget(_ slots: Set<UInt16>) {
        guard !slots.isEmpty else { return }
        for id in scheduler.forget(slots) { waiting.removeValue(forKey: id)?(.failure(Self.moved)) }
        publishBacklog()
    }

    private static let moved = CounterError(
        code: .unavailable,
        message: "the post's slot moved to another node before the change reached PostgreSQL; the change is in the slot's log, which the new owner applies",
        retryAfterSeconds: 1)

    // MARK: - The loop

    /// Flushes until `stop()` (or until its task is cancelled, which stops it without draining),
    /// retrying failures with capped exponential backoff. Between flushes it sleeps until the
    /// scheduler's next deadline, or until an event makes a flush due sooner.
    func run() async {
        while true {
            if Task.isCancelled && !scheduler.isStopped { follow(scheduler.stop(drain: false)) }
            switch scheduler.nextAction(now: .now) {
            case .flush:
                do {
                    try await flushOnce()
                    scheduler.flushSucceeded()
                    if failuresInARow > 0 {
                        log.log(.info, "flush_recovered", ["shard": String(shardIndex), "failed_attempts": String(failuresInARow)])
                        failuresInARow = 0
                    }
                } catch {
                    stats.flushRetries += 1
                    stats.lastFlushError = "\(error)"
                    if error is RedisError { stats.redisErrors += 1 }
                    if error is PostgresError { stats.postgresErrors += 1 }
                    let delay = scheduler.flushFailed(now: .now)
                    failuresInARow += 1
                    log.log(.warn, "flush_failed", ["shard": String(shardIndex), "attempt": String(failuresInARow),
                                                    "retry_in_ms": String(Int(delay.inSeconds * 1_000)), "error": "\(error)"])
                }
            case .sleep(let deadline):
                await alarm.sleep(until: deadline)
            case .waitForEvent:
                await alarm.sleep(until: nil)
            case .finish(let failing):
                for id in failing { waiting.removeValue(forKey: id)?(.failure(Self.stopped)) }
                return
            }
        }
    }

    /// Asks the loop to end once nothing waits (`drain`) or at once.
    func stop(drain: Bool) {
        follow(scheduler.stop(drain: drain))
    }

    /// One flush: read, apply in one transaction, dead-letter, trim. Slots whose Redis node
    /// failed are left for the next attempt while the others are flushed; the failure is thrown
    /// afterwards, so the loop backs off.
    private func flushOnce() async throws {
        var nodeFailure = try await rescanUncertainSlots()
        // Also the read's start: a slot read to its end counts as dirty since then if entries remain.
        let now = ContinuousClock.now
        guard var plan = scheduler.flushPlan(now: now) else {
            // Nothing else to flush, but a slot could not be rescanned: fail, so the loop backs
            // off instead of asking the unreachable node again at once.
            if let nodeFailure { throw nodeFailure }
            return
        }
        // Only slots held are flushed, under the epochs held now; the others' logs are their
        // new owners' to drain.
        var epochs: [UInt16: Int64] = [:]
        if ownership.isFenced {
            var gone: Set<UInt16> = []
            for planned in plan.slots {
                if let epoch = ownership.flushEpoch(planned.slot) { epochs[planned.slot] = epoch } else { gone.insert(planned.slot) }
            }
            if !gone.isEmpty {
                forget(gone)
                plan = FlushScheduler.FlushPlan(slots: plan.slots.filter { !gone.contains($0.slot) }, changesPerSlot: plan.changesPerSlot)
                if plan.slots.isEmpty { return }
            }
        }
        let (reads, readFailure) = try await readLogs(plan.slots.map(\.slot), changesPerSlot: plan.changesPerSlot)
        nodeFailure = nodeFailure ?? readFailure

        var entries: [LoggedLikeChange] = []
        var malformed: [(slot: UInt16, entry: StreamEntry)] = []
        var newestRead: [UInt16: StreamEntryID] = [:]
        /// Per slot read: how many entries, holding how many changes (a malformed entry counts one).
        var readCounts: [UInt16: (entries: Int, changes: Int)] = [:]
        var fullReads: Set<UInt16> = []
        for (slot, read) in zip(plan.slots.map(\.slot), reads) {
            guard let read else { continue }
            if read.mayHaveMore { fullReads.insert(slot) }
            let log = logKey(slot)
            for (entry, changes) in zip(read.entries, read.changes) {
                newestRead[slot] = entry.id
                if let changes {
                    for change in changes { entries.append(LoggedLikeChange(log: log, slot: slot, entryID: entry.id, change: change)) }
                } else {
                    malformed.append((slot, entry))
                }
            }
            readCounts[slot] = (read.entries.count, read.changeCount)
        }
        // Slots whose logs were empty: whatever was appended there has been applied and trimmed.
        var satisfied: [FlushScheduler.WaiterID] = []
        for (planned, read) in zip(plan.slots, reads) where read != nil && newestRead[planned.slot] == nil {
            satisfied += scheduler.emptyLogRead(planned)
        }
        publishBacklog()
        resume(satisfied)
        guard !newestRead.isEmpty else {
            if let nodeFailure { throw nodeFailure }
            return
        }

        if !malformed.isEmpty {
            try await addDeadLetters(malformed.map { DeadLetter(slot: $0.slot, entryID: $0.entry.id, raw: $0.entry.fields.description) },
                                     reason: "malformed log entry")
        }
        let (missing, stale) = entries.isEmpty ? ([], []) : try await apply(entries, epochs: epochs)
        let committedAt = Date()
        // Slots found to be another node's were left out of the transaction: not trimmed, not counted.
        for slot in stale { newestRead[slot] = nil }
        if !stale.isEmpty { entries.removeAll { stale.contains($0.slot) } }
        recordLag(of: entries, committedAt: committedAt)

        // Applied: trim the logs up to what was read, and account for it. A trim that failed is
        // harmless: the next read skips what the recorded progress shows applied.
        let trimmed = Array(newestRead)
        let trimResults = await writer.execute(epochs: ownership.isFenced ? epochs : nil, trimmed.map { slot, newest in
            SlotCommands(slot: HashSlot(rawValue: slot)!, commands: [.xtrim(logKey(slot), olderThan: newest.successor)])
        })
        satisfied = []
        for ((slot, newest), result) in zip(trimmed, trimResults) {
            // The trim removes exactly the entries read (the read began at the log's start); the
            // scheduler counts changes.
            let removedEntries = (try? result.get()).flatMap { Int($0[0].integer ?? 0) } ?? 0
            let read = readCounts[slot] ?? (0, 0)
            let removed = removedEntries >= read.entries ? read.changes : removedEntries
            satisfied += scheduler.settled(slot: slot, removed: removed, applied: newest,
                                           stillDirtySince: fullReads.contains(slot) ? nil : now)
        }
        publishBacklog()
        stats.flushTransactions += entries.isEmpty ? 0 : 1
        stats.flushedEntries += entries.count + malformed.count
        stats.largestFlush = max(stats.largestFlush, entries.count)
        scheduler.flushCommitted(at: .now)
        resume(satisfied)
        if !missing.isEmpty {
            // The shard forgets the posts and deletes their Redis keys, so the next touch asks
            // PostgreSQL again (and is refused).
            await onMissingPosts(Array(missing))
        }
        if let nodeFailure { throw nodeFailure }
    }

    /// Records how long `entries` (applied by a commit at `committedAt`) waited since their
    /// entries were written, one observation per entry weighted by its changes.
    private func recordLag(of entries: [LoggedLikeChange], committedAt: Date) {
        var index = 0
        while index < entries.count {
            let entry = entries[index]
            var end = index + 1
            while end < entries.count && entries[end].entryID == entry.entryID && entries[end].log == entry.log { end += 1 }
            lag.record(changes: end - index, writtenAtMilliseconds: entry.entryID.milliseconds, committedAt: committedAt)
            index = end
        }
    }

    /// Most entries one Redis command returns: Redis is single-threaded, and one huge `XRANGE`
    /// makes every shard's round trip wait behind it.
    static let readSlice = 500

    /// What a flush read of one slot's log.
    struct LogRead {
        var entries: [StreamEntry] = []
        /// Per entry, its changes (`nil`: malformed).
        var changes: [[LikeChange]?] = []
        /// Changes read (a malformed entry counts one).
        var changeCount = 0
        /// Whether the read stopped at its budget rather than at the log's end.
        var mayHaveMore = false
    }

    /// The oldest whole entries of each slot's log, up to the first that brings them to
    /// `changesPerSlot` changes (so a slot gives at most that many plus one entry's, up to
    /// `ChangeLogEntry.maximumChangesPerEntry`) or to the log's end, read in slices of at most
    /// `readSlice` entries sized by the changes per entry seen so far, one round trip (per Redis
    /// node) per slice round. A slot whose node failed reads as `nil`,
    /// and the first such failure is returned.
    private func readLogs(_ slots: [UInt16], changesPerSlot: Int) async throws -> (reads: [LogRead?], failure: Error?) {
        var reads = [LogRead?](repeating: LogRead(), count: slots.count)
        var failure: Error?
        var open = Array(slots.indices)
        while !open.isEmpty {
            var asked: [Int] = []
            let groups = open.map { index -> SlotCommands in
                let read = reads[index]!
                let start = read.entries.last.map { "(" + $0.id.description } ?? "-"
                asked.append(Self.sliceSize(read: read, changesPerSlot: changesPerSlot))
                return SlotCommands(slot: HashSlot(rawValue: slots[index])!, commands: [.xrange(logKey(slots[index]), start: start, count: asked.last!)])
            }
            var stillOpen: [Int] = []
            for ((index, count), result) in zip(zip(open, asked), await redis.execute(groups)) {
                switch result {
                case .success(let replies):
                    let slice = try replies[0].streamEntries()
                    var reachedBudget = false
                    for entry in slice {
                        let changes = ChangeLogEntry.changes(from: entry)
                        reads[index]!.entries.append(entry)
                        reads[index]!.changes.append(changes)
                        reads[index]!.changeCount += changes?.count ?? 1
                        // Whole entries up to the budget: what a slice read beyond it is left
                        // for the next flush (the trim stops at the last entry kept).
                        if reads[index]!.changeCount >= changesPerSlot { reachedBudget = true; break }
                    }
                    if reachedBudget { reads[index]!.mayHaveMore = true; continue }
                    if slice.count == count { stillOpen.append(index) }
                case .failure(let error):
                    reads[index] = nil
                    failure = failure ?? error
                }
            }
            open = stillOpen
        }
        return (reads, failure)
    }

    /// How many entries the next slice of `read` asks for: enough, at the changes per entry
    /// seen so far, to reach `changesPerSlot` (64 at most before any is seen: one round trip for
    /// a quiet slot's small entries; what a slice of big ones brings past the budget is left in
    /// the log), at most `readSlice`.
    static func sliceSize(read: LogRead, changesPerSlot: Int) -> Int {
        let wanted = max(1, changesPerSlot - read.changeCount)
        guard !read.entries.isEmpty else { return min(64, wanted, readSlice) }
        let perEntry = max(1, read.changeCount / read.entries.count)
        return max(1, min(readSlice, (wanted + perEntry - 1) / perEntry))
    }

    /// Applies `entries` in one transaction; posts found missing get their changes dead-lettered
    /// first, then the transaction is tried again (it records progress past them). Changes
    /// PostgreSQL refuses on their own (a trigger, a constraint, a value: `isRefusal`) are found
    /// by bisection, dead-lettered with PostgreSQL's SQLSTATE and message, and left out of the
    /// next try the same way; transient errors are thrown, for the loop to retry. With
    /// `epochs` (a node of a cluster), the transaction first checks that PostgreSQL still gives
    /// each slot the epoch held; slots another node owns now are given up and their entries
    /// left out, and the rest is tried again.
    /// - Returns: the posts that did not exist, and the slots given up.
    private func apply(_ entries: [LoggedLikeChange], epochs: [UInt16: Int64]) async throws -> (missing: Set<Int64>, stale: Set<UInt16>) {
        var knownMissing: Set<Int64> = []
        var knownRejected: Set<LikePair> = []
        var entries = entries
        var stale: Set<UInt16> = []
        let deployment = layout.prefix
        let auditTable = self.auditTable
        while true {
            let expected = knownMissing
            let skipping = knownRejected
            let fence = ownership.isFenced ? epochs.filter { slot, _ in !stale.contains(slot) } : [:]
            do {
                if entries.isEmpty { return (knownMissing, stale) }
                let batch = entries
                _ = try await pool.withTransaction { connection in
                    let gone = try SlotTable.staleSlots(fence, deployment: deployment, on: connection)
                    if !gone.isEmpty { throw StaleSlots(slots: gone) }
                    let outcome = try LikeBatchApplier.apply(batch, on: connection, auditTable: auditTable,
                                                             skipping: skipping, isolatingRefusals: true)
                    let newlyMissing = Set(outcome.missingPosts.keys).subtracting(expected)
                    if !newlyMissing.isEmpty { throw NewlyMissingPosts(posts: newlyMissing) }
                    if !outcome.rejected.isEmpty { throw NewlyRejectedChanges(rejected: outcome.rejected) }
                    return outcome
                }
                return (knownMissing, stale)
            } catch let error as StaleSlots {
                for slot in error.slots {
                    ownership.noteFenced()
                    if let epoch = epochs[slot], ownership.lose(slot, epoch: epoch) {
                        log.log(.warn, "slot_fenced", ["slot": String(slot), "epoch": String(epoch),
                                                       "error": "PostgreSQL gives the slot to another owner; the flush left it out"])
                    }
                }
                stale.formUnion(error.slots)
                forget(Set(error.slots))
                entries.removeAll { stale.contains($0.slot) }
            } catch let error as NewlyMissingPosts {
                knownMissing.formUnion(error.posts)
                let doomed = entries.filter { error.posts.contains($0.change.postID) }
                try await addDeadLetters(doomed.map { DeadLetter(slot: $0.slot, entryID: $0.entryID, change: $0.change) },
                                         reason: DeadLetter.missingPostReason)
            } catch let error as NewlyRejectedChanges {
                // Only a pair's last change in the batch was sent: its letter names that change's entry.
                var lastEntry: [LikePair: LoggedLikeChange] = [:]
                for entry in entries { lastEntry[LikePair(entry.change)] = entry }
                let letters = error.rejected.compactMap { rejected -> DeadLetter? in
                    let pair = LikePair(rejected.change)
                    guard knownRejected.insert(pair).inserted, let entry = lastEntry[pair] else { return nil }
                    return DeadLetter(slot: entry.slot, entryID: entry.entryID, change: rejected.change,
                                      refusal: (rejected.sqlState, rejected.message))
                }
                try await addDeadLetters(letters, reason: DeadLetter.refusedReason)
            }
        }
    }

    private func addDeadLetters(_ letters: [DeadLetter], reason: String) async throws {
        guard !letters.isEmpty else { return }
        let at = String(Int64(Date().timeIntervalSince1970 * 1000))
        let commands = letters.map { RedisCommand.xadd(layout.deadLetters, fields: $0.fields(log: logKey($0.slot), reason: reason, at: at)) }
        for reply in try await redis.pipeline(commands, slot: layout.deadLettersSlot) { _ = try reply.throwingServerError() }
        stats.deadLetters += letters.count
        let states = Set(letters.compactMap { $0.refusal?.sqlState }).sorted().joined(separator: ",")
        if states.isEmpty {
            log.log(.warn, "dead_lettered", ["shard": String(shardIndex), "changes": String(letters.count), "reason": reason,
                                             "stream": layout.deadLetters])
        } else {
            log.log(.warn, "dead_lettered", ["shard": String(shardIndex), "changes": String(letters.count), "reason": reason,
                                             "sqlstate": states, "stream": layout.deadLetters])
        }
    }

    /// Reads the length and newest entry of every uncertain slot's log, 4,096 slots per call
    /// (one pipeline per Redis node), and takes them as the truth about what waits there. Slots
    /// whose node failed stay uncertain; the first such failure is returned.
    @discardableResult
    private func rescanUncertainSlots() async throws -> Error? {
        let all = scheduler.slotsToRescan
        guard !all.isEmpty else { return nil }
        var failure: Error?
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
                let newest = try reply[1].streamEntries().first
                // The changes waiting, estimated from the newest entry's size (entries of a log
                // hold one change each when its slot is quiet, up to 1,000 when busy).
                let perEntry = newest.flatMap { ChangeLogEntry.changes(from: $0)?.count } ?? 1
                follow(scheduler.rescanned(slot: slot, length: length * max(1, perEntry), newest: newest?.id, now: now))
            }
        }
        return failure
    }

    /// Whether `slot`'s log may hold changes PostgreSQL does not have yet (also when a write's
    /// outcome there is unknown and the log has not been read again). When the count says so,
    /// the log's length is read: after a failover dropped entries that were counted, only an
    /// empty log can tell that nothing waits (reconcile and resync depend on this answer).
    func hasPendingChanges(inSlot slot: UInt16) async -> Bool {
        guard scheduler.hasPendingChanges(inSlot: slot) else { return false }
        let asked = scheduler.newestAppended(inSlot: slot)
        let result = await redis.execute([SlotCommands(slot: HashSlot(rawValue: slot)!, commands: [.xlen(logKey(slot))])])
        guard case .success(let replies)? = result.first, replies.first?.integer == 0 else { return true }
        resume(scheduler.logFoundEmpty(slot: slot, appendedWhenAsked: asked))
        publishBacklog()
        return scheduler.hasPendingChanges(inSlot: slot)
    }

    /// The slots whose logs hold changes not yet in PostgreSQL, with how many are counted there.
    func pendingBySlot() -> [UInt16: Int] {
        scheduler.pendingBySlot
    }

    /// Stats with the backlog figures of this moment.
    func currentStats() -> ShardStats {
        var current = stats
        let now = ContinuousClock.now
        current.shard = shardIndex
        current.pendingChanges = scheduler.pendingTotal
        current.secondsSinceFlush = (now - scheduler.lastFlush).inSeconds
        if let oldest = scheduler.oldestDirtySince {
            current.oldestPendingAgeSeconds = (now - oldest).inSeconds
        }
        return current
    }

    // MARK: - Log entries

    private func logKey(_ slot: UInt16) -> String {
        layout.changeLog(of: HashSlot(rawValue: slot)!)
    }
}
