import CounterCore
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter

/// A shard's write-behind, as a state machine of its own: what waits in each slot's log and who
/// waits for it (`FlushScheduler`'s books), the lists' index of what is acknowledged and not yet
/// applied (`PendingLikes`), and one flush at a time (`FlushRun`), whose steps are here, each an
/// I/O action out and its result back:
///
/// **rescan** the logs whose content is unknown → **plan** (the oldest dirty slots still held, under
/// the epochs held now) → **read** whole entries → **coalesce** them into changes (malformed
/// entries are dead letters first) → **apply** in one transaction that checks the slots' epochs in
/// PostgreSQL and records each log's progress → **trim** what was applied → **settle** the books and
/// answer whoever waited.
///
/// Its state is one `Loop` — awake, asleep until a deadline or an event, flushing (with the run),
/// or finished — changed only by its events, here and in its two other files (`+LostEntries`:
/// what Redis may have lost, judged against PostgreSQL; `+Waiters`: who waits for PostgreSQL),
/// which is why its state is module-visible rather than private: the shard's router (`ShardStateMachine`) calls the methods
/// below, which are its events; they ask the shell for I/O with the shard's `Action`s and tell
/// the router what concerns the shard's other machines as `Effect`s (a slot drained, fenced, a
/// post found missing). What it needs to know of the slots comes in as `SlotOwnership`, read only.
struct WriteBehind {
    /// Where the flush loop is.
    enum Loop {
        /// It asks the scheduler what to do after the current event.
        case awake
        /// Until a deadline (`nil`: until an event makes a flush due).
        case sleeping(until: ContinuousClock.Instant?)
        /// One flush under way.
        case flushing(FlushRun)
        /// Nothing more is flushed.
        case finished
    }

    /// What the write-behind tells the shard's other machines.
    enum Effect {
        /// Everything the slot's log held when its drain began is in PostgreSQL.
        case drained(slot: UInt16, epoch: Int64)
        /// The slot's drain failed: its log could not be read, or its backlog was forgotten.
        case drainFailed(slot: UInt16, epoch: Int64, error: Error)
        /// What a slot being handed off wrote is in PostgreSQL (or was lost with Redis: nothing of
        /// it is left to flush).
        case handOffFlushed(slot: UInt16, epoch: Int64)
        /// Writes made under these epochs were refused: PostgreSQL gives the slots to another owner.
        case fenced([ShardStateMachine.FencedSlot], why: String)
        /// PostgreSQL does not have these posts: their changes are dead letters now.
        case postsMissing([Int64])
        /// Changes of these posts PostgreSQL refused are written as dead letters.
        case refusedLettersWritten(posts: [Int64])
        /// A repairing slot's log no longer holds these acknowledged changes: lost with its
        /// failed Redis master.
        case lostInRepair(slot: UInt16, [PendingLike])
    }

    /// What waits for the logs whose content is unknown to be read.
    enum AfterRescan {
        case flushAll(ShardReply<Result<Void, Error>>)
        /// A slot being drained (its claim raised the key; the log is read next).
        case drain(slot: UInt16, epoch: Int64)
        /// A sole writer's recovery.
        case recovery(ShardReply<Result<Void, Error>>)
    }

    /// What the write-behind has done, for the shard's statistics.
    struct Counters {
        var flushTransactions = 0
        var flushedEntries = 0
        var largestFlush = 0
        var flushRetries = 0
        var lastFlushError: String?
        var deadLetters = 0
        var failoverLostChanges = 0
        var redisErrors = 0
        var postgresErrors = 0
    }

    // MARK: - State

    let shard: Int
    private let layout: RedisKeyLayout
    private let isFenced: Bool
    private let backlogMaximumAge: Duration?
    var scheduler: FlushScheduler
    var loop = Loop.awake
    /// Who waits for what to reach PostgreSQL, by the scheduler's ids.
    var waiters: [FlushScheduler.WaiterID: FlushWaiter] = [:]
    /// `flushAll`, drains and recoveries that wait for the uncertain logs to be read first.
    var afterRescan: [AfterRescan] = []
    /// Slots whose log read empty while entries were noted in it, while PostgreSQL's progress of
    /// them is read (a run that has done its steps ends with that answer).
    var progressCheck: [UInt16: FlushScheduler.FlushPlan.Slot] = [:]
    /// Failed flush attempts in a row, for the log.
    private var failuresInARow = 0
    /// The age of the oldest waiting change as last looked at, and when: finding it walks the
    /// shard's slots, so arrivals look again at most every `backlogAgeRecheck`.
    private var backlogAgeSeen: (checkedAt: ContinuousClock.Instant, age: Duration?)?
    static let backlogAgeRecheck: Duration = .milliseconds(100)
    /// The changes logged and not yet applied, by post and by user, for the lists.
    var pendingLikes = PendingLikes()
    var counters = Counters()

