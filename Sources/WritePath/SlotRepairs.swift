import Foundation

/// The books of a shard's repairs after a Redis failover (`SlotOwnership`'s `repairing` slots):
/// each repair under way — when it began, the posts it is unloading, what it dropped and found
/// lost, when a failed step is tried again — and the repairs finished since their last log line.
/// Pure bookkeeping: the slots' moves are `SlotOwnership`'s.
struct SlotRepairs {
    /// One slot's repair under way.
    struct Repair: Sendable {
        let startedAt: ContinuousClock.Instant
        /// Posts being unloaded.
        var unloading: [Int64] = []
        /// Posts dropped, and changes found lost, so far.
        var dropped = 0
        var lost = 0
        /// When a failed step is tried again.
        var retryAt: ContinuousClock.Instant?
    }

    /// The repairs finished since the last log line about them.
    private struct Totals {
        var slots = 0
        var dropped = 0
        var lost = 0
        var slowest: Duration = .zero
        /// A few of the changes found lost, for the log.
        var sample: [String] = []
    }

    private var underWay: [UInt16: Repair] = [:]
    private var done = Totals()
    /// Repairs started since the shard started.
    private(set) var started = 0

    /// `slot`'s repair under way, if one is.
    subscript(slot: UInt16) -> Repair? { underWay[slot] }

    func isUnderWay(_ slot: UInt16) -> Bool { underWay[slot] != nil }

    /// The earliest retry of a repair step (the `repairRetry` timer).
    var nextRetry: ContinuousClock.Instant? { underWay.values.compactMap(\.retryAt).min() }

    /// Starts `slot`'s repair; whether it started (rather than one was under way).
    mutating func start(_ slot: UInt16, now: ContinuousClock.Instant) -> Bool {
        guard underWay[slot] == nil else { return false }
        underWay[slot] = Repair(startedAt: now)
        started += 1
        return true
    }

    /// `slot` left `repairing` (served again, or gone elsewhere): its record goes.
    mutating func end(_ slot: UInt16) {
        underWay[slot] = nil
    }

    /// Changes found lost from `slot`'s log; a few are kept for the log line.
    mutating func noteLost(_ lost: [PendingLike], in slot: UInt16) {
        guard underWay[slot] != nil else { return }
        underWay[slot]!.lost += lost.count
        for change in lost where done.sample.count < 5 {
            done.sample.append("post \(change.postID) user \(change.userID) \(change.liked ? "like" : "unlike")")
        }
    }

    mutating func retry(_ slot: UInt16, at: ContinuousClock.Instant) {
        underWay[slot]?.retryAt = at
    }

    mutating func unloading(_ posts: [Int64], in slot: UInt16) {
        underWay[slot]?.unloading = posts
    }

    /// The unload of `slot`'s posts ended, `dropped` of them gone.
    mutating func unloaded(dropping dropped: Int, in slot: UInt16) {
        underWay[slot]?.dropped += dropped
        underWay[slot]?.unloading = []
    }

    /// The slots whose retry is due at `now`, their retries cleared.
    mutating func takeDueRetries(now: ContinuousClock.Instant) -> [UInt16] {
        var due: [UInt16] = []
        for (slot, repair) in underWay.sorted(by: { $0.key < $1.key }) {
            guard let at = repair.retryAt, at <= now else { continue }
            underWay[slot]?.retryAt = nil
            due.append(slot)
        }
        return due
    }

    /// `slot`'s repair is done; once the last one under way is, the line that logs them all
    /// (one per shard and failover, not one per slot).
    mutating func finish(_ slot: UInt16, now: ContinuousClock.Instant, shard: Int) -> ShardLogLine? {
        guard let repair = underWay.removeValue(forKey: slot) else { return nil }
        done.slots += 1
        done.dropped += repair.dropped
        done.lost += repair.lost
        done.slowest = max(done.slowest, now - repair.startedAt)
        guard underWay.isEmpty else { return nil }
        var fields: [(key: String, value: String)] = [
            ("shard", String(shard)), ("slots", String(done.slots)), ("posts_dropped", String(done.dropped)),
            ("lost_changes", String(done.lost)), ("seconds", String(format: "%.3f", done.slowest.inSeconds)),
        ]
        if !done.sample.isEmpty { fields.append(("lost_sample", done.sample.joined(separator: ", "))) }
        let line = ShardLogLine(done.lost > 0 ? .error : .info, "failover_repaired", fields)
        done = Totals()
        return line
    }
}
