import CounterCore
import Persistence
import RedisDriver

/// The write-behind flusher's bookkeeping and decisions, without I/O: events in, actions out.
///
/// It knows, per slot, how many logged changes wait and since when, what was appended and what
/// applied (by entry id); which slots' logs must be read again because a write's outcome there is unknown; who
/// waits for which entries to reach PostgreSQL; when the last flush committed; whether the
/// flusher is stopping; and how long to back off after a failure. From that it decides when a
/// flush is due (`nextAction(now:)`) and what one reads (`flushPlan(now:)`).
///
/// A shard's `WriteBehind` holds one and turns what it decides into a `FlushRun`'s steps (read and
/// trim the logs, apply entries to PostgreSQL), actions the shard's shell performs and reports
/// back as events; its sleeps are the shard's `flush` timer. Time comes in as arguments; nothing
/// here reads a clock, so every rule can be driven step by step.
///
/// The flush loop sleeps while nothing is due. Events that happen meanwhile return
/// `LoopSignal.wakeLoop` only when they change what the loop should do: a flush became due, a
/// deadline moved earlier, or the loop must finish. Once a signal is given, later events say
/// nothing until the loop has asked `nextAction(now:)` again and gone back to sleep, so a stream
/// of appends costs one wake-up, not one per append.
struct FlushScheduler {
    /// What the flusher knows of one slot's log.
    struct SlotBacklog: Equatable {
        /// Changes counted as waiting in the slot's log. Exact for what this process appended;
        /// after a rescan, an estimate (the log's entries times the newest entry's changes) until
        /// the log has been read.
        var pending = 0
        /// When the slot's oldest waiting change became dirty, as far as this process knows.
        var dirtySince: ContinuousClock.Instant?
        /// The newest entry appended to the log.
        var appended: StreamEntryID?
        /// The newest entry applied to PostgreSQL.
        var applied: StreamEntryID?

        /// Whether the log may hold something not yet in PostgreSQL.
        var hasWork: Bool {
            if pending > 0 { return true }
            guard let appended else { return false }
            return applied.map { $0 < appended } ?? true
        }
    }

    /// Names a caller waiting for entries to reach PostgreSQL; the flusher keeps the caller's
    /// continuation under it.
    struct WaiterID: Hashable, Sendable, CustomStringConvertible {
        fileprivate let number: UInt64

        /// `waiter <n>`, for test failures.
        var description: String { "waiter \(number)" }
    }

    /// Whether the flusher's loop, asleep, must be woken because of an event.
    enum LoopSignal: Equatable {
        /// Nothing the loop should do has changed (or it is awake and will ask anyway).
        case none
        /// Wake it: a flush became due, a deadline moved earlier, or the loop must finish.
        case wakeLoop
    }

    /// What becomes of a caller that wants entries in PostgreSQL.
    enum WaiterDecision: Equatable {
        /// Every mark is applied already: return at once.
        case resumeNow
        /// The flusher has stopped and will apply nothing more: fail at once.
        case refuse
        /// Wait under the id until a flush applies the marks (or the loop finishes); the signal
        /// says whether the loop must be woken for it.
        case wait(WaiterID, LoopSignal)
    }

    /// What the flusher's loop does next.
    enum LoopAction: Equatable {
        /// Read the uncertain slots' logs again (`slotsToRescan`), then flush (`flushPlan(now:)`).
        case flush
        /// Sleep until this instant, unless an event signals `wakeLoop` first.
        case sleep(until: ContinuousClock.Instant)
        /// Nothing waits: sleep until an event signals `wakeLoop`.
        case waitForEvent
        /// End the loop; fail these waiters, since nothing more will be applied for them. After
        /// this the scheduler is stopped and holds no waiters.
        case finish(failWaiters: [WaiterID])
    }

    /// What one flush reads: the oldest dirty slots, and about how many changes of each.
    struct FlushPlan: Equatable {
        /// One slot to read, with what was known of it when the plan was made.
        struct Slot: Equatable {
            /// The slot whose log to read.
            let slot: UInt16
            /// Changes counted as waiting when the plan was made.
            let pending: Int
            /// The newest entry known appended when the plan was made.
            let appended: StreamEntryID?
        }

