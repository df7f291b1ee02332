import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// Slots changing owner: claims (raise the epoch key, drain the log, serve), hand-offs (hold,
/// let the batch end, flush, change owner, fence out), refusals (fenced, dropped). Every move
/// goes through `SlotLifecycle`'s table (`move`); this part performs the effects and tells the
/// callers waiting for a claim or a release.
extension ShardStateMachine {
    // MARK: - The one mover

    /// Moves `slot` as `SlotLifecycle` says for `event` — or not at all, when the table refuses
    /// the pair — and performs the move's effects.
    mutating func move(_ slot: UInt16, _ event: SlotLifecycle.Event, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard owns(slot) else { return }
        let from = slotState(slot)
        guard let transition = SlotLifecycle.transition(from: from, on: event) else { return }
        if transition.to != from {
            // A repair ends with the slot served again, or with the slot gone elsewhere.
            if case .repairing = from { repairs[slot] = nil }
            slots[Int(slot) - slotRange.lowerBound] = transition.to
            changedSlots.insert(slot)
            if case .quiescing = transition.to { quiescingSlots.insert(slot) } else { quiescingSlots.remove(slot) }
            if transition.to.batchEpoch != nil, from.batchEpoch == nil { deadLetterPins.slotGained(at: now) }
        }
        for effect in transition.effects {
            switch effect {
            case .raiseEpochKey(let epoch):
                if case .claim = event { pendingClaimRaises[slot] = epoch } else { pendingHandOffRaises[slot] = epoch }
            case .drainLog:
                // One drain at a time per slot: a second (a failover while a claim's drain or a
                // repair's runs) would move the slot on twice.
                guard !slotsDraining.contains(slot) else { continue }
                slotsDraining.insert(slot)
                wake(scheduler.uncertain([slot]))
                afterRescan.append(.drain(slot: slot, epoch: transition.to.epoch ?? 0))
            case .flushLog:
                let epoch = transition.to.epoch ?? 0
                addWaiter(marks: scheduler.unflushedMarks.filter { $0.key == slot }, .handOffFlush(slot: slot, epoch: epoch), now: now,
                          into: &actions)
            case .forgetBacklog:
                forgetBacklog(of: slot, now: now, into: &actions)
            case .admitParked:
                admitParked(slot)
            case .refuseParked:
                refuseParked(slot, into: &actions)
            case .readyToHandOver:
                break
            case .dropHotSet:
                // The slots one flush drained are listed together, in one pipeline.
                if case .listSlotPosts(let listed)? = actions.last {
                    actions[actions.count - 1] = .listSlotPosts(listed + [slot])
                } else {
                    actions.append(.listSlotPosts([slot]))
                }
            }
        }
        if case .notOwned = transition.to { slotsDraining.remove(slot) }
        // A claim's drain begins: repaired instead, if its master failed over before.
        if case .draining = transition.to, !recentFailovers.isEmpty { repairIfFailedOverBefore(slot, now: now, into: &actions) }
        settleClaims(slot, into: &actions)
        settleReleases(slot, into: &actions)
    }

    /// Forgets what the books hold of `slot` (another node drains its log): callers waiting for
    /// its entries are told the outcome is not known here.
    private mutating func forgetBacklog(of slot: UInt16, now: ContinuousClock.Instant, into actions: inout [Action]) {
        for id in scheduler.forget([slot]) { failWaiter(id, with: Self.moved, now: now, into: &actions) }
        pendingLikes.forget(slot: slot)
        slotsDraining.remove(slot)
        afterRescan.removeAll { item in
            if case .drain(let drained, _) = item { return drained == slot }
            return false
        }
    }

    static let moved = CounterError(
        code: .unavailable,
        message: "the post's slot moved to another node before the change reached PostgreSQL; the change is in the slot's log, which the new owner applies",
        retryAfterSeconds: 1)

    // MARK: - Claims

