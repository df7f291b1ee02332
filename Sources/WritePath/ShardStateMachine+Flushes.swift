import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// The write-behind: when to flush is `FlushScheduler`'s to say; a flush is a `FlushRun` whose
/// steps are here, each an action out and its result back. Callers who wait for entries to reach
/// PostgreSQL are the scheduler's waiters (`addWaiter`).
extension ShardStateMachine {
    // MARK: - The flush loop

    /// Wakes the sleeping flush loop when the scheduler says an event made a flush due sooner.
    mutating func wake(_ signal: FlushScheduler.LoopSignal) {
        if signal == .wakeLoop, case .sleeping = flushLoop { flushLoop = .awake }
    }

    /// Asks the scheduler what to do, when the loop is awake (or its deadline has come):
    /// flush, sleep, or finish.
    mutating func driveFlushLoop(now: ContinuousClock.Instant, into actions: inout [Action]) {
        if case .sleeping(let until?) = flushLoop, until <= now { flushLoop = .awake }
        guard flushLoop == .awake else { return }
        switch scheduler.nextAction(now: now) {
        case .flush:
            startFlush(now: now, into: &actions)
        case .sleep(let until):
            flushLoop = .sleeping(until: until)
        case .waitForEvent:
            flushLoop = .sleeping(until: nil)
        case .finish(let failing):
            for id in failing { failWaiter(id, with: Self.stopped, now: now, into: &actions) }
            flushLoop = .finished
        }
    }

    private mutating func startFlush(now: ContinuousClock.Instant, into actions: inout [Action]) {
        flushLoop = .flushing
        let run = FlushRun(now: now, rescanning: scheduler.slotsToRescan)
        flush = run
        if case .rescanning(let slots) = run.step {
            actions.append(.rescanLogs(slots, listing: Set(slots.filter { repairs[$0] != nil })))
        } else {
            plan(now: now, into: &actions)
        }
    }

    /// Whether `slot` is still flushed under the epoch the run planned it with.
    private func stillHeld(_ slot: UInt16, by run: FlushRun) -> Bool {
        !isFenced || (slotState(slot).flushEpoch != nil && slotState(slot).flushEpoch == run.epochs[slot])
    }

    // MARK: - Steps

    /// The rescan's results are the truth about what waits in those logs; drains and
    /// `flushAll` callers that waited for it go on (or fail with its error).
    mutating func logsRescanned(_ results: [UInt16: Result<LogSummary, Error>], now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard var run = flush, case .rescanning = run.step else { return }
        var failures: [UInt16: Error] = [:]
        for (slot, result) in results.sorted(by: { $0.key < $1.key }) {
            switch result {
            case .success(let summary):
                // A slot given up meanwhile is the new owner's to read.
                guard slotState(slot).flushEpoch != nil else { continue }
                wake(scheduler.rescanned(slot: slot, length: summary.changes, newest: summary.newest, now: now))
                if let entries = summary.entries { auditFailover(slot: slot, present: entries, now: now, into: &actions) }
                // What the log held may not all have come through this shard's batches.
                if summary.changes > 0, let newest = summary.newest { pendingLikes.unindexed(slot: slot, through: newest) }
            case .failure(let error):
                failures[slot] = error
                run.nodeFailure = run.nodeFailure ?? error
            }
        }
        flush = run
        resolveAfterRescan(failures: failures, now: now, into: &actions)
        // A rescan alone (a recovery, a write whose outcome is unknown) flushes only what is due.
        if scheduler.isFlushDue(now: now) {
            plan(now: now, into: &actions)
        } else {
            endFlush(run, now: now, into: &actions)
        }
    }