        /// The slots to read, oldest dirty first.
        let slots: [Slot]
        /// How many changes to read from each slot's log: whole entries, until at least this
        /// many (or the log's end).
        let changesPerSlot: Int
    }

    /// Why and until when the loop sleeps, as last told; `nil` while it is awake.
    private struct LoopSleep {
        /// Until when; `nil` for as long as no event wakes it.
        let deadline: ContinuousClock.Instant?
        /// Backing off after a failure: only the end of the flusher cuts that short.
        let isBackoff: Bool
    }

    /// Flush as soon as this many changes wait, and read about this many per flush.
    let flushBatchSize: Int
    /// Flush at least this often while entries wait.
    let flushInterval: Duration
    /// Flush once a slot has been dirty this long.
    let flushMaxAge: Duration

    /// What is known per slot; a slot with nothing known has no entry.
    private var backlog: [UInt16: SlotBacklog] = [:]
    /// Slots whose writes broke mid-way: their logs may hold entries never noted here.
    private(set) var uncertainSlots: Set<UInt16> = []
    /// Callers waiting for entries to reach PostgreSQL, oldest first, with the newest entry each
    /// wants per slot.
    private var waiters: [(id: WaiterID, marks: [UInt16: StreamEntryID])] = []
    /// The number the next waiter's id gets.
    private var nextWaiterNumber: UInt64 = 0
    /// When the last flush committed (or, before any, when the scheduler was made).
    private(set) var lastFlush: ContinuousClock.Instant
    /// Whether `stop(drain:)` was called: flush whatever waits, then finish.
    private(set) var isStopping = false
    /// Whether the flusher is finished or told to finish at once: nothing more is applied.
    private(set) var isStopped = false
    /// How long to wait after each failed flush in a row.
    private var retryBackoff: ReconnectBackoff
    /// No flush is attempted before this, after a failure.
    private(set) var retryNotBefore: ContinuousClock.Instant?
    /// How the loop sleeps, as last told by `nextAction(now:)`, until an event wakes it.
    private var loopSleep: LoopSleep?
    /// Entries waiting over all slots: the sum of every slot's `pending`, kept as it changes so
    /// the shard's backlog limit can be checked without a scan.
    private(set) var pendingTotal = 0
    /// The slots that have work, kept as they change: the hot path needs no scan, and the scans
    /// of a plan or of the marks walk these, not every slot the shard has known (on the long
    /// tail, walking all of them cost about 4 % of the node's time).
    private var slotsWorking: Set<UInt16> = []
    /// The slots with a `dirtySince`, kept as they change, for the oldest one.
    private var dirtySlots: Set<UInt16> = []
    private var slotsWithWork: Int { slotsWorking.count }

    /// A scheduler with nothing known yet; `now` counts as the last flush, so the interval runs
    /// from the start.
    init(configuration: WritePathConfiguration, now: ContinuousClock.Instant) {
        flushBatchSize = configuration.flushBatchSize
        flushInterval = configuration.flushInterval
        flushMaxAge = configuration.flushMaxAge
        retryBackoff = ReconnectBackoff(initial: configuration.retryInitialDelay, maximum: configuration.retryMaximumDelay)
        lastFlush = now
    }

    // MARK: - Queries

    /// What is known of `slot`'s log; `nil` when nothing is.
    func backlog(ofSlot slot: UInt16) -> SlotBacklog? {
        backlog[slot]
    }

    /// Whether `slot`'s log may hold changes PostgreSQL does not have yet (also when a write's
    /// outcome there is unknown and the log has not been read again).
    func hasPendingChanges(inSlot slot: UInt16) -> Bool {
        uncertainSlots.contains(slot) || (backlog[slot]?.hasWork ?? false)
    }

    /// The newest entry noted as appended to `slot`'s log, if any.
    func newestAppended(inSlot slot: UInt16) -> StreamEntryID? {
        backlog[slot]?.appended
    }

