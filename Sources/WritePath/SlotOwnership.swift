import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// A shard's slots as a state machine of its own: each slot's state, moved only by
/// `SlotLifecycle`'s table (`move`), the claims (raise the epoch key, drain the log, serve) and
/// hand-offs (hold, let the batch end, flush, change owner, fence out) under way with the callers
/// waiting for them, refusals (fenced, dropped), and the self-repair of slots whose Redis master
/// failed over.
///
/// Its state is private: the shard's router (`ShardStateMachine`) calls the methods below, which
/// are its events; they ask the shell for I/O with the shard's `Action`s (epoch keys, the posts of
/// a repaired slot) and tell the router what concerns the other machines as `Effect`s — a log to
/// drain or flush, a backlog to forget, parked operations to admit or refuse.
///
/// Self-repair after a Redis failover: when a slot's master dies and its replica takes its place
/// (`RedisTopology.onFailover`), whatever the master acknowledged and had not replicated is gone
/// from Redis: likers sets and counts behind PostgreSQL (where the flusher had applied it), log
/// entries the flusher never saw (acknowledged and lost everywhere). Each such slot this shard
/// serves is repaired, with no operator step (`SlotLifecycle`'s `repairing` state):
///
/// 1. its operations wait, and its log is read again and drained to PostgreSQL, so PostgreSQL
///    has everything that survived; the changes the lists' index holds that the log no longer
///    does are the ones the failover lost: counted (`failover_lost_changes`) and logged, not
///    hidden;
/// 2. every post Redis holds of the slot is dropped (listed with `CLUSTER GETKEYSINSLOT`,
///    unloaded fenced by the slot's epoch): its next read or write loads it from PostgreSQL;
/// 3. the slot is served again, its waiting operations first.
struct SlotOwnership {
    /// What a move of a slot asks of the shard's other machines.
    enum Effect {
        /// Read the slot's log again and flush what it holds, then `drained` (or `drainFailed`).
        case drainLog(slot: UInt16, epoch: Int64)
        /// Flush what was written for the slot (a hand-off's flush), then `handOffFlushed`.
        case flushLog(slot: UInt16, epoch: Int64)
        /// Forget what the write-behind knew of the slot's log: another node drains it.
        case forgetBacklog(slot: UInt16)
        /// Operations parked on the slot go to the next batch.
        case admitParked(slot: UInt16)
        /// Operations parked on the slot are refused (`notOwner`: the owner decides them).
        case refuseParked(slot: UInt16)
        /// The shard began serving a slot: letters of its posts written elsewhere are known only
        /// from the next read of the dead-letter stream.
        case slotGained
        /// These posts leave Redis for a repair: their promotions are not published.
        case cancelPromotions([Int64])
        /// These posts left Redis for a repair: they are cold now.
        case postsDropped([Int64])
        /// A replica serves a failed master's slots now: flushes that failed on the master need
        /// not wait out their back-off (the repair's drain is a flush).
        case failureResolved
    }

    /// A claim under way.
    private struct ClaimRecord {
        var waitingFor: Set<UInt16>
        let epochs: [UInt16: Int64]
        var served: Set<UInt16> = []
        var failure: Error?
        let reply: ShardReply<Result<Set<UInt16>, Error>>
    }

    /// A release under way.
    private struct ReleaseRecord {
        var waitingFor: Set<UInt16>
        let epochs: [UInt16: Int64]
        var failure: Error?
        let reply: ShardReply<Result<Void, Error>>
    }

    // MARK: - State