    init(shard: Int, configuration: WritePathConfiguration, isFenced: Bool, now: ContinuousClock.Instant) {
        self.shard = shard
        self.layout = RedisKeyLayout(prefix: configuration.keyPrefix)
        self.isFenced = isFenced
        self.backlogMaximumAge = configuration.backlogMaximumAge
        self.scheduler = FlushScheduler(configuration: configuration, now: now)
    }

    // MARK: - What the rest of the shard reads

    /// Whether the loop has finished: nothing more will be flushed.
    var isFinished: Bool {
        if case .finished = loop { return true }
        return false
    }

    /// When the sleeping loop wants to be woken (the `flush` timer), if it sleeps until a time.
    var wakeUpDeadline: ContinuousClock.Instant? {
        if case .sleeping(let until) = loop { return until }
        return nil
    }

    /// Whether a rescan of the uncertain logs is under way.
    private var isRescanning: Bool {
        if case .flushing(let run) = loop, case .rescanning = run.step { return true }
        return false
    }

    /// Changes waiting for PostgreSQL over all slots.
    var pendingTotal: Int { scheduler.pendingTotal }

    /// The slots with changes waiting, and how many each.
    var pendingBySlot: [UInt16: Int] { scheduler.pendingBySlot }

    /// Whether `slot`'s log may hold changes PostgreSQL does not have yet.
    func hasPendingChanges(inSlot slot: UInt16) -> Bool { scheduler.hasPendingChanges(inSlot: slot) }

    /// Whether `slot`'s log may hold entries nobody noted (it is read again before the next flush).
    func isUncertain(_ slot: UInt16) -> Bool { scheduler.uncertainSlots.contains(slot) }

    /// Whether some log may hold entries nobody noted.
    var hasUncertainLogs: Bool { !scheduler.uncertainSlots.isEmpty }

    /// Whether `entry` of `slot` is in PostgreSQL.
    func isApplied(_ entry: StreamEntryID, inSlot slot: UInt16) -> Bool { scheduler.isApplied([slot: entry]) }

    /// When the last flush committed (or the write-behind began).
    var lastFlush: ContinuousClock.Instant { scheduler.lastFlush }

    /// When the longest-dirty slot became dirty.
    var oldestDirtySince: ContinuousClock.Instant? { scheduler.oldestDirtySince }

    /// How long the oldest waiting change has waited (`nil`: none waits, or no age limit is
    /// set), looked at afresh at most every `backlogAgeRecheck`.
    mutating func oldestPendingAge(now: ContinuousClock.Instant) -> Duration? {
        guard backlogMaximumAge != nil, scheduler.pendingTotal > 0 else { return nil }
        if let last = backlogAgeSeen, now - last.checkedAt < Self.backlogAgeRecheck {
            return last.age.map { $0 + (now - last.checkedAt) }
        }
        let age = scheduler.oldestDirtySince.map { now - $0 }
        backlogAgeSeen = (now, age)
        return age
    }

    /// The changes acknowledged and not applied of `post`, or `nil` when `slot`'s log may hold
    /// changes the index has not seen.
    func pendingChanges(ofPost post: Int64, slot: UInt16) -> [PendingLike]? {
        guard !scheduler.uncertainSlots.contains(slot), pendingLikes.isIndexed(slot: slot) else { return nil }
        return pendingLikes.of(post: post)
    }

    /// A user's changes acknowledged and not applied, or `nil` when some log may hold changes
    /// the index has not seen.
    func pendingChanges(ofUser user: Int64) -> [PendingLike]? {
        guard scheduler.uncertainSlots.isEmpty, !pendingLikes.hasUnindexedSlots else { return nil }
        return pendingLikes.of(user: user)
    }

    // MARK: - What batches wrote

