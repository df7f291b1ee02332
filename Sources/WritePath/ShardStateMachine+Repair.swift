import Persistence
import RedisDriver
import ShardRouter

/// Self-repair after a Redis failover. When a slot's master dies and its replica takes its
/// place (`RedisTopology.onFailover`), whatever the master acknowledged and had not replicated
/// is gone from Redis: likers sets and counts behind PostgreSQL (where the flusher had applied
/// it), log entries the flusher never saw (acknowledged and lost everywhere). Each such slot
/// this shard serves is repaired, with no operator step (`SlotLifecycle`'s `repairing` state):
///
/// 1. its operations wait, and its log is read again and drained to PostgreSQL, so PostgreSQL
///    has everything that survived; the changes the lists' index holds that the log no longer
///    does are the ones the failover lost: counted (`failover_lost_changes`) and logged, not
///    hidden;
/// 2. every post Redis holds of the slot is dropped (listed with `CLUSTER GETKEYSINSLOT`,
///    unloaded fenced by the slot's epoch): its next read or write loads it from PostgreSQL;
/// 3. the slot is served again, its waiting operations first.
extension ShardStateMachine {
    static let lostInFailover = CounterError(
        code: .unavailable,
        message: "the change was written to Redis, which lost it (a master that failed over before its replica had it, or a restart without its data): it was not applied; read the state before repeating it",
        retryAfterSeconds: 1)

    /// How soon a repair step that failed (Redis not answering) is tried again.
    static let repairRetryDelay: Duration = .milliseconds(500)

    /// How long a failover is remembered for a slot not served here when it happened: a claim
    /// of the slot within that time repairs it before serving it.
    static let failoverMemory: Duration = .seconds(600)

    /// `slots`' master failed over: those served here are repaired — once the batch in flight
    /// has ended, since it read what it decides on before the failover and writes after it; a
    /// slot being drained for a claim is repaired instead of served; one not served here (not
    /// owned, claimed but not drained, being handed off) is remembered, so that a claim of it
    /// repairs it first: its new owner's topology may have seen the failover before it owned it.
    mutating func redisFailedOver(_ slots: [UInt16], now: ContinuousClock.Instant, into actions: inout [Action]) {
        // The flushes that failed on the dead master need not wait out their backoff: its
        // replica serves now, and the repair's drain is a flush.
        wake(scheduler.failureResolved())
        let mine = slots.filter(owns)
        if batch != nil {
            failoversAfterBatch.formUnion(mine)
            return
        }
        var started = 0
        for slot in mine {
            switch slotState(slot) {
            case .serving, .repairing, .draining:
                if startRepair(slot, now: now, into: &actions) { started += 1 }
            default:
                recentFailovers[slot] = now
            }
        }
        guard started > 0 else { return }
        actions.append(.log(ShardLogLine(.warn, "failover_repair_started", [("shard", String(index)), ("slots", String(started))])))
    }

    /// Moves `slot` to `repairing`; whether this started a repair (rather than joined one).
    @discardableResult
    mutating func startRepair(_ slot: UInt16, now: ContinuousClock.Instant, into actions: inout [Action]) -> Bool {
        // The table moves the slot (and drains its log) first: a move out of `repairing` clears
        // the repair's record, so it is made after.
        move(slot, .failedOver, now: now, into: &actions)
        guard case .repairing = slotState(slot) else { return false }
        recentFailovers[slot] = nil
        guard repairs[slot] == nil else { return false }
        repairs[slot] = SlotRepair(startedAt: now)
        stats.failoverRepairs += 1
        return true
    }

    /// A claim's drain begins: a slot whose master failed over while it was not served here
    /// (within `failoverMemory`) is repaired before it is served.
    mutating func repairIfFailedOverBefore(_ slot: UInt16, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard let at = recentFailovers.removeValue(forKey: slot) else { return }
        guard now - at < Self.failoverMemory else { return }
        if startRepair(slot, now: now, into: &actions) {
            actions.append(.log(ShardLogLine(.warn, "failover_repair_started", [("shard", String(index)), ("slots", "1"), ("on_claim", "true")])))
        }
    }

    /// A repairing slot's log, read again: the changes the lists' index holds for it that are
    /// neither applied nor in the log any more were lost with the failed master.
    mutating func auditFailover(slot: UInt16, present: [StreamEntryID], now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard repairs[slot] != nil else { return }
        let present = Set(present)
        // Callers waiting for a lost entry to reach PostgreSQL (`--ack postgres` answers, flush
        // callers) are told it will not: it is gone.
        for id in scheduler.takeWaitersOfLostEntries(slot: slot, present: present) {
            failWaiter(id, with: Self.lostInFailover, now: now, into: &actions)
        }
        let lost = pendingLikes.dropMissing(slot: slot, present: present)
        guard !lost.isEmpty else { return }
        stats.failoverLostChanges += lost.count
        repairs[slot]?.lost += lost.count
        for change in lost where repairsDone.sample.count < 5 {
            repairsDone.sample.append("post \(change.postID) user \(change.userID) \(change.liked ? "like" : "unlike")")
        }
    }

