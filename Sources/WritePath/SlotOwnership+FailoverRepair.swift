import CounterCore
import Persistence
import RedisDriver

/// A shard's self-repair after a Redis failover (the steps `SlotOwnership`'s comment lists):
/// a failover signal starts the repair of the slots served here, or is remembered for a later
/// claim; the slot's posts are listed, unloaded fenced by its epoch, and the slot is served
/// again. The repairs' books are `SlotRepairs`; every move of a slot goes through
/// `SlotOwnership.move`, as every other move does.
extension SlotOwnership {

    /// `slots`' master failed over: those served here are repaired — once the batch in flight
    /// has ended, since it read what it decides on before the failover and writes after it; a
    /// slot being drained for a claim is repaired instead of served; one not served here (not
    /// owned, claimed but not drained, being handed off) is remembered, so that a claim of it
    /// repairs it first: its new owner's topology may have seen the failover before it owned it.
    mutating func redisFailedOver(
        _ slots: [UInt16], batchInFlight: Bool, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        let mine = slots.filter(owns)
        if batchInFlight {
            failoversAfterBatch.formUnion(mine)
            return []
        }
        var effects: [Effect] = []
        var started = 0
        for slot in mine {
            switch state(of: slot) {
            case .serving, .repairing, .draining:
                let (didStart, moved) = startRepair(slot, now: now, into: &actions)
                effects += moved
                if didStart { started += 1 }
            default:
                recentFailovers[slot] = now
            }
        }
        if started > 0 {
            actions.append(.log(ShardLogLine(.warn, "failover_repair_started", [("shard", String(shard)), ("slots", String(started))])))
        }
        return effects
    }

    /// Moves `slot` to `repairing`; whether this started a repair (rather than joined one).
    mutating func startRepair(
        _ slot: UInt16, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> (started: Bool, effects: [Effect]) {
        // The table moves the slot (and drains its log) first: a move out of `repairing` clears
        // the repair's record, so it is made after.
        let effects = move(slot, .failedOver, now: now, into: &actions)
        guard case .repairing = state(of: slot) else { return (false, effects) }
        recentFailovers[slot] = nil
        return (repairs.start(slot, now: now), effects)
    }

    /// A claim's drain begins: a slot whose master failed over while it was not served here
    /// (within `failoverMemory`) is repaired before it is served.
    mutating func repairIfFailedOverBefore(
        _ slot: UInt16, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        guard let at = recentFailovers.removeValue(forKey: slot), now - at < Self.failoverMemory else { return [] }
        let (started, effects) = startRepair(slot, now: now, into: &actions)
        if started {
            actions.append(.log(ShardLogLine(.warn, "failover_repair_started", [("shard", String(shard)), ("slots", "1"), ("on_claim", "true")])))
        }
        return effects
    }

    /// The write-behind found these acknowledged changes lost from a repairing slot's log.
    mutating func lostInRepair(_ slot: UInt16, _ lost: [PendingLike]) {
        // (Counted by the write-behind either way; a repair that ended meanwhile logs nothing more.)
        repairs.noteLost(lost, in: slot)
    }

    /// The posts Redis holds of repairing slots: dropped, all in one pipeline; a slot with none
    /// left is served again.
    mutating func slotPostsListed(
        _ results: [UInt16: Result<[Int64], RedisError>], now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        var effects: [Effect] = []
        var unloading: [Int64] = []
        var epochs: [UInt16: Int64] = [:]
        for (slot, result) in results.sorted(by: { $0.key < $1.key }) {
            // (An unload already in flight finishes the repair: a second listing, from a second
            // failover signal, would unload again while the slot may be served. A slot whose
            // repair ended meanwhile is served, or gone.)
            guard case .repairing(let epoch) = state(of: slot), let repair = repairs[slot], repair.unloading.isEmpty else { continue }
            switch result {
            case .failure:
                repairs.retry(slot, at: now + Self.repairRetryDelay)
            case .success(let posts) where posts.isEmpty:
                effects += finishRepair(slot, now: now, into: &actions)
            case .success(let posts):
                repairs.unloading(posts, in: slot)
                unloading += posts
                epochs[slot] = epoch
            }
        }
        guard !unloading.isEmpty else { return effects }
        actions.append(.unloadPosts(unloading, epochs: isFenced ? epochs : nil, .repaired(Set(epochs.keys))))
        return effects + [.cancelPromotions(unloading)]
    }

    /// The posts of repairing `slots` are unloaded (those in `failed` not yet: their slots try
    /// again).
    mutating func repairUnloaded(
        _ slots: Set<UInt16>, failed: Set<Int64>, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        var effects: [Effect] = []
        for slot in slots.sorted() {
            guard case .repairing = state(of: slot), let repair = repairs[slot] else { continue }
            let gone = repair.unloading.filter { !failed.contains($0) }
            effects.append(.postsDropped(gone))
            repairs.unloaded(dropping: gone.count, in: slot)
            if gone.count == repair.unloading.count {
                effects += finishRepair(slot, now: now, into: &actions)
            } else {
                repairs.retry(slot, at: now + Self.repairRetryDelay)
            }
        }
        return effects
    }

    /// Repair steps whose retry is due (the `repairRetry` timer).
    mutating func retryRepairs(now: ContinuousClock.Instant, into actions: inout [ShardStateMachine.Action]) {
        var due: [UInt16] = []
        for slot in repairs.takeDueRetries(now: now) {
            if case .repairing = state(of: slot) { due.append(slot) } else { repairs.end(slot) }
        }
        if !due.isEmpty { actions.append(.listSlotPosts(due)) }
    }

    mutating func finishRepair(_ slot: UInt16, now: ContinuousClock.Instant, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        guard repairs.isUnderWay(slot) else { return [] }
        let logLine = repairs.finish(slot, now: now, shard: shard)
        let effects = move(slot, .hotSetDropped, now: now, into: &actions)
        if let logLine { actions.append(.log(logLine)) }
        return effects
    }
}