    /// A batch's write: slots whose outcome is unknown (read again before the next flush), the
    /// changes it logged (the lists' index), and per slot how many changes and the newest entry.
    mutating func batchWrote(
        uncertain: Set<UInt16>, logged: [(change: LikeChange, entry: StreamEntryID)],
        appended: [UInt16: (count: Int, newest: StreamEntryID)], now: ContinuousClock.Instant
    ) {
        if !uncertain.isEmpty { wake(scheduler.uncertain(uncertain)) }
        for (change, entry) in logged { pendingLikes.logged(change, in: entry) }
        if !appended.isEmpty { wake(scheduler.appended(appended, now: now)) }
    }

    /// These slots' logs may hold entries nobody noted: read them again before the next flush.
    mutating func logsUncertain(_ slots: Set<UInt16>) {
        wake(scheduler.uncertain(slots))
    }

    /// Operations answered once the entries of `marks` are in PostgreSQL (`postgres` acks).
    mutating func answerWhenApplied(
        _ answers: [(ShardOperation, LikeState)], marks: [UInt16: StreamEntryID],
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        addWaiter(marks: marks, .acknowledgements(answers), into: &actions)
    }

    /// The flushes that failed on a Redis master that failed over need not wait out their
    /// back-off: its replica serves now.
    mutating func failureResolved() {
        wake(scheduler.failureResolved())
    }

    // MARK: - Slots' drains and hand-offs

    /// A slot's log is drained before it is served (a claim's drain or a repair's): read again,
    /// then flushed up to what it held.
    mutating func drain(slot: UInt16, epoch: Int64) {
        wake(scheduler.uncertain([slot]))
        afterRescan.append(.drain(slot: slot, epoch: epoch))
    }

    /// What a slot being handed off wrote is flushed; then `handOffFlushed`.
    mutating func flushForHandOff(slot: UInt16, epoch: Int64, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        addWaiter(marks: scheduler.unflushedMarks.filter { $0.key == slot }, .handOffFlush(slot: slot, epoch: epoch), into: &actions)
    }

    /// Forgets what the books hold of `slot` (another node drains its log): callers waiting for
    /// its entries are told the outcome is not known here, and a drain of it under way ends.
    mutating func forget(slot: UInt16, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        var effects: [Effect] = []
        for id in scheduler.forget([slot]) { effects += failWaiter(id, with: Self.moved, into: &actions) }
        pendingLikes.forget(slot: slot)
        afterRescan.removeAll { item in
            if case .drain(let drained, _) = item { return drained == slot }
            return false
        }
        return effects
    }

    // MARK: - The loop

    /// Wakes the sleeping loop when the scheduler says an event made a flush due sooner.
    mutating func wake(_ signal: FlushScheduler.LoopSignal) {
        if signal == .wakeLoop, case .sleeping = loop { loop = .awake }
    }

    /// What waited only for logs that were forgotten meanwhile goes on (after every event, when
    /// no rescan runs: a forgotten log needs no reading).
    mutating func resolveForgottenRescans(into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        guard !afterRescan.isEmpty, !isRescanning else { return [] }
        return resolveAfterRescan(failures: [:], into: &actions)
    }

    /// After every event: the loop, when awake (or its deadline has come), asks the scheduler
    /// what to do — flush, sleep, or finish.
    mutating func driveLoop(now: ContinuousClock.Instant, slots: SlotOwnership, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        if case .sleeping(let until?) = loop, until <= now { loop = .awake }
        guard case .awake = loop else { return [] }
        switch scheduler.nextAction(now: now) {
        case .flush:
            return startFlush(now: now, slots: slots, into: &actions)
        case .sleep(let until):
            loop = .sleeping(until: until)
        case .waitForEvent:
            loop = .sleeping(until: nil)
        case .finish(let failing):
            var effects: [Effect] = []
            for id in failing { effects += failWaiter(id, with: ShardStateMachine.stopped, into: &actions) }
            loop = .finished
            return effects
        }
        return []
    }

    private mutating func startFlush(
        now: ContinuousClock.Instant, slots: SlotOwnership,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        let run = FlushRun(now: now, rescanning: scheduler.slotsToRescan)
        loop = .flushing(run)
        if case .rescanning(let rescanned) = run.step {
            actions.append(.rescanLogs(rescanned, listing: Set(rescanned.filter(slots.isRepairing))))
            return []
        }
        return plan(run, now: now, slots: slots, into: &actions)
    }