    /// `slot`'s log was found empty (its length read from Redis) while `appendedWhenAsked` was
    /// still the newest entry noted there: nothing waits in it. What was noted is applied, or was
    /// lost with a Redis node that failed over — either way no flush can bring it, and counting
    /// it as waiting would keep the slot "pending" for good. Ignored when the slot is uncertain
    /// (the loop rescans it) or an entry was noted since the question was asked.
    /// - Returns: the waiters this satisfies, to resume.
    mutating func logFoundEmpty(slot: UInt16, appendedWhenAsked: StreamEntryID?) -> [WaiterID] {
        guard !uncertainSlots.contains(slot), let state = backlog[slot], state.appended == appendedWhenAsked else { return [] }
        return settled(slot: slot, removed: state.pending, applied: state.appended, stillDirtySince: nil)
    }

    /// The slots whose logs may hold changes PostgreSQL does not have, with the changes counted
    /// there (0 for a slot whose log must be read again to know).
    var pendingBySlot: [UInt16: Int] {
        var pending: [UInt16: Int] = [:]
        for slot in slotsWorking { pending[slot] = backlog[slot]!.pending }
        for slot in uncertainSlots where pending[slot] == nil { pending[slot] = 0 }
        return pending
    }

    /// When the longest-dirty slot became dirty; `nil` when none is.
    var oldestDirtySince: ContinuousClock.Instant? {
        dirtySlots.lazy.compactMap { backlog[$0]!.dirtySince }.min()
    }

    /// The uncertain slots, in order: the logs to read again before anything else.
    var slotsToRescan: [UInt16] {
        uncertainSlots.sorted()
    }

    /// The newest appended entry of every slot with work: once they are applied, everything
    /// appended so far is in PostgreSQL.
    var unflushedMarks: [UInt16: StreamEntryID] {
        var marks: [UInt16: StreamEntryID] = [:]
        for slot in slotsWorking {
            if let id = backlog[slot]!.appended { marks[slot] = id }
        }
        return marks
    }

    /// The waiters not yet resumed or failed, oldest first.
    var waiterIDs: [WaiterID] {
        waiters.map(\.id)
    }

    /// Whether every entry in `marks` (newest id per slot) is in PostgreSQL.
    func isApplied(_ marks: [UInt16: StreamEntryID]) -> Bool {
        marks.allSatisfy { slot, id in (backlog[slot]?.applied).map { $0 >= id } ?? false }
    }

    /// Whether a flush should start at `now`: uncertain slots always want one; otherwise only
    /// when some slot has work and the flusher is stopping, someone waits, `flushBatchSize`
    /// entries wait, `flushInterval` has passed since the last flush, or a slot has been dirty
    /// for `flushMaxAge`. Backoff is not considered here (`nextAction(now:)` does).
    func isFlushDue(now: ContinuousClock.Instant) -> Bool {
        if !uncertainSlots.isEmpty { return true }
        guard slotsWithWork > 0 else { return false }
        if isStopping || !waiters.isEmpty || pendingTotal >= flushBatchSize { return true }
        if now - lastFlush >= flushInterval { return true }
        return oldestDirtySince.map { now - $0 >= flushMaxAge } ?? false
    }

    /// When a flush falls due by time alone: the earlier of the interval's end and the oldest
    /// dirty slot's maximum age; `nil` while no slot has work.
    var nextDeadline: ContinuousClock.Instant? {
        guard slotsWithWork > 0 else { return nil }
        let intervalEnds = lastFlush + flushInterval
        return oldestDirtySince.map { min(intervalEnds, $0 + flushMaxAge) } ?? intervalEnds
    }

    // MARK: - The loop