    /// Drains, recoveries and `flushAll` callers waiting for the uncertain logs to be read.
    mutating func resolveAfterRescan(failures: [UInt16: Error], now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard !afterRescan.isEmpty else { return }
        let pending = afterRescan
        afterRescan = []
        let firstFailure = failures.sorted { $0.key < $1.key }.first?.value
        let allRead = scheduler.uncertainSlots.isEmpty
        for item in pending {
            switch item {
            case .drain(let slot, let epoch):
                if let error = failures[slot] {
                    drainFailed(slot, epoch: epoch, error: error, now: now, into: &actions)
                } else if !scheduler.uncertainSlots.contains(slot) {
                    addWaiter(marks: scheduler.unflushedMarks.filter { $0.key == slot }, .drain(slot: slot, epoch: epoch), now: now, into: &actions)
                } else {
                    afterRescan.append(item)
                }
            case .flushAll(let reply):
                if let firstFailure {
                    actions.append(.reply(reply.with(.failure(firstFailure))))
                } else if allRead {
                    addWaiter(marks: scheduler.unflushedMarks, .caller(reply), now: now, into: &actions)
                } else {
                    afterRescan.append(item)
                }
            case .recovery(let reply):
                if let firstFailure {
                    actions.append(.reply(reply.with(.failure(firstFailure))))
                } else if allRead {
                    actions.append(.reply(reply.with(.success(()))))
                } else {
                    afterRescan.append(item)
                }
            }
        }
    }

    /// The plan: the oldest dirty slots this node still holds, under the epochs held now.
    private mutating func plan(now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard var run = flush else { return }
        // The read starts now: a slot read to its end counts as dirty since then if entries remain.
        run.startedAt = now
        guard var plan = scheduler.flushPlan(now: now) else {
            endFlush(run, now: now, into: &actions)
            return
        }
        var epochs: [UInt16: Int64] = [:]
        if isFenced {
            var gone: Set<UInt16> = []
            for planned in plan.slots {
                if let epoch = slotState(planned.slot).flushEpoch { epochs[planned.slot] = epoch } else { gone.insert(planned.slot) }
            }
            if !gone.isEmpty {
                for id in scheduler.forget(gone) { failWaiter(id, with: Self.moved, now: now, into: &actions) }
                for slot in gone { pendingLikes.forget(slot: slot) }
                plan = FlushScheduler.FlushPlan(slots: plan.slots.filter { !gone.contains($0.slot) }, changesPerSlot: plan.changesPerSlot)
                if plan.slots.isEmpty {
                    endFlush(run, now: now, into: &actions)
                    return
                }
            }
        }
        run.plan = plan
        run.epochs = epochs
        run.step = .reading
        flush = run
        actions.append(.readLogs(plan.slots.map(\.slot), changesPerSlot: plan.changesPerSlot))
    }

    /// What the reads gave: changes to apply, malformed entries to dead-letter first, and
    /// slots whose logs were empty (whatever was appended there is applied and trimmed).
    mutating func logsRead(_ reads: [UInt16: LogRead], failure: Error?, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard var run = flush, run.step == .reading, let plan = run.plan else { return }
        run.nodeFailure = run.nodeFailure ?? failure
        run.take(reads.filter { stillHeld($0.key, by: run) }, layout: layout)
        var satisfied: [FlushScheduler.WaiterID] = []
        var verifying: [UInt16] = []
        for planned in plan.slots where reads[planned.slot] != nil && run.newestRead[planned.slot] == nil && stillHeld(planned.slot, by: run) {
            // An empty log that should still hold entries PostgreSQL has not applied: Redis
            // lost them (a failover, a restart without its data) — or another flush applied
            // them. Only PostgreSQL's recorded progress can tell, and callers waiting for those
            // entries (`--ack postgres`) must not hear they were applied if they were lost.
            if let appended = planned.appended, !scheduler.isApplied([planned.slot: appended]) {
                if verifyingEmptyLogs[planned.slot] == nil {
                    verifyingEmptyLogs[planned.slot] = planned
                    verifying.append(planned.slot)
                }
                continue
            }
            satisfied += scheduler.emptyLogRead(planned)
        }
        if !verifying.isEmpty {
            run.verifying = true
            actions.append(.readFlushProgress(verifying))
        }
        flush = run
        resume(satisfied, now: now, into: &actions)
        if run.newestRead.isEmpty {
            endFlush(run, now: now, into: &actions)
        } else if !run.malformed.isEmpty {
            run.step = .deadLetteringMalformed
            run.lettersInFlight = run.malformed.count
            run.refusedPostsInFlight = []
            flush = run
            actions.append(.addDeadLetters(run.malformed.map { DeadLetter(slot: $0.slot, entryID: $0.entry.id, raw: $0.entry.fields.description) },
                                           reason: "malformed log entry"))
        } else {
            apply(now: now, into: &actions)
        }
    }