    let shard: Int
    /// The slots this shard owns.
    let slotRange: Range<Int>
    /// Whether writes carry epochs (`false` for a sole writer: every slot served under 0).
    let isFenced: Bool
    /// Each slot's ownership, by slot number minus `slotRange.lowerBound`.
    private var slots: [SlotLifecycle.State]
    /// Slots whose state changed since the shell last took them (`takeChangedSlots()`).
    private var changedSlots: Set<UInt16> = []
    /// The slots waiting for the batch in flight to end before their hand-off's flush.
    private var quiescingSlots: Set<UInt16> = []
    /// Claims and hand-offs under way, with the callers waiting for them.
    private var claims: [ClaimRecord] = []
    private var releases: [ReleaseRecord] = []
    /// Epoch keys to raise, gathered while slots move in one event.
    private var pendingClaimRaises: [UInt16: Int64] = [:]
    private var pendingHandOffRaises: [UInt16: Int64] = [:]
    /// Slots whose log a drain is reading or waiting on (a claim's or a repair's): one at a time.
    private var slotsDraining: Set<UInt16> = []
    /// The repairs under way after a Redis failover, and those finished since last logged. This
    /// and the two failover sets below are the repair's state, kept by `SlotOwnership+FailoverRepair`.
    var repairs = SlotRepairs()
    /// Slots whose master failed over while a batch was in flight: repaired once it ends, so that
    /// nothing it reads before the repair is written after it.
    var failoversAfterBatch: Set<UInt16> = []
    /// Slots whose master failed over while they were not served here, with when: a claim of one
    /// within `failoverMemory` repairs it before serving it.
    var recentFailovers: [UInt16: ContinuousClock.Instant] = [:]
    /// Slots repaired since the shard started.
    var failoverRepairs: Int { repairs.started }

    /// How soon a repair step that failed (Redis not answering) is tried again.
    static let repairRetryDelay: Duration = .milliseconds(500)

    /// How long a failover is remembered for a slot not served here when it happened: a claim
    /// of the slot within that time repairs it before serving it.
    static let failoverMemory: Duration = .seconds(600)

    /// A sole writer (`isFenced == false`) serves every slot under epoch 0 from the start, a node
    /// of a cluster none until it claims them.
    init(shard: Int, slotRange: Range<Int>, isFenced: Bool) {
        self.shard = shard
        self.slotRange = slotRange
        self.isFenced = isFenced
        self.slots = Array(repeating: isFenced ? .notOwned : .serving(epoch: 0), count: slotRange.count)
    }

    // MARK: - Slots as the rest of the shard reads them

    /// Whether `slot` is one of this shard's.
    func owns(_ slot: UInt16) -> Bool {
        slotRange.contains(Int(slot))
    }

    /// `slot`'s state (`notOwned` for another shard's).
    func state(of slot: UInt16) -> SlotLifecycle.State {
        owns(slot) ? slots[Int(slot) - slotRange.lowerBound] : .notOwned
    }

    /// The epoch `slot`'s log is flushed under, or `nil` when it is not flushed here.
    func flushEpoch(of slot: UInt16) -> Int64? {
        state(of: slot).flushEpoch
    }

    /// Whether `slot` is being repaired after its Redis master failed over.
    func isRepairing(_ slot: UInt16) -> Bool {
        repairs.isUnderWay(slot)
    }

    /// Every slot's state, with its number, in order.
    var states: some Sequence<(slot: UInt16, state: SlotLifecycle.State)> {
        slots.enumerated().lazy.map { (UInt16(slotRange.lowerBound + $0.offset), $0.element) }
    }

    /// The epoch a write between batches (resetting keys) carries for `slot`, or `nil` when
    /// this node may not write it; `0` for a sole writer.
    func writeEpoch(_ slot: UInt16) -> Int64? {
        switch state(of: slot) {
        case .serving(let epoch), .quiescing(let epoch), .flushing(let epoch), .handingOver(let epoch), .repairing(let epoch): return epoch
        case .notOwned, .claiming, .draining: return nil
        }
    }

    /// The epochs `posts`' slots are written under now, for a write between batches; `nil` for
    /// a sole writer (unfenced). Posts whose slot may not be written are left out.
    func writeEpochs(of posts: [Int64]) -> [UInt16: Int64]? {
        guard isFenced else { return nil }
        var epochs: [UInt16: Int64] = [:]
        for post in posts {
            let slot = HashSlot(post: post).rawValue
            if let epoch = writeEpoch(slot) { epochs[slot] = epoch }
        }
        return epochs
    }

