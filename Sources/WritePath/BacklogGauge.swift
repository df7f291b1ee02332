import Synchronization

/// Changes of one shard that are in Redis but not yet in PostgreSQL. The flusher publishes its
/// scheduler's total; the shard reads it without a hop to refuse writes above the backlog limit.
final class BacklogGauge: Sendable {
    private let pending = Atomic<Int>(0)

    /// The changes waiting, as last published.
    var value: Int { pending.load(ordering: .relaxed) }

    /// Publishes the flusher's total, which only the flusher changes.
    func set(_ value: Int) {
        pending.store(value, ordering: .relaxed)
    }
}