    /// PostgreSQL's recorded progress of logs that read empty while entries were noted in them:
    /// what it has is applied; the rest was lost with Redis. Callers waiting for a lost entry
    /// are told it will not reach PostgreSQL, the lists' index forgets it, and it is counted.
    /// A failed read leaves the slots as they were: the next flush reads them again.
    mutating func flushProgressRead(_ result: Result<[UInt16: StreamEntryID], Error>, now: ContinuousClock.Instant,
                                    into actions: inout [Action]) {
        let verified = verifyingEmptyLogs
        verifyingEmptyLogs = [:]
        defer {
            // The run that read the logs ends now (failing, to back off, when the read failed).
            if var run = flush, run.verifying {
                run.verifying = false
                if case .failure(let error) = result { run.nodeFailure = run.nodeFailure ?? error }
                flush = run
                if run.step == .verifying { endFlush(run, now: now, into: &actions) }
            }
        }
        guard case .success(let progress) = result else { return }
        var satisfied: [FlushScheduler.WaiterID] = []
        var lost = 0
        for (slot, planned) in verified.sorted(by: { $0.key < $1.key }) where slotState(slot).flushEpoch != nil {
            if let applied = progress[slot] {
                satisfied += scheduler.settled(slot: slot, removed: 0, applied: applied, stillDirtySince: nil)
                pendingLikes.applied(slot: slot, through: applied)
            }
            // Only what was noted when the log was read empty is judged by that read: a batch
            // may have appended since, and its entries are there.
            for id in scheduler.takeWaitersOfLostEntries(slot: slot, present: [], through: planned.appended) {
                failWaiter(id, with: Self.lostInFailover, now: now, into: &actions)
            }
            lost += pendingLikes.dropMissing(slot: slot, present: [], through: planned.appended).count
            satisfied += scheduler.emptyLogRead(planned)
        }
        if lost > 0 {
            stats.failoverLostChanges += lost
            actions.append(.log(ShardLogLine(.error, "redis_lost_changes", [("shard", String(index)), ("changes", String(lost))])))
        }
        resume(satisfied, now: now, into: &actions)
    }

    /// Dead letters are written: the transaction runs (again).
    mutating func deadLettersAdded(_ result: Result<Void, Error>, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard let run = flush, run.step == .deadLetteringMalformed || run.step == .deadLettering else { return }
        switch result {
        case .success:
            stats.deadLetters += run.lettersInFlight
            deadLetterPins.lettersWritten(of: run.refusedPostsInFlight, at: now)
            apply(now: now, into: &actions)
        case .failure(let error): failFlush(error, now: now, into: &actions)
        }
    }

    /// Runs the transaction, or goes straight to the trim when there is nothing to apply (the
    /// entries read were all malformed).
    private mutating func apply(now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard var run = flush else { return }
        if run.entries.isEmpty {
            trim(now: now, into: &actions)
            return
        }
        run.step = .applying
        flush = run
        actions.append(.applyFlush(run.transaction))
    }

    /// How the transaction ended. A rollback names what it found: slots another node owns now
    /// (left out), posts that do not exist and changes PostgreSQL refused (dead letters first);
    /// then it is tried again. A failure ends the flush, to be retried after a backoff.
    mutating func flushTransactionEnded(_ outcome: FlushTransaction.Outcome, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard var run = flush, run.step == .applying else { return }
        switch outcome {
        case .committed(let at):
            run.committedAt = at
            flush = run
            trim(now: now, into: &actions)
        case .staleSlots(let stale):
            let fenced = stale.compactMap { slot in run.epochs[slot].map { FencedSlot(slot: slot, epoch: $0) } }
            slotsFenced(fenced, now: now, into: &actions, why: "PostgreSQL gives the slot to another owner; the flush left it out")
            run.leaveOut(Set(stale))
            flush = run
            apply(now: now, into: &actions)
        case .missingPosts(let posts):
            let letters = run.letters(missing: posts)
            run.step = .deadLettering
            run.lettersInFlight = letters.count
            run.refusedPostsInFlight = []
            flush = run
            actions.append(.addDeadLetters(letters, reason: DeadLetter.missingPostReason))
        case .refused(let rejected):
            let letters = run.letters(rejected: rejected)
            run.step = .deadLettering
            run.lettersInFlight = letters.count
            run.refusedPostsInFlight = letters.compactMap { $0.change?.postID }
            flush = run
            if letters.isEmpty {
                apply(now: now, into: &actions)
            } else {
                actions.append(.addDeadLetters(letters, reason: DeadLetter.refusedReason))
            }
        case .failed(let error):
            flush = run
            failFlush(error, now: now, into: &actions)
        }
    }