    /// Whether `slot` is still flushed under the epoch `run` planned it with.
    private func stillHeld(_ slot: UInt16, by run: FlushRun, slots: SlotOwnership) -> Bool {
        !isFenced || (slots.flushEpoch(of: slot) != nil && slots.flushEpoch(of: slot) == run.epochs[slot])
    }

    // MARK: - A flush's steps

    /// The plan: the oldest dirty slots this node still holds, under the epochs held now.
    mutating func plan(
        _ planned: FlushRun, now: ContinuousClock.Instant, slots: SlotOwnership,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        var run = planned
        // The read starts now: a slot read to its end counts as dirty since then if entries remain.
        run.startedAt = now
        guard var plan = scheduler.flushPlan(now: now) else { return endFlush(run, now: now, into: &actions) }
        var effects: [Effect] = []
        var epochs: [UInt16: Int64] = [:]
        if isFenced {
            var gone: Set<UInt16> = []
            for planned in plan.slots {
                if let epoch = slots.flushEpoch(of: planned.slot) { epochs[planned.slot] = epoch } else { gone.insert(planned.slot) }
            }
            if !gone.isEmpty {
                for id in scheduler.forget(gone) { effects += failWaiter(id, with: Self.moved, into: &actions) }
                for slot in gone { pendingLikes.forget(slot: slot) }
                plan = FlushScheduler.FlushPlan(slots: plan.slots.filter { !gone.contains($0.slot) }, changesPerSlot: plan.changesPerSlot)
                if plan.slots.isEmpty { return effects + endFlush(run, now: now, into: &actions) }
            }
        }
        run.plan = plan
        run.epochs = epochs
        run.step = .reading
        loop = .flushing(run)
        actions.append(.readLogs(plan.slots.map(\.slot), changesPerSlot: plan.changesPerSlot))
        return effects
    }

    /// What the reads gave: changes to apply, malformed entries to dead-letter first, and
    /// slots whose logs were empty (whatever was appended there is applied and trimmed).
    mutating func logsRead(
        _ reads: [UInt16: LogRead], failure: Error?, now: ContinuousClock.Instant, slots: SlotOwnership,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        guard case .flushing(var run) = loop, run.step == .reading, let plan = run.plan else {
            return unexpected("logs read while no flush reads them", into: &actions)
        }
        run.nodeFailure = run.nodeFailure ?? failure
        run.take(reads.filter { stillHeld($0.key, by: run, slots: slots) }, layout: layout)
        var satisfied: [FlushScheduler.WaiterID] = []
        var checking: [UInt16] = []
        for planned in plan.slots
        where reads[planned.slot] != nil && run.newestRead[planned.slot] == nil && stillHeld(planned.slot, by: run, slots: slots) {
            // An empty log that should still hold entries PostgreSQL has not applied: Redis
            // lost them (a failover, a restart without its data) — or another flush applied
            // them. Only PostgreSQL's recorded progress can tell, and callers waiting for those
            // entries (`--ack postgres`) must not hear they were applied if they were lost.
            if let appended = planned.appended, !scheduler.isApplied([planned.slot: appended]) {
                if progressCheck[planned.slot] == nil {
                    progressCheck[planned.slot] = planned
                    checking.append(planned.slot)
                }
                continue
            }
            satisfied += scheduler.emptyLogRead(planned)
        }
        if !checking.isEmpty { actions.append(.readFlushProgress(checking)) }
        loop = .flushing(run)
        var effects = resume(satisfied, into: &actions)
        if run.newestRead.isEmpty {
            effects += endFlush(run, now: now, into: &actions)
        } else if !run.malformed.isEmpty {
            run.step = .deadLetteringMalformed
            run.lettersInFlight = run.malformed.count
            run.refusedPostsInFlight = []
            loop = .flushing(run)
            actions.append(
                .addDeadLetters(
                    run.malformed.map { DeadLetter(slot: $0.slot, entryID: $0.entry.id, raw: $0.entry.fields.description) },
                    reason: "malformed log entry"))
        } else {
            effects += apply(run, now: now, slots: slots, into: &actions)
        }
        return effects
    }

    /// Dead letters are written: the transaction runs (again).
    mutating func deadLettersAdded(
        _ result: Result<Void, Error>, now: ContinuousClock.Instant, slots: SlotOwnership,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        guard case .flushing(let run) = loop, run.step == .deadLetteringMalformed || run.step == .deadLettering else {
            return unexpected("dead letters added while no flush writes them", into: &actions)
        }
        switch result {
        case .success:
            counters.deadLetters += run.lettersInFlight
            let effects: [Effect] = run.refusedPostsInFlight.isEmpty ? [] : [.refusedLettersWritten(posts: run.refusedPostsInFlight)]
            return effects + apply(run, now: now, slots: slots, into: &actions)
        case .failure(let error):
            failFlush(error, now: now, into: &actions)
            return []
        }
    }

