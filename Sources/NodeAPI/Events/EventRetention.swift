import CounterCore
import Persistence
import Synchronization

/// Keeps the change events' outbox to `--event-retention`: every `interval` it deletes the
/// events older than that, oldest first, `batch` at a time (one short transaction each, found by
/// the primary key, so neither the flush nor a reader waits on it), and goes on at once while
/// full batches come back. Runs on every node; the nodes take turns (a transaction-scoped
/// advisory lock), so two never delete the same rows.
public final class EventRetention: Service {
    /// What the retention did, for `/metrics`.
    public struct Progress: Sendable, Equatable {
        /// Events this node pruned since it started.
        public var pruned: Int64 = 0
        /// Prunes that failed (PostgreSQL unreachable, say) since it started.
        public var failures: Int64 = 0
    }

    /// How old an event may get.
    public let retention: Duration
    let batch: Int
    let interval: Duration
    private let events: LikeEvents
    private let log: NodeLog
    private let progress = Mutex(Progress())

    public init(retention: Duration, events: LikeEvents, batch: Int = 10_000, interval: Duration = .seconds(10), log: NodeLog = .silent) {
        self.retention = retention
        self.events = events
        self.batch = batch
        self.interval = interval
        self.log = log
    }

    public var snapshot: Progress { progress.withLock { $0 } }

    public func run(_ lifecycle: ServiceLifecycle) async throws {
        lifecycle.started()
        let alarm = LoopAlarm()
        let stopping = Task {
            await lifecycle.stopRequested()
            alarm.ring()
        }
        defer { stopping.cancel() }
        var failedBefore = false
        while !lifecycle.isStopRequested {
            var again = false
            do {
                let pruned = try await events.prune(olderThan: retention, batch: batch)
                progress.withLock { $0.pruned += Int64(pruned) }
                again = pruned == batch
                if failedBefore { log.log(.info, "event_pruning_recovered", [:]) }
                failedBefore = false
            } catch {
                progress.withLock { $0.failures += 1 }
                if !failedBefore { log.log(.warn, "event_pruning_failed", ["error": "\(error)"]) }
                failedBefore = true
            }
            if !again { await alarm.sleep(until: .now + interval) }
        }
    }
}