    /// Slots won under `epochs`: each raises its epoch key, drains its log and is served; the
    /// caller hears which are served once every one has settled.
    mutating func claim(_ epochs: [UInt16: Int64], reply: ShardReply<Result<Set<UInt16>, Error>>, now: ContinuousClock.Instant,
                        into actions: inout [Action]) {
        let mine = epochs.filter { owns($0.key) }
        claims.append(ClaimRecord(waitingFor: Set(mine.keys), epochs: mine, reply: reply))
        for (slot, epoch) in mine.sorted(by: { $0.key < $1.key }) {
            move(slot, .claim(epoch: epoch), now: now, into: &actions)
        }
        // Slots the table would not claim (handed off meanwhile) are settled by `move`'s
        // bookkeeping; a claim of nothing answers at once.
        completeClaims(into: &actions)
    }

    /// What the epoch keys hold after a claim's raise.
    mutating func epochKeysRaised(_ results: [UInt16: Result<Int64, RedisError>], now: ContinuousClock.Instant, into actions: inout [Action]) {
        for (slot, result) in results.sorted(by: { $0.key < $1.key }) {
            switch result {
            case .success(let held):
                move(slot, .keyHeld(held), now: now, into: &actions)
            case .failure(let error):
                recordClaimFailure(slot, error)
                move(slot, .keyFailed, now: now, into: &actions)
            }
        }
    }

    /// A drain failed (its log could not be read): the claim fails, the slot is let go.
    mutating func drainFailed(_ slot: UInt16, epoch: Int64, error: Error, now: ContinuousClock.Instant, into actions: inout [Action]) {
        slotsDraining.remove(slot)
        if slotState(slot) == .repairing(epoch: epoch) {
            // A repair's drain is tried again (after the flusher's back-off).
            move(slot, .drainFailed, now: now, into: &actions)
            return
        }
        guard slotState(slot) == .draining(epoch: epoch) else { return }
        recordClaimFailure(slot, error)
        move(slot, .drainFailed, now: now, into: &actions)
    }

    private mutating func recordClaimFailure(_ slot: UInt16, _ error: Error) {
        for index in claims.indices where claims[index].waitingFor.contains(slot) && claims[index].failure == nil {
            claims[index].failure = error
        }
    }

    /// A claim stops waiting for `slot` once it is served under the claim's epoch, or is no
    /// longer on its way to that.
    private mutating func settleClaims(_ slot: UInt16, into actions: inout [Action]) {
        guard !claims.isEmpty else { return }
        let state = slotState(slot)
        for index in claims.indices where claims[index].waitingFor.contains(slot) {
            let epoch = claims[index].epochs[slot]
            switch state {
            case .claiming(let held) where held == epoch, .draining(let held) where held == epoch,
                 .repairing(let held) where held == epoch:
                continue
            case .serving(let held) where held == epoch:
                claims[index].served.insert(slot)
                claims[index].waitingFor.remove(slot)
            default:
                claims[index].waitingFor.remove(slot)
            }
        }
        completeClaims(into: &actions)
    }

    private mutating func completeClaims(into actions: inout [Action]) {
        claims.removeAll { record in
            guard record.waitingFor.isEmpty else { return false }
            actions.append(.reply(record.reply.with(record.failure.map { .failure($0) } ?? .success(record.served))))
            return true
        }
    }

    // MARK: - Hand-offs

    /// Served `slots` are handed off: new operations on them wait, the batch in flight ends,
    /// what was written is flushed; then the caller changes the owner in PostgreSQL.
    mutating func release(_ slots: Set<UInt16>, reply: ShardReply<Result<Void, Error>>, now: ContinuousClock.Instant,
                          into actions: inout [Action]) {
        let mine = slots.filter(owns)
        var epochs: [UInt16: Int64] = [:]
        for slot in mine.sorted() {
            guard case .serving(let epoch) = slotState(slot) else { continue }
            epochs[slot] = epoch
            move(slot, .release, now: now, into: &actions)
        }
        releases.append(ReleaseRecord(waitingFor: Set(epochs.keys), epochs: epochs, reply: reply))
        if batch == nil {
            for slot in epochs.keys.sorted() { move(slot, .batchEnded, now: now, into: &actions) }
        }
        completeReleases(into: &actions)
    }