    /// Runs the transaction, or goes straight to the trim when there is nothing to apply (the
    /// entries read were all malformed).
    private mutating func apply(
        _ applying: FlushRun, now: ContinuousClock.Instant, slots: SlotOwnership,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        var run = applying
        if run.entries.isEmpty { return trim(run, now: now, slots: slots, into: &actions) }
        run.step = .applying
        loop = .flushing(run)
        actions.append(.applyFlush(run.transaction))
        return []
    }

    /// How the transaction ended. A rollback names what it found: slots another node owns now
    /// (left out), posts that do not exist and changes PostgreSQL refused (dead letters first);
    /// then it is tried again. A failure ends the flush, to be retried after a backoff.
    mutating func flushTransactionEnded(
        _ outcome: FlushTransaction.Outcome, now: ContinuousClock.Instant, slots: SlotOwnership,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        guard case .flushing(var run) = loop, run.step == .applying else {
            return unexpected("a flush transaction ended while none runs", into: &actions)
        }
        switch outcome {
        case .committed(let at):
            run.committedAt = at
            return trim(run, now: now, slots: slots, into: &actions)
        case .staleSlots(let stale):
            let fenced = stale.compactMap { slot in run.epochs[slot].map { ShardStateMachine.FencedSlot(slot: slot, epoch: $0) } }
            run.leaveOut(Set(stale))
            return [.fenced(fenced, why: "PostgreSQL gives the slot to another owner; the flush left it out")]
                + apply(run, now: now, slots: slots, into: &actions)
        case .missingPosts(let posts):
            let letters = run.letters(missing: posts)
            run.step = .deadLettering
            run.lettersInFlight = letters.count
            run.refusedPostsInFlight = []
            loop = .flushing(run)
            actions.append(.addDeadLetters(letters, reason: DeadLetter.missingPostReason))
            return []
        case .refused(let rejected):
            let letters = run.letters(rejected: rejected)
            run.step = .deadLettering
            run.lettersInFlight = letters.count
            run.refusedPostsInFlight = letters.compactMap { $0.change?.postID }
            if letters.isEmpty { return apply(run, now: now, slots: slots, into: &actions) }
            loop = .flushing(run)
            actions.append(.addDeadLetters(letters, reason: DeadLetter.refusedReason))
            return []
        case .failed(let error):
            failFlush(error, now: now, into: &actions)
            return []
        }
    }

    /// Applied: trim the logs up to what was read. A trim that fails is harmless: the next read
    /// skips what the recorded progress shows applied.
    private mutating func trim(
        _ applied: FlushRun, now: ContinuousClock.Instant, slots: SlotOwnership,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        var run = applied
        let trimmed = run.newestRead.filter { stillHeld($0.key, by: run, slots: slots) }
        run.step = .trimming
        loop = .flushing(run)
        if trimmed.isEmpty { return logsTrimmed([:], now: now, slots: slots, into: &actions) }
        actions.append(.trimLogs(trimmed, epochs: isFenced ? run.epochs : nil))
        return []
    }

