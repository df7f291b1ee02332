import CounterCore
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter

/// The callers who wait for PostgreSQL: `flushAll`, a recovery's rescan, a change's commit
/// (`answerWhenApplied`), and how they are resumed or failed.
extension WriteBehind {
    /// `flushAll`: once the logs whose content is unknown are read, wait for everything
    /// appended so far.
    mutating func flushAll(_ reply: ShardReply<Result<Void, Error>>, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        guard scheduler.uncertainSlots.isEmpty else {
            afterRescan.append(.flushAll(reply))
            wake(.wakeLoop)
            return []
        }
        return addWaiter(marks: scheduler.unflushedMarks, .caller(reply), into: &actions)
    }

    /// Makes everything appended so far due now: a waiter nobody waits on.
    mutating func requestFlushAll() {
        if case .wait(let id, let signal) = scheduler.waiterAdded(marks: scheduler.unflushedMarks) {
            waiters[id] = .nobody
            wake(signal)
        }
    }

    /// A sole writer's start: every log of `slots` is read before anything else.
    mutating func recover(_ slots: Range<Int>, reply: ShardReply<Result<Void, Error>>) {
        wake(scheduler.uncertain(Set(slots.map { UInt16($0) })))
        afterRescan.append(.recovery(reply))
    }

    /// Asked to stop: with `drain`, flush everything waiting, then finish; without, finish after
    /// the flush under way.
    mutating func stop(drain: Bool) {
        wake(scheduler.stop(drain: drain))
    }

    /// Waits (as `waiter`) until every entry in `marks` is in PostgreSQL.
    mutating func addWaiter(
        marks: [UInt16: StreamEntryID], _ waiter: FlushWaiter,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        switch scheduler.waiterAdded(marks: marks) {
        case .resumeNow:
            return waiter.satisfied(into: &actions)
        case .refuse:
            return waiter.failed(with: ShardStateMachine.stopped, into: &actions)
        case .wait(let id, let signal):
            waiters[id] = waiter
            wake(signal)
            return []
        }
    }

    /// Resumes the waiters the scheduler found satisfied.
    mutating func resume(_ ids: [FlushScheduler.WaiterID], into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        var effects: [Effect] = []
        for id in ids {
            if let waiter = waiters.removeValue(forKey: id) { effects += waiter.satisfied(into: &actions) }
        }
        return effects
    }

    /// Fails the waiter `id` with `error` (its slot moved, its entry was lost, or the flusher stopped).
    mutating func failWaiter(
        _ id: FlushScheduler.WaiterID, with error: CounterError,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        guard let waiter = waiters.removeValue(forKey: id) else { return [] }
        return waiter.failed(with: error, into: &actions)
    }
}