    /// A release stops waiting for `slot` once it is ready to change owner — or fails when the
    /// hand-off was interrupted (fenced, dropped, resumed).
    private mutating func settleReleases(_ slot: UInt16, into actions: inout [Action]) {
        guard !releases.isEmpty else { return }
        let state = slotState(slot)
        for index in releases.indices where releases[index].waitingFor.contains(slot) {
            let epoch = releases[index].epochs[slot]
            switch state {
            case .quiescing(let held) where held == epoch, .flushing(let held) where held == epoch:
                continue
            case .handingOver(let held) where held == epoch:
                releases[index].waitingFor.remove(slot)
            default:
                releases[index].waitingFor.remove(slot)
                if releases[index].failure == nil {
                    releases[index].failure = CounterError(code: .unavailable,
                                                           message: "the hand-off of slot \(slot) was interrupted before its log was flushed",
                                                           retryAfterSeconds: 1)
                }
            }
        }
        completeReleases(into: &actions)
    }

    private mutating func completeReleases(into actions: inout [Action]) {
        releases.removeAll { record in
            guard record.waitingFor.isEmpty else { return false }
            actions.append(.reply(record.reply.with(record.failure.map { .failure($0) } ?? .success(()))))
            return true
        }
    }

    /// The owners changed in PostgreSQL: the slots' epoch keys rise to the new epochs (this
    /// node's writes are refused from then on, whatever it still has in flight) and the slots
    /// are dropped, with `alsoDropping`. The caller hears once the keys are raised.
    mutating func handedOff(_ epochs: [UInt16: Int64], alsoDropping: Set<UInt16>, reply: ShardReply<Void>,
                            now: ContinuousClock.Instant, into actions: inout [Action]) {
        for (slot, epoch) in epochs.sorted(by: { $0.key < $1.key }) where owns(slot) {
            if SlotLifecycle.transition(from: slotState(slot), on: .handedOff(newEpoch: epoch)) != nil {
                move(slot, .handedOff(newEpoch: epoch), now: now, into: &actions)
            } else {
                move(slot, .drop, now: now, into: &actions)
            }
        }
        for slot in alsoDropping.sorted() where owns(slot) { move(slot, .drop, now: now, into: &actions) }
        if pendingHandOffRaises.isEmpty {
            actions.append(.reply(reply.with(())))
        } else {
            actions.append(.raiseEpochKeys(pendingHandOffRaises, forClaim: false, then: reply.with(())))
            pendingHandOffRaises = [:]
        }
    }

    /// Sends the epoch-key raises the claims just asked for.
    mutating func sendClaimRaises(into actions: inout [Action]) {
        guard !pendingClaimRaises.isEmpty else { return }
        actions.append(.raiseEpochKeys(pendingClaimRaises, forClaim: true, then: nil))
        pendingClaimRaises = [:]
    }

    // MARK: - Refusals

    /// Redis or PostgreSQL refused writes made under these epochs: the slots are another
    /// node's now (unless the epoch is no longer the one held).
    mutating func slotsFenced(_ fenced: [FencedSlot], now: ContinuousClock.Instant, into actions: inout [Action],
                              why: String? = nil) {
        for refusal in fenced where owns(refusal.slot) && slotState(refusal.slot).epoch == refusal.epoch {
            actions.append(.log(ShardLogLine(.warn, "slot_fenced", [
                ("slot", String(refusal.slot)), ("epoch", String(refusal.epoch)),
                ("error", why ?? "Redis holds a newer epoch for the slot; nothing was written"),
            ])))
            move(refusal.slot, .fenced(epoch: refusal.epoch), now: now, into: &actions)
        }
    }
}