    /// Applied: trim the logs up to what was read. A trim that fails is harmless: the next read
    /// skips what the recorded progress shows applied.
    private mutating func trim(now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard var run = flush else { return }
        let trimmed = run.newestRead.filter { stillHeld($0.key, by: run) }
        run.step = .trimming
        flush = run
        if trimmed.isEmpty {
            logsTrimmed([:], fenced: [], now: now, into: &actions)
        } else {
            actions.append(.trimLogs(trimmed, epochs: isFenced ? run.epochs : nil))
        }
    }

    /// The books are settled with what the trims removed; posts found missing are forgotten
    /// and their keys dropped (between batches).
    mutating func logsTrimmed(_ results: [UInt16: Result<Int, RedisError>], fenced: [FencedSlot], now: ContinuousClock.Instant,
                              into actions: inout [Action]) {
        guard let run = flush, run.step == .trimming else { return }
        slotsFenced(fenced, now: now, into: &actions)
        var satisfied: [FlushScheduler.WaiterID] = []
        for (slot, newest) in run.newestRead.sorted(by: { $0.key < $1.key }) where stillHeld(slot, by: run) {
            // The trim removes exactly the entries read (the read began at the log's start); the
            // scheduler counts changes.
            let removedEntries = (results[slot].flatMap { try? $0.get() }) ?? 0
            let read = run.readCounts[slot] ?? (0, 0)
            let removed = removedEntries >= read.entries ? read.changes : removedEntries
            pendingLikes.applied(slot: slot, through: newest)
            satisfied += scheduler.settled(slot: slot, removed: removed, applied: newest,
                                           stillDirtySince: run.fullReads.contains(slot) ? nil : run.startedAt)
        }
        stats.flushTransactions += run.entries.isEmpty ? 0 : 1
        stats.flushedEntries += run.entries.count + run.malformed.count
        stats.largestFlush = max(stats.largestFlush, run.entries.count)
        scheduler.flushCommitted(at: now)
        backlogAge = nil
        resume(satisfied, now: now, into: &actions)
        if !run.knownMissing.isEmpty {
            // The shard forgets the posts and deletes their Redis keys, so the next touch asks
            // PostgreSQL again (and is refused).
            let missing = run.knownMissing.sorted()
            unknownPosts.remember(missing, at: now)
            cancelLargeLoads(of: missing)
            betweenBatches.append(.dropDeleted(missing))
        }
        endFlush(run, now: now, into: &actions)
    }

    /// The flush is over: it failed if a Redis node failed along the way (the loop backs off),
    /// else it succeeded.
    private mutating func endFlush(_ run: FlushRun, now: ContinuousClock.Instant, into actions: inout [Action]) {
        if run.verifying {
            // Ends when PostgreSQL's progress comes back (`flushProgressRead`).
            var waiting = run
            waiting.step = .verifying
            flush = waiting
            return
        }
        if let failure = run.nodeFailure {
            failFlush(failure, now: now, into: &actions)
            return
        }
        flush = nil
        flushLoop = .awake
        scheduler.flushSucceeded()
        if flushFailuresInARow > 0 {
            actions.append(.log(ShardLogLine(.info, "flush_recovered", [("shard", String(index)), ("failed_attempts", String(flushFailuresInARow))])))
            flushFailuresInARow = 0
        }
    }

    /// The flush failed: nothing more of it happens; the next one comes after a backoff.
    private mutating func failFlush(_ error: Error, now: ContinuousClock.Instant, into actions: inout [Action]) {
        flush = nil
        flushLoop = .awake
        stats.flushRetries += 1
        stats.lastFlushError = "\(error)"
        count(error)
        let delay = scheduler.flushFailed(now: now)
        flushFailuresInARow += 1
        actions.append(.log(ShardLogLine(.warn, "flush_failed", [
            ("shard", String(index)), ("attempt", String(flushFailuresInARow)),
            ("retry_in_ms", String(Int(delay.inSeconds * 1_000))), ("error", "\(error)"),
        ])))
    }