    /// The posts Redis holds of repairing slots: dropped, all in one pipeline; a slot with none
    /// left is served again.
    mutating func slotPostsListed(_ results: [UInt16: Result<[Int64], RedisError>], now: ContinuousClock.Instant,
                                  into actions: inout [Action]) {
        var unloading: [Int64] = []
        var epochs: [UInt16: Int64] = [:]
        for (slot, result) in results.sorted(by: { $0.key < $1.key }) {
            // (An unload already in flight finishes the repair: a second listing, from a second
            // failover signal, would unload again while the slot may be served.)
            guard case .repairing(let epoch) = slotState(slot), let repair = repairs[slot], repair.unloading.isEmpty else { continue }
            switch result {
            case .failure:
                repairs[slot]?.retryAt = now + Self.repairRetryDelay
            case .success(let posts) where posts.isEmpty:
                finishRepair(slot, now: now, into: &actions)
            case .success(let posts):
                repairs[slot]?.unloading = posts
                unloading += posts
                epochs[slot] = epoch
            }
        }
        guard !unloading.isEmpty else { return }
        cancelLargeLoads(of: unloading)
        actions.append(.unloadPosts(unloading, epochs: isFenced ? epochs : nil, .repaired(Set(epochs.keys))))
    }

    /// The posts of repairing `slots` are unloaded (those in `failed` not yet: their slots try
    /// again).
    mutating func repairUnloaded(_ slots: Set<UInt16>, failed: Set<Int64>, now: ContinuousClock.Instant, into actions: inout [Action]) {
        for slot in slots.sorted() {
            guard case .repairing = slotState(slot), let repair = repairs[slot] else { continue }
            let gone = repair.unloading.filter { !failed.contains($0) }
            hotPosts.forget(gone)
            repairs[slot]?.dropped += gone.count
            repairs[slot]?.unloading = []
            if gone.count == repair.unloading.count {
                finishRepair(slot, now: now, into: &actions)
            } else {
                repairs[slot]?.retryAt = now + Self.repairRetryDelay
            }
        }
    }

    /// Repair steps whose retry is due.
    mutating func retryRepairs(now: ContinuousClock.Instant, into actions: inout [Action]) {
        var due: [UInt16] = []
        for (slot, repair) in repairs.sorted(by: { $0.key < $1.key }) {
            guard let at = repair.retryAt, at <= now else { continue }
            repairs[slot]?.retryAt = nil
            if case .repairing = slotState(slot) { due.append(slot) } else { repairs[slot] = nil }
        }
        if !due.isEmpty { actions.append(.listSlotPosts(due)) }
    }

    /// The earliest retry of a repair step, for the ticker.
    var nextRepairRetry: ContinuousClock.Instant? {
        repairs.values.compactMap(\.retryAt).min()
    }

    private mutating func finishRepair(_ slot: UInt16, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard let repair = repairs.removeValue(forKey: slot) else { return }
        move(slot, .hotSetDropped, now: now, into: &actions)
        repairsDone.slots += 1
        repairsDone.dropped += repair.dropped
        repairsDone.lost += repair.lost
        repairsDone.slowest = max(repairsDone.slowest, now - repair.startedAt)
        guard repairs.isEmpty else { return }
        // One line per shard and failover, not one per slot.
        var fields: [(key: String, value: String)] = [
            ("shard", String(index)), ("slots", String(repairsDone.slots)), ("posts_dropped", String(repairsDone.dropped)),
            ("lost_changes", String(repairsDone.lost)), ("seconds", String(format: "%.3f", repairsDone.slowest.inSeconds)),
        ]
        if !repairsDone.sample.isEmpty { fields.append(("lost_sample", repairsDone.sample.joined(separator: ", "))) }
        actions.append(.log(ShardLogLine(repairsDone.lost > 0 ? .error : .info, "failover_repaired", fields)))
        repairsDone = RepairTotals()
    }
}

/// One slot's repair under way.
struct SlotRepair: Sendable {
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
struct RepairTotals: Sendable {
    var slots = 0
    var dropped = 0
    var lost = 0
    var slowest: Duration = .zero
    /// A few of the changes found lost, for the log.
    var sample: [String] = []
}