    /// The earliest retry of a repair step (the `repairRetry` timer).
    var nextRepairRetry: ContinuousClock.Instant? {
        repairs.nextRetry
    }

    /// The slots whose state changed since the last call, with their states now.
    mutating func takeChangedSlots() -> [(slot: UInt16, state: SlotLifecycle.State)] {
        guard !changedSlots.isEmpty else { return [] }
        defer { changedSlots = [] }
        return changedSlots.sorted().map { ($0, state(of: $0)) }
    }

    // MARK: - The one mover

    /// Moves `slot` as `SlotLifecycle` says for `event` — or not at all, when the table refuses
    /// the pair — and says what the move asks of the rest of the shard.
    mutating func move(
        _ slot: UInt16, _ event: SlotLifecycle.Event, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        guard owns(slot) else { return [] }
        let from = state(of: slot)
        guard let transition = SlotLifecycle.transition(from: from, on: event) else { return [] }
        var effects: [Effect] = []
        if transition.to != from {
            // A repair ends with the slot served again, or with the slot gone elsewhere.
            if case .repairing = from { repairs.end(slot) }
            slots[Int(slot) - slotRange.lowerBound] = transition.to
            changedSlots.insert(slot)
            if case .quiescing = transition.to { quiescingSlots.insert(slot) } else { quiescingSlots.remove(slot) }
            if transition.to.batchEpoch != nil, from.batchEpoch == nil { effects.append(.slotGained) }
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
                effects.append(.drainLog(slot: slot, epoch: transition.to.epoch ?? 0))
            case .flushLog:
                effects.append(.flushLog(slot: slot, epoch: transition.to.epoch ?? 0))
            case .forgetBacklog:
                slotsDraining.remove(slot)
                effects.append(.forgetBacklog(slot: slot))
            case .admitParked:
                effects.append(.admitParked(slot: slot))
            case .refuseParked:
                effects.append(.refuseParked(slot: slot))
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
        if case .draining = transition.to, !recentFailovers.isEmpty { effects += repairIfFailedOverBefore(slot, now: now, into: &actions) }
        settleClaims(slot, into: &actions)
        settleReleases(slot, into: &actions)
        return effects
    }

    // MARK: - Claims

    /// Slots won under `epochs`: each raises its epoch key, drains its log and is served; the
    /// caller hears which are served once every one has settled.
    mutating func claim(
        _ epochs: [UInt16: Int64], reply: ShardReply<Result<Set<UInt16>, Error>>, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        let mine = epochs.filter { owns($0.key) }
        claims.append(ClaimRecord(waitingFor: Set(mine.keys), epochs: mine, reply: reply))
        var effects: [Effect] = []
        for (slot, epoch) in mine.sorted(by: { $0.key < $1.key }) {
            effects += move(slot, .claim(epoch: epoch), now: now, into: &actions)
        }
        // Slots the table would not claim (handed off meanwhile) are settled by `move`'s
        // bookkeeping; a claim of nothing answers at once.
        completeClaims(into: &actions)
        return effects
    }

    /// What the epoch keys hold after a claim's raise.
    mutating func epochKeysRaised(
        _ results: [UInt16: Result<Int64, RedisError>], now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        var effects: [Effect] = []
        for (slot, result) in results.sorted(by: { $0.key < $1.key }) {
            switch result {
            case .success(let held):
                effects += move(slot, .keyHeld(held), now: now, into: &actions)
            case .failure(let error):
                recordClaimFailure(slot, error)
                effects += move(slot, .keyFailed, now: now, into: &actions)
            }
        }
        return effects
    }

    /// A drain ended: everything `slot`'s log held when it began is in PostgreSQL.
    mutating func drained(
        _ slot: UInt16, epoch: Int64, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        slotsDraining.remove(slot)
        let state = state(of: slot)
        // A slot that moved on meanwhile (claimed again, fenced, dropped) is not this drain's.
        guard state == .draining(epoch: epoch) || state == .repairing(epoch: epoch) else { return [] }
        return move(slot, .drained, now: now, into: &actions)
    }

    /// A drain failed (its log could not be read, or the shard stopped): a claim fails and the
    /// slot is let go; a repair's drain is tried again (after the flusher's back-off).
    mutating func drainFailed(
        _ slot: UInt16, epoch: Int64, error: Error, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        slotsDraining.remove(slot)
        if state(of: slot) == .repairing(epoch: epoch) { return move(slot, .drainFailed, now: now, into: &actions) }
        // A slot that moved on meanwhile is not this drain's.
        guard state(of: slot) == .draining(epoch: epoch) else { return [] }
        recordClaimFailure(slot, error)
        return move(slot, .drainFailed, now: now, into: &actions)
    }

    private mutating func recordClaimFailure(_ slot: UInt16, _ error: Error) {
        for index in claims.indices where claims[index].waitingFor.contains(slot) && claims[index].failure == nil {
            claims[index].failure = error
        }
    }

    /// A claim stops waiting for `slot` once it is served under the claim's epoch, or is no
    /// longer on its way to that.
    private mutating func settleClaims(_ slot: UInt16, into actions: inout [ShardStateMachine.Action]) {
        guard !claims.isEmpty else { return }
        let state = state(of: slot)
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

    private mutating func completeClaims(into actions: inout [ShardStateMachine.Action]) {
        claims.removeAll { record in
            guard record.waitingFor.isEmpty else { return false }
            actions.append(.reply(record.reply.with(record.failure.map { .failure($0) } ?? .success(record.served))))
            return true
        }
    }

    /// Sends the epoch-key raises the claims just asked for (after every event).
    mutating func sendClaimRaises(into actions: inout [ShardStateMachine.Action]) {
        guard !pendingClaimRaises.isEmpty else { return }
        actions.append(.raiseEpochKeys(pendingClaimRaises, forClaim: true, then: nil))
        pendingClaimRaises = [:]
    }

    // MARK: - Hand-offs

    /// Served `slots` are handed off: new operations on them wait, the batch in flight ends
    /// (`batchEnded`), what was written is flushed; then the caller changes the owner in
    /// PostgreSQL.
    mutating func release(
        _ slots: Set<UInt16>, reply: ShardReply<Result<Void, Error>>, batchInFlight: Bool, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        var effects: [Effect] = []
        var epochs: [UInt16: Int64] = [:]
        for slot in slots.filter(owns).sorted() {
            guard case .serving(let epoch) = state(of: slot) else { continue }
            epochs[slot] = epoch
            effects += move(slot, .release, now: now, into: &actions)
        }
        releases.append(ReleaseRecord(waitingFor: Set(epochs.keys), epochs: epochs, reply: reply))
        if !batchInFlight {
            for slot in epochs.keys.sorted() { effects += move(slot, .batchEnded, now: now, into: &actions) }
        }
        completeReleases(into: &actions)
        return effects
    }

    /// What a slot being handed off wrote is in PostgreSQL: it is ready to change owner.
    mutating func handOffFlushed(
        _ slot: UInt16, epoch: Int64, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        // A hand-off interrupted meanwhile (resumed, fenced, dropped) has nothing left to flush for.
        guard state(of: slot) == .flushing(epoch: epoch) else { return [] }
        return move(slot, .flushed, now: now, into: &actions)
    }

    /// Serve again slots whose hand-off failed.
    mutating func resume(_ slots: Set<UInt16>, now: ContinuousClock.Instant, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        var effects: [Effect] = []
        for slot in slots.sorted() where owns(slot) { effects += move(slot, .resume, now: now, into: &actions) }
        return effects
    }

    /// A release stops waiting for `slot` once it is ready to change owner — or fails when the
    /// hand-off was interrupted (fenced, dropped, resumed).
    private mutating func settleReleases(_ slot: UInt16, into actions: inout [ShardStateMachine.Action]) {
        guard !releases.isEmpty else { return }
        let state = state(of: slot)
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
                    releases[index].failure = CounterError(
                        code: .unavailable, message: "the hand-off of slot \(slot) was interrupted before its log was flushed",
                        retryAfterSeconds: 1)
                }
            }
        }
        completeReleases(into: &actions)
    }

    private mutating func completeReleases(into actions: inout [ShardStateMachine.Action]) {
        releases.removeAll { record in
            guard record.waitingFor.isEmpty else { return false }
            actions.append(.reply(record.reply.with(record.failure.map { .failure($0) } ?? .success(()))))
            return true
        }
    }

    /// The owners changed in PostgreSQL: the slots' epoch keys rise to the new epochs (this
    /// node's writes are refused from then on, whatever it still has in flight) and the slots
    /// are dropped, with `alsoDropping`. The caller hears once the keys are raised.
    mutating func handedOff(
        _ epochs: [UInt16: Int64], alsoDropping: Set<UInt16>, reply: ShardReply<Void>,
        now: ContinuousClock.Instant, into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        var effects: [Effect] = []
        for (slot, epoch) in epochs.sorted(by: { $0.key < $1.key }) where owns(slot) {
            if SlotLifecycle.transition(from: state(of: slot), on: .handedOff(newEpoch: epoch)) != nil {
                effects += move(slot, .handedOff(newEpoch: epoch), now: now, into: &actions)
            } else {
                effects += move(slot, .drop, now: now, into: &actions)
            }
        }
        for slot in alsoDropping.sorted() where owns(slot) { effects += move(slot, .drop, now: now, into: &actions) }
        if pendingHandOffRaises.isEmpty {
            actions.append(.reply(reply.with(())))
        } else {
            actions.append(.raiseEpochKeys(pendingHandOffRaises, forClaim: false, then: reply.with(())))
            pendingHandOffRaises = [:]
        }
        return effects
    }

    /// The batch in flight has ended: slots being handed off flush now, and slots whose master
    /// failed over meanwhile are repaired.
    mutating func batchEnded(now: ContinuousClock.Instant, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        var effects: [Effect] = []
        if !quiescingSlots.isEmpty {
            for slot in quiescingSlots.sorted() { effects += move(slot, .batchEnded, now: now, into: &actions) }
        }
        if !failoversAfterBatch.isEmpty {
            let slots = failoversAfterBatch.sorted()
            failoversAfterBatch = []
            effects.append(.failureResolved)
            effects += redisFailedOver(slots, batchInFlight: false, now: now, into: &actions)
        }
        return effects
    }

    // MARK: - Refusals

    /// Stop deciding for these slots (another node owns them).
    mutating func drop(_ slots: Set<UInt16>, now: ContinuousClock.Instant, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        var effects: [Effect] = []
        for slot in slots.sorted() where owns(slot) { effects += move(slot, .drop, now: now, into: &actions) }
        return effects
    }

    /// Redis or PostgreSQL refused writes made under these epochs: the slots are another
    /// node's now (unless the epoch is no longer the one held).
    mutating func fenced(
        _ fenced: [ShardStateMachine.FencedSlot], why: String?, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        var effects: [Effect] = []
        for refusal in fenced where owns(refusal.slot) && state(of: refusal.slot).epoch == refusal.epoch {
            actions.append(
                .log(
                    ShardLogLine(
                        .warn, "slot_fenced",
                        [
                            ("slot", String(refusal.slot)), ("epoch", String(refusal.epoch)),
                            ("error", why ?? "Redis holds a newer epoch for the slot; nothing was written"),
                        ])))
            effects += move(refusal.slot, .fenced(epoch: refusal.epoch), now: now, into: &actions)
        }
        return effects
    }

    // MARK: - The end

    /// The shard's loop ends: callers of claims and releases still waiting are told so.
    mutating func finish(into actions: inout [ShardStateMachine.Action]) {
        for record in claims { actions.append(.reply(record.reply.with(.failure(ShardStateMachine.stopped)))) }
        claims = []
        for record in releases { actions.append(.reply(record.reply.with(.failure(ShardStateMachine.stopped)))) }
        releases = []
    }
}