    /// What the loop does next, at `now`. A sleep it is told of lasts until its deadline or
    /// until an event returns `wakeLoop`; then the loop asks again.
    mutating func nextAction(now: ContinuousClock.Instant) -> LoopAction {
        loopSleep = nil
        if isStopped { return finish() }
        if let retryNotBefore, now < retryNotBefore {
            loopSleep = LoopSleep(deadline: retryNotBefore, isBackoff: true)
            return .sleep(until: retryNotBefore)
        }
        if isFlushDue(now: now) { return .flush }
        if isStopping && slotsWithWork == 0 && uncertainSlots.isEmpty { return finish() }
        let deadline = nextDeadline
        loopSleep = LoopSleep(deadline: deadline, isBackoff: false)
        return deadline.map { .sleep(until: $0) } ?? .waitForEvent
    }

    private mutating func finish() -> LoopAction {
        isStopping = true
        isStopped = true
        let failing = waiters.map(\.id)
        waiters = []
        return .finish(failWaiters: failing)
    }

    // MARK: - Events from the shard and its callers

    /// The shard logged changes: per slot, how many (at least one) and the newest entry. A slot
    /// that had nothing waiting becomes dirty at `now`.
    mutating func appended(_ batches: [UInt16: (count: Int, newest: StreamEntryID)], now: ContinuousClock.Instant) -> LoopSignal {
        var newlyDirty = false
        for (slot, batch) in batches {
            update(slot) { state in
                if state.pending == 0 {
                    state.dirtySince = now
                    newlyDirty = true
                }
                state.pending += batch.count
                state.appended = max(state.appended ?? batch.newest, batch.newest)
            }
        }
        return signal(newlyDirtyAt: newlyDirty ? now : nil)
    }

    /// Writes to `slots` broke mid-way: their logs may hold entries never noted, so they are read
    /// again before the next flush.
    mutating func uncertain(_ slots: Set<UInt16>) -> LoopSignal {
        uncertainSlots.formUnion(slots)
        return signal(newlyDirtyAt: nil)
    }

    /// `slot`'s log was read again: it holds about `length` changes (the flusher estimates them
    /// from its entries and the newest entry's size), the newest entry `newest`. That is now the
    /// truth about what waits there, and the slot is no longer uncertain. A slot whose read
    /// failed needs no event: it stays uncertain.
    mutating func rescanned(slot: UInt16, length: Int, newest: StreamEntryID?, now: ContinuousClock.Instant) -> LoopSignal {
        var newlyDirty = false
        update(slot) { state in
            state.pending = max(0, length)
            if let newest { state.appended = max(state.appended ?? newest, newest) }
            if length > 0 && state.dirtySince == nil {
                state.dirtySince = now
                newlyDirty = true
            }
            // An empty log with nothing ever appended: nothing is known of the slot.
            if length <= 0 && state.appended == nil { state.dirtySince = nil }
        }
        uncertainSlots.remove(slot)
        return signal(newlyDirtyAt: newlyDirty ? now : nil)
    }

    /// A caller wants every entry in `marks` (newest id per slot) in PostgreSQL.
    mutating func waiterAdded(marks: [UInt16: StreamEntryID]) -> WaiterDecision {
        if isApplied(marks) { return .resumeNow }
        if isStopped { return .refuse }
        let id = WaiterID(number: nextWaiterNumber)
        nextWaiterNumber += 1
        waiters.append((id, marks))
        return .wait(id, signal(newlyDirtyAt: nil))
    }

    /// Ends the flusher once everything waiting is flushed (`drain`), or at once: nothing more is
    /// applied then, and waiters fail.
    mutating func stop(drain: Bool) -> LoopSignal {
        isStopping = true
        if !drain { isStopped = true }
        return signal(newlyDirtyAt: nil)
    }

    // MARK: - Events from a flush