    // MARK: - Callers waiting for PostgreSQL

    /// `flushAll`: once the logs whose content is unknown are read, wait for everything
    /// appended so far.
    mutating func flushAll(_ reply: ShardReply<Result<Void, Error>>, now: ContinuousClock.Instant, into actions: inout [Action]) {
        if scheduler.uncertainSlots.isEmpty {
            addWaiter(marks: scheduler.unflushedMarks, .caller(reply), now: now, into: &actions)
        } else {
            afterRescan.append(.flushAll(reply))
            wake(.wakeLoop)
        }
    }

    /// Makes everything appended so far due now: a waiter nobody waits on.
    mutating func requestFlushAll() {
        if case .wait(let id, let signal) = scheduler.waiterAdded(marks: scheduler.unflushedMarks) {
            waiters[id] = .nobody
            wake(signal)
        }
    }

    /// A sole writer's start: every log of the shard's slots is read before anything else.
    mutating func recover(_ reply: ShardReply<Result<Void, Error>>) {
        wake(scheduler.uncertain(Set(slotRange.map { UInt16($0) })))
        afterRescan.append(.recovery(reply))
    }

    /// Waits (as `waiter`) until every entry in `marks` is in PostgreSQL.
    mutating func addWaiter(marks: [UInt16: StreamEntryID], _ waiter: Waiter, now: ContinuousClock.Instant, into actions: inout [Action]) {
        switch scheduler.waiterAdded(marks: marks) {
        case .resumeNow:
            satisfy(waiter, now: now, into: &actions)
        case .refuse:
            fail(waiter, with: Self.stopped, now: now, into: &actions)
        case .wait(let id, let signal):
            waiters[id] = waiter
            wake(signal)
        }
    }

    /// Resumes the waiters the scheduler found satisfied.
    mutating func resume(_ ids: [FlushScheduler.WaiterID], now: ContinuousClock.Instant, into actions: inout [Action]) {
        for id in ids {
            if let waiter = waiters.removeValue(forKey: id) { satisfy(waiter, now: now, into: &actions) }
        }
    }

    /// Fails the waiter `id` with `error` (its slot moved, or the flusher stopped).
    mutating func failWaiter(_ id: FlushScheduler.WaiterID, with error: CounterError, now: ContinuousClock.Instant, into actions: inout [Action]) {
        if let waiter = waiters.removeValue(forKey: id) { fail(waiter, with: error, now: now, into: &actions) }
    }

    private mutating func satisfy(_ waiter: Waiter, now: ContinuousClock.Instant, into actions: inout [Action]) {
        switch waiter {
        case .caller(let reply): actions.append(.reply(reply.with(.success(()))))
        case .nobody: break
        case .acknowledgements(let answers): actions.append(.answer(answers.map { ($0.0, .success($0.1)) }))
        case .drain(let slot, let epoch):
            let state = slotState(slot)
            slotsDraining.remove(slot)
            if state == .draining(epoch: epoch) || state == .repairing(epoch: epoch) { move(slot, .drained, now: now, into: &actions) }
        case .handOffFlush(let slot, let epoch):
            if slotState(slot) == .flushing(epoch: epoch) { move(slot, .flushed, now: now, into: &actions) }
        }
    }

    private mutating func fail(_ waiter: Waiter, with error: CounterError, now: ContinuousClock.Instant, into actions: inout [Action]) {
        switch waiter {
        case .caller(let reply): actions.append(.reply(reply.with(.failure(error))))
        case .nobody: break
        case .acknowledgements(let answers): actions.append(.answer(answers.map { ($0.0, .failure(error)) }))
        case .drain(let slot, let epoch): drainFailed(slot, epoch: epoch, error: error, now: now, into: &actions)
        case .handOffFlush(let slot, let epoch):
            // Its entries were lost with Redis: nothing of them is left to flush, so the
            // hand-off goes on. Otherwise the slot moved (its release fails through the slot's
            // own move) or the shard stopped (its release is told then).
            if error == Self.lostInFailover, slotState(slot) == .flushing(epoch: epoch) { move(slot, .flushed, now: now, into: &actions) }
        }
    }
}