    /// The trims ended (the slots Redis fenced are the router's first): the books are settled
    /// with what they removed; posts found missing are forgotten and their keys dropped.
    mutating func logsTrimmed(
        _ results: [UInt16: Result<Int, RedisError>], now: ContinuousClock.Instant, slots: SlotOwnership,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        guard case .flushing(let run) = loop, run.step == .trimming else {
            return unexpected("logs trimmed while no flush trims them", into: &actions)
        }
        var satisfied: [FlushScheduler.WaiterID] = []
        var effects: [Effect] = []
        var lost = 0
        for (slot, newest) in run.newestRead.sorted(by: { $0.key < $1.key }) where stillHeld(slot, by: run, slots: slots) {
            // The read took the log's head up to `newest`: an entry noted in it up to there that
            // the read did not meet, and PostgreSQL did not have before, is gone from Redis (a
            // failover, a restart without its data) — it was not applied. Its waiters are told so,
            // not that it was applied, and its changes are counted lost, not quietly dropped.
            let read = run.entriesRead[slot] ?? []
            for id in scheduler.takeWaitersOfLostEntries(slot: slot, present: read, through: newest) {
                effects += failWaiter(id, with: ShardStateMachine.lostInFailover, into: &actions)
            }
            lost += pendingLikes.applied(slot: slot, through: newest, read: read).count
            // The trim removes exactly the entries read (the read began at the log's start); the
            // scheduler counts changes.
            let removedEntries = (results[slot].flatMap { try? $0.get() }) ?? 0
            let counts = run.readCounts[slot] ?? (0, 0)
            let removed = removedEntries >= counts.entries ? counts.changes : removedEntries
            satisfied += scheduler.settled(
                slot: slot, removed: removed, applied: newest,
                stillDirtySince: run.fullReads.contains(slot) ? nil : run.startedAt)
        }
        if lost > 0 {
            counters.failoverLostChanges += lost
            actions.append(.log(ShardLogLine(.error, "redis_lost_changes", [("shard", String(shard)), ("changes", String(lost))])))
        }
        counters.flushTransactions += run.entries.isEmpty ? 0 : 1
        counters.flushedEntries += run.entries.count + run.malformed.count
        counters.largestFlush = max(counters.largestFlush, run.entries.count)
        scheduler.flushCommitted(at: now)
        backlogAgeSeen = nil
        effects += resume(satisfied, into: &actions)
        // The shard forgets the posts and deletes their Redis keys, so the next touch asks
        // PostgreSQL again (and is refused).
        if !run.knownMissing.isEmpty { effects.append(.postsMissing(run.knownMissing.sorted())) }
        return effects + endFlush(run, now: now, into: &actions)
    }

    /// The run's steps are done: it waits for PostgreSQL's progress of logs that read empty, if
    /// that read is out; else it failed if a Redis node failed along the way (the loop backs
    /// off), or it succeeded.
    mutating func endFlush(_ ended: FlushRun, now: ContinuousClock.Instant, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        if !progressCheck.isEmpty {
            var waiting = ended
            waiting.step = .checkingProgress
            loop = .flushing(waiting)
            return []
        }
        if let failure = ended.nodeFailure {
            failFlush(failure, now: now, into: &actions)
            return []
        }
        loop = .awake
        scheduler.flushSucceeded()
        if failuresInARow > 0 {
            actions.append(.log(ShardLogLine(.info, "flush_recovered", [("shard", String(shard)), ("failed_attempts", String(failuresInARow))])))
            failuresInARow = 0
        }
        return []
    }

    /// The flush failed: nothing more of it happens; the next one comes after a backoff.
    private mutating func failFlush(_ error: Error, now: ContinuousClock.Instant, into actions: inout [ShardStateMachine.Action]) {
        loop = .awake
        counters.flushRetries += 1
        counters.lastFlushError = "\(error)"
        if error is RedisError { counters.redisErrors += 1 }
        if error is PostgresError { counters.postgresErrors += 1 }
        let delay = scheduler.flushFailed(now: now)
        failuresInARow += 1
        actions.append(
            .log(
                ShardLogLine(
                    .warn, "flush_failed",
                    [
                        ("shard", String(shard)), ("attempt", String(failuresInARow)),
                        ("retry_in_ms", String(Int(delay.inSeconds * 1_000))), ("error", "\(error)"),
                    ])))
    }

    // MARK: - The end

    /// The shard's loop ends: callers still waiting are told nothing more will happen; drains
    /// under way fail (their slots are let go).
    mutating func finish(into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        var effects: [Effect] = []
        for id in Array(waiters.keys) { effects += failWaiter(id, with: ShardStateMachine.stopped, into: &actions) }
        for item in afterRescan {
            switch item {
            case .flushAll(let reply), .recovery(let reply): actions.append(.reply(reply.with(.failure(ShardStateMachine.stopped))))
            case .drain: break
            }
        }
        afterRescan = []
        return effects
    }

    /// An event this machine cannot be in a state to receive: a bug. Loud in debug builds; logged
    /// in release builds, where the event changes nothing.
    func unexpected(_ what: String, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        ShardStateMachine.unexpected(what, shard: shard, state: "\(loop)", into: &actions)
        return []
    }

    static let moved = CounterError(
        code: .unavailable,
        message:
            "the post's slot moved to another node before the change reached PostgreSQL; the change is in the slot's log, which the new owner applies",
        retryAfterSeconds: 1)
}
