import Synchronization

/// Changes of one shard that are in Redis but not yet in PostgreSQL. The flusher adds and
/// subtracts; the shard reads it without a hop to refuse writes above the backlog limit.
final class BacklogGauge: Sendable {
    private let pending = Atomic<Int>(0)

    var value: Int { pending.load(ordering: .relaxed) }

    func add(_ amount: Int) {
        pending.add(amount, ordering: .relaxed)
    }
}