    /// The slots one flush reads at `now`: the oldest dirty first (slots with work but no known
    /// age count as dirty since `now`; equal ages by slot number). When everything waiting fits
    /// in `flushBatchSize` changes, every slot, whole. Otherwise each slot up to a share of
    /// `flushBatchSize` (at least 64, so a backlog spread over many slots still moves in
    /// sizeable steps), until what they hold — each counted up to its share — reaches
    /// `flushBatchSize`. `nil` when no slot has work.
    func flushPlan(now: ContinuousClock.Instant) -> FlushPlan? {
        let dirty = slotsWorking.map { (key: $0, value: backlog[$0]!) }
            .sorted { ($0.value.dirtySince ?? now, $0.key) < ($1.value.dirtySince ?? now, $1.key) }
        guard !dirty.isEmpty else { return nil }
        // A share caps a busy slot only when the batch cannot take everything: a slot of a
        // popular post would otherwise fall behind by a share per flush.
        let perSlot = pendingTotal <= flushBatchSize ? flushBatchSize : max(64, flushBatchSize / dirty.count)
        var chosen: [FlushPlan.Slot] = []
        var planned = 0
        for (slot, state) in dirty {
            chosen.append(FlushPlan.Slot(slot: slot, pending: state.pending, appended: state.appended))
            planned += min(max(state.pending, 1), perSlot)
            if planned >= flushBatchSize { break }
        }
        return FlushPlan(slots: chosen, changesPerSlot: perSlot)
    }

    /// A planned slot's log read empty: whatever was appended there before the plan has been
    /// applied and trimmed (appends noted since stay counted).
    /// - Returns: the waiters this satisfies, to resume.
    mutating func emptyLogRead(_ planned: FlushPlan.Slot) -> [WaiterID] {
        settled(slot: planned.slot, removed: planned.pending, applied: planned.appended, stillDirtySince: nil)
    }

    /// A flush accounted for `slot`: the entries it read, holding `removed` changes, left its log
    /// (none if the trim failed; never more than are counted), and entries up to `applied` are in PostgreSQL.
    /// If entries still wait, the slot counts as dirty since `stillDirtySince` (the read's start,
    /// when the read took everything there was), or as before when it is `nil`.
    /// - Returns: the waiters this satisfies, to resume.
    mutating func settled(
        slot: UInt16, removed: Int, applied: StreamEntryID?,
        stillDirtySince: ContinuousClock.Instant?
    ) -> [WaiterID] {
        update(slot) { state in
            state.pending -= max(0, min(removed, state.pending))
            if let applied { state.applied = max(state.applied ?? applied, applied) }
            if state.pending == 0 {
                state.dirtySince = nil
            } else if let stillDirtySince {
                state.dirtySince = stillDirtySince
            }
        }
        guard applied != nil else { return [] }
        return takeWaitersSatisfied(bySlot: slot)
    }

    /// `slot`'s log, read whole after its Redis master failed over, holds exactly `present`:
    /// the waiters whose mark on it is an entry not there and not applied wait for an entry
    /// the failover lost, which no flush will ever apply. They leave, and are returned, to fail
    /// (a flush of later entries would otherwise pass their mark and tell them it was applied).
    /// With `through`, only marks up to it count: entries noted after the log was read are not
    /// judged by that read.
    mutating func takeWaitersOfLostEntries(slot: UInt16, present: Set<StreamEntryID>, through: StreamEntryID? = nil) -> [WaiterID] {
        let applied = backlog[slot]?.applied
        var lost: [WaiterID] = []
        waiters.removeAll { waiter in
            guard let mark = waiter.marks[slot], !present.contains(mark), applied.map({ mark > $0 }) ?? true,
                through.map({ mark <= $0 }) ?? true
            else { return false }
            lost.append(waiter.id)
            return true
        }
        return lost
    }

    /// The node gave `slots` up (another node owns them now and drains their logs): nothing is
    /// known of them any more.
    /// - Returns: the waiters with a mark on one of them, to fail (their entries are in the log
    ///   the new owner drains, but this flusher cannot tell when).
    mutating func forget(_ slots: Set<UInt16>) -> [WaiterID] {
        for slot in slots where backlog[slot] != nil {
            update(slot) { $0 = SlotBacklog() }
        }
        uncertainSlots.subtract(slots)
        var failing: [WaiterID] = []
        var remaining: [(id: WaiterID, marks: [UInt16: StreamEntryID])] = []
        for waiter in waiters {
            if waiter.marks.keys.contains(where: slots.contains) {
                failing.append(waiter.id)
            } else {
                remaining.append(waiter)
            }
        }
        waiters = remaining
        return failing
    }

