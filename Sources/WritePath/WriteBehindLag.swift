import Foundation
import Synchronization

/// How long acknowledged changes waited for PostgreSQL: per change, from the moment its batch
/// was written to Redis (its log entry's id: Redis's clock, in milliseconds) to the commit of
/// the flush that applied it (this node's clock). Shared by a node's flushers; read for
/// `/metrics` (`counter_write_behind_lag_seconds`) and by the bench. On one host both clocks are
/// the same; across hosts their offset adds in (keep them synchronised, as NTP does).
public final class WriteBehindLag: Sendable {
    /// Upper bounds of the buckets, in seconds: fine below a second, where the flusher works.
    public static let bucketBounds: [Double] = [
        0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
        1, 1.5, 2, 3, 5, 10, 30, 60,
    ]

    /// What was recorded so far.
    public struct Snapshot: Sendable, Equatable {
        /// Changes per bucket (not cumulative), as `bucketBounds`; changes above the last bound
        /// only count in `count`.
        public var buckets = [Int](repeating: 0, count: WriteBehindLag.bucketBounds.count)
        public var count = 0
        public var sumSeconds = 0.0
    }

    private let state = Mutex(Snapshot())

    public init() {}

    /// Records `changes` changes written to Redis at `writtenAtMilliseconds` (Unix time) and
    /// committed to PostgreSQL at `committedAt`.
    func record(changes: Int, writtenAtMilliseconds: UInt64, committedAt: Date) {
        guard changes > 0 else { return }
        let seconds = max(0, committedAt.timeIntervalSince1970 - Double(writtenAtMilliseconds) / 1_000)
        let bucket = Self.bucketBounds.firstIndex { seconds <= $0 }
        state.withLock { state in
            if let bucket { state.buckets[bucket] += changes }
            state.count += changes
            state.sumSeconds += seconds * Double(changes)
        }
    }

    public func snapshot() -> Snapshot {
        state.withLock { $0 }
    }
}
