import CounterCore
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter

/// What Redis may have lost, judged against what was noted and what PostgreSQL has: a rescan of
/// logs whose content is unknown (and a repairing slot's whole log, after its master failed over),
/// PostgreSQL's recorded progress of logs that read empty while entries were noted in them, and
/// the log lengths a drain asks for. Each settles the books (`FlushScheduler`), the lists' index
/// (`PendingLikes`) and the callers waiting, and counts what was lost.
extension WriteBehind {
    /// The rescan's results are the truth about what waits in those logs; drains and `flushAll`
    /// callers that waited for it go on (or fail with its error). A repairing slot's log, listed
    /// whole, tells which acknowledged changes its failed master lost.
    mutating func logsRescanned(
        _ results: [UInt16: Result<ShardStateMachine.LogSummary, Error>], now: ContinuousClock.Instant,
        slots: SlotOwnership, into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        guard case .flushing(var run) = loop, case .rescanning = run.step else {
            return unexpected("logs rescanned while no rescan runs", into: &actions)
        }
        var effects: [Effect] = []
        var failures: [UInt16: Error] = [:]
        for (slot, result) in results.sorted(by: { $0.key < $1.key }) {
            switch result {
            case .success(let summary):
                // A slot given up meanwhile is the new owner's to read.
                guard slots.flushEpoch(of: slot) != nil else { continue }
                wake(scheduler.rescanned(slot: slot, length: summary.changes, newest: summary.newest, now: now))
                if let entries = summary.entries, slots.isRepairing(slot) {
                    effects += auditFailover(slot: slot, present: Set(entries), into: &actions)
                }
                // What the log held may not all have come through this shard's batches.
                if summary.changes > 0, let newest = summary.newest { pendingLikes.unindexed(slot: slot, through: newest) }
            case .failure(let error):
                failures[slot] = error
                run.nodeFailure = run.nodeFailure ?? error
            }
        }
        loop = .flushing(run)
        effects += resolveAfterRescan(failures: failures, into: &actions)
        // A rescan alone (a recovery, a write whose outcome is unknown) flushes only what is due.
        if scheduler.isFlushDue(now: now) {
            effects += plan(run, now: now, slots: slots, into: &actions)
        } else {
            effects += endFlush(run, now: now, into: &actions)
        }
        return effects
    }

    /// Callers waiting for a lost entry of a repairing slot to reach PostgreSQL (`--ack postgres`
    /// answers, flush callers) are told it will not: it is gone; the index forgets it.
    mutating func auditFailover(
        slot: UInt16, present: Set<StreamEntryID>,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        var effects: [Effect] = []
        for id in scheduler.takeWaitersOfLostEntries(slot: slot, present: present) {
            effects += failWaiter(id, with: ShardStateMachine.lostInFailover, into: &actions)
        }
        let lost = pendingLikes.dropMissing(slot: slot, present: present)
        if !lost.isEmpty {
            counters.failoverLostChanges += lost.count
            effects.append(.lostInRepair(slot: slot, lost))
        }
        return effects
    }

    /// Drains, recoveries and `flushAll` callers waiting for the uncertain logs to be read.
    mutating func resolveAfterRescan(failures: [UInt16: Error], into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        guard !afterRescan.isEmpty else { return [] }
        var effects: [Effect] = []
        let pending = afterRescan
        afterRescan = []
        let firstFailure = failures.sorted { $0.key < $1.key }.first?.value
        let allRead = scheduler.uncertainSlots.isEmpty
        for item in pending {
            switch item {
            case .drain(let slot, let epoch):
                if let error = failures[slot] {
                    effects.append(.drainFailed(slot: slot, epoch: epoch, error: error))
                } else if !scheduler.uncertainSlots.contains(slot) {
                    effects += addWaiter(
                        marks: scheduler.unflushedMarks.filter { $0.key == slot }, .drain(slot: slot, epoch: epoch),
                        into: &actions)
                } else {
                    afterRescan.append(item)
                }
            case .flushAll(let reply):
                if let firstFailure {
                    actions.append(.reply(reply.with(.failure(firstFailure))))
                } else if allRead {
                    effects += addWaiter(marks: scheduler.unflushedMarks, .caller(reply), into: &actions)
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
        return effects
    }

    /// PostgreSQL's recorded progress of logs that read empty while entries were noted in them:
    /// what it has is applied; the rest was lost with Redis. Callers waiting for a lost entry
    /// are told it will not reach PostgreSQL, the lists' index forgets it, and it is counted.
    /// A failed read leaves the slots as they were: the next flush reads them again. A run that
    /// waited only for this ends with it (failing, to back off, when the read failed).
    mutating func flushProgressRead(
        _ result: Result<[UInt16: StreamEntryID], Error>, now: ContinuousClock.Instant,
        slots: SlotOwnership, into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        let checked = progressCheck
        progressCheck = [:]
        var effects: [Effect] = []
        if case .success(let progress) = result {
            var satisfied: [FlushScheduler.WaiterID] = []
            var lost = 0
            for (slot, planned) in checked.sorted(by: { $0.key < $1.key }) where slots.flushEpoch(of: slot) != nil {
                if let applied = progress[slot] {
                    satisfied += scheduler.settled(slot: slot, removed: 0, applied: applied, stillDirtySince: nil)
                    pendingLikes.applied(slot: slot, through: applied)
                }
                // Only what was noted when the log was read empty is judged by that read: a batch
                // may have appended since, and its entries are there.
                for id in scheduler.takeWaitersOfLostEntries(slot: slot, present: [], through: planned.appended) {
                    effects += failWaiter(id, with: ShardStateMachine.lostInFailover, into: &actions)
                }
                lost += pendingLikes.dropMissing(slot: slot, present: [], through: planned.appended).count
                satisfied += scheduler.emptyLogRead(planned)
            }
            if lost > 0 {
                counters.failoverLostChanges += lost
                actions.append(.log(ShardLogLine(.error, "redis_lost_changes", [("shard", String(shard)), ("changes", String(lost))])))
            }
            effects += resume(satisfied, into: &actions)
        }
        if case .flushing(var run) = loop {
            if case .failure(let error) = result { run.nodeFailure = run.nodeFailure ?? error }
            loop = .flushing(run)
            if run.step == .checkingProgress { effects += endFlush(run, now: now, into: &actions) }
        }
        return effects
    }

    // MARK: - Log lengths

    /// The books' view of `slot` before its log's length is read: whether it may hold changes,
    /// and what was noted as appended (the question's mark).
    func lengthQuestion(slot: UInt16) -> (pending: Bool, uncertain: Bool, appended: StreamEntryID?) {
        (scheduler.hasPendingChanges(inSlot: slot), scheduler.uncertainSlots.contains(slot), scheduler.newestAppended(inSlot: slot))
    }

    /// An empty log holds nothing, whatever the books counted (what they counted is applied, or
    /// was lost with a Redis node that failed over).
    mutating func logLengthsRead(
        _ question: ShardStateMachine.LogLengthQuestion, _ lengths: [UInt16: Int],
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        var effects: [Effect] = []
        for (slot, length) in lengths.sorted(by: { $0.key < $1.key }) where length == 0 {
            guard let asked = question.appendedWhenAsked[slot] else { continue }
            let satisfied = scheduler.logFoundEmpty(slot: slot, appendedWhenAsked: asked)
            // What the index kept of an empty log is applied (or was lost with its Redis node, as
            // Redis's own copy was).
            if let asked, !scheduler.hasPendingChanges(inSlot: slot) { pendingLikes.applied(slot: slot, through: asked) }
            effects += resume(satisfied, into: &actions)
        }
        return effects
    }
}