    /// A flush committed entries to PostgreSQL at `now`: the interval starts again.
    mutating func flushCommitted(at now: ContinuousClock.Instant) {
        lastFlush = now
    }

    /// A flush attempt ended without error: the next failure backs off from the start again.
    mutating func flushSucceeded() {
        retryBackoff.reset()
        retryNotBefore = nil
    }

    /// What made flushes fail is known to be over (a Redis master that failed over is replaced):
    /// the next flush need not wait out the backoff.
    mutating func failureResolved() -> LoopSignal {
        retryBackoff.reset()
        retryNotBefore = nil
        if loopSleep?.isBackoff == true { loopSleep = nil }
        return .wakeLoop
    }

    /// A flush attempt failed at `now`: no flush is tried for the returned delay, which doubles
    /// with each failure in a row up to the configured maximum.
    @discardableResult
    mutating func flushFailed(now: ContinuousClock.Instant) -> Duration {
        let delay = retryBackoff.nextDelay()
        retryNotBefore = now + delay
        return delay
    }

    // MARK: - Keeping the sums

    /// Changes one slot's backlog and keeps `pendingTotal` and the count of slots with work in
    /// step. A slot that ends with nothing known is dropped.
    private mutating func update(_ slot: UInt16, _ change: (inout SlotBacklog) -> Void) {
        var state = backlog[slot] ?? SlotBacklog()
        let hadWork = state.hasWork
        let dirtyBefore = state.dirtySince
        let pendingBefore = state.pending
        change(&state)
        pendingTotal += state.pending - pendingBefore
        if state.hasWork != hadWork {
            if state.hasWork { slotsWorking.insert(slot) } else { slotsWorking.remove(slot) }
        }
        if (state.dirtySince == nil) != (dirtyBefore == nil) {
            if state.dirtySince == nil { dirtySlots.remove(slot) } else { dirtySlots.insert(slot) }
        }
        backlog[slot] = state == SlotBacklog() ? nil : state
    }

    /// Removes and returns, oldest first, the waiters with a mark on `slot` whose every mark is
    /// now applied. Only `slot`'s applied entry moved, so no other waiter can be satisfied.
    private mutating func takeWaitersSatisfied(bySlot slot: UInt16) -> [WaiterID] {
        var satisfied: [WaiterID] = []
        var remaining: [(id: WaiterID, marks: [UInt16: StreamEntryID])] = []
        for waiter in waiters {
            if waiter.marks[slot] != nil && isApplied(waiter.marks) {
                satisfied.append(waiter.id)
            } else {
                remaining.append(waiter)
            }
        }
        if !satisfied.isEmpty { waiters = remaining }
        return satisfied
    }

    /// Whether the sleeping loop must wake after an event, in constant time: a finish or a flush
    /// became due, or a deadline moved earlier. Only a slot that just became dirty (at
    /// `newlyDirtyAt`) can bring the maximum-age deadline forward; the interval's end moves only
    /// when a flush commits, which happens while the loop is awake. A backoff is cut short only
    /// by the end of the flusher.
    private mutating func signal(newlyDirtyAt: ContinuousClock.Instant?) -> LoopSignal {
        guard let sleep = loopSleep else { return .none }
        let wake: Bool
        if isStopped {
            wake = true
        } else if sleep.isBackoff {
            wake = false
        } else if !uncertainSlots.isEmpty {
            wake = true
        } else if slotsWithWork == 0 {
            wake = isStopping
        } else if isStopping || !waiters.isEmpty || pendingTotal >= flushBatchSize {
            wake = true
        } else if let deadline = sleep.deadline {
            var earliest = lastFlush + flushInterval
            if let newlyDirtyAt { earliest = min(earliest, newlyDirtyAt + flushMaxAge) }
            wake = earliest < deadline
        } else {
            wake = true
        }
        guard wake else { return .none }
        loopSleep = nil
        return .wakeLoop
    }
}
