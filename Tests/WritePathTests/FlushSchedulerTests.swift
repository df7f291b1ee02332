import CounterCore
import RedisDriver
import TestSupport
import Testing

@testable import WritePath

@Suite("Flush scheduler (pure)")
struct FlushSchedulerTests {
    typealias Backlog = FlushScheduler.SlotBacklog

    /// The one clock reading of a test: every other instant is an offset from it.
    let t0 = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { t0 + .milliseconds(milliseconds) }

    static func id(_ milliseconds: UInt64) -> StreamEntryID { StreamEntryID(milliseconds: milliseconds, sequence: 0) }

    func scheduler(batch: Int = 100, interval: Duration = .milliseconds(200), maxAge: Duration = .seconds(1)) -> FlushScheduler {
        var configuration = WritePathConfiguration()
        configuration.flushBatchSize = batch
        configuration.flushInterval = interval
        configuration.flushMaxAge = maxAge
        configuration.retryInitialDelay = .milliseconds(50)
        configuration.retryMaximumDelay = .milliseconds(400)
        return FlushScheduler(configuration: configuration, now: t0)
    }

    // MARK: - When a flush falls due

    @Test("with nothing appended the loop waits for an event, however much time passes")
    func idle() {
        var scheduler = scheduler()
        #expect(scheduler.nextAction(now: at(0)) == .waitForEvent)
        #expect(scheduler.nextAction(now: at(60_000)) == .waitForEvent)
        #expect(!scheduler.isFlushDue(now: at(60_000)))
        #expect(scheduler.flushPlan(now: at(60_000)) == nil)
        #expect(scheduler.pendingTotal == 0)
    }

    @Test("while changes wait, a flush falls due flushInterval after the last one")
    func interval() {
        var scheduler = scheduler(interval: .milliseconds(200), maxAge: .seconds(1))
        #expect(scheduler.nextAction(now: at(0)) == .waitForEvent)
        // The loop waits for an event; now it has a deadline to sleep until.
        #expect(scheduler.appended([7: (3, Self.id(1))], now: at(50)) == .wakeLoop)
        #expect(scheduler.nextAction(now: at(50)) == .sleep(until: at(200)))
        #expect(!scheduler.isFlushDue(now: at(199)))
        #expect(scheduler.nextAction(now: at(200)) == .flush)
        // A commit starts the interval again.
        _ = scheduler.settled(slot: 7, removed: 1, applied: Self.id(1), stillDirtySince: nil)
        scheduler.flushCommitted(at: at(210))
        scheduler.flushSucceeded()
        #expect(scheduler.nextAction(now: at(210)) == .sleep(until: at(410)))
        #expect(scheduler.nextAction(now: at(410)) == .flush)
    }

    @Test("a log found empty settles what was counted there, unless an entry was noted since or the slot is uncertain")
    func logFoundEmpty() throws {
        var scheduler = scheduler()
        _ = scheduler.appended([5: (3, Self.id(10))], now: at(0))
        // A flush applied the entries read; a failover had dropped one that was counted.
        _ = scheduler.settled(slot: 5, removed: 2, applied: Self.id(9), stillDirtySince: nil)
        #expect(scheduler.hasPendingChanges(inSlot: 5), "counted as waiting, though nothing is left")
        guard case .wait(let waiter, _) = scheduler.waiterAdded(marks: [5: Self.id(10)]) else {
            Issue.record("the waiter should wait")
            return
        }
        // An entry noted after the question: the answer is stale and changes nothing.
        let asked = scheduler.newestAppended(inSlot: 5)
        _ = scheduler.appended([5: (1, Self.id(11))], now: at(1))
        #expect(scheduler.logFoundEmpty(slot: 5, appendedWhenAsked: asked).isEmpty)
        #expect(scheduler.hasPendingChanges(inSlot: 5))
        // Asked again with nothing noted since: the slot settles, the waiter is satisfied.
        let satisfied = scheduler.logFoundEmpty(slot: 5, appendedWhenAsked: scheduler.newestAppended(inSlot: 5))
        #expect(satisfied == [waiter])
        #expect(!scheduler.hasPendingChanges(inSlot: 5))
        #expect(scheduler.pendingTotal == 0)
        // An uncertain slot is the loop's to rescan, not this answer's.
        _ = scheduler.appended([6: (1, Self.id(20))], now: at(2))
        _ = scheduler.uncertain([6])
        #expect(scheduler.logFoundEmpty(slot: 6, appendedWhenAsked: scheduler.newestAppended(inSlot: 6)).isEmpty)
        #expect(scheduler.hasPendingChanges(inSlot: 6))
    }

    @Test("a slot dirty for flushMaxAge makes a flush due though the interval has not passed")
    func maximumAge() {
        var scheduler = scheduler(interval: .seconds(60), maxAge: .milliseconds(250))
        #expect(scheduler.appended([1: (1, Self.id(1))], now: at(100)) == .none)
        #expect(scheduler.nextAction(now: at(100)) == .sleep(until: at(350)))
        // More changes to a slot already dirty do not make it younger.
        #expect(scheduler.appended([1: (4, Self.id(2))], now: at(300)) == .none)
        #expect(scheduler.backlog(ofSlot: 1)?.dirtySince == at(100))
        #expect(!scheduler.isFlushDue(now: at(349)))
        #expect(scheduler.nextAction(now: at(350)) == .flush)
    }

    @Test("flushBatchSize waiting changes make a flush due at once, with one wake-up however many appends follow")
    func batchSize() {
        var scheduler = scheduler(batch: 100)
        #expect(scheduler.nextAction(now: at(0)) == .waitForEvent)
        #expect(scheduler.appended([1: (60, Self.id(1))], now: at(0)) == .wakeLoop)
        #expect(scheduler.nextAction(now: at(0)) == .sleep(until: at(200)))
        #expect(scheduler.appended([2: (39, Self.id(2))], now: at(10)) == .none)
        #expect(scheduler.appended([1: (1, Self.id(3))], now: at(20)) == .wakeLoop)
        // Signalled already: the loop asks again before it sleeps, so nothing more is said.
        #expect(scheduler.appended([3: (5, Self.id(4))], now: at(21)) == .none)
        #expect(scheduler.pendingTotal == 105)
        #expect(scheduler.nextAction(now: at(21)) == .flush)
        // Awake, flushing: events never signal.
        #expect(scheduler.appended([4: (500, Self.id(5))], now: at(22)) == .none)
    }

    @Test("a deadline brought forward by a newly dirty slot wakes the loop; a later one does not")
    func deadlineMovesEarlier() {
        var scheduler = scheduler(interval: .seconds(10), maxAge: .seconds(1))
        _ = scheduler.appended([1: (1, Self.id(5))], now: at(0))
        // Entries up to 3 applied, the rest trimmed: slot 1 has work (5 is not applied) but no age.
        _ = scheduler.settled(slot: 1, removed: 1, applied: Self.id(3), stillDirtySince: nil)
        #expect(scheduler.backlog(ofSlot: 1) == Backlog(pending: 0, dirtySince: nil, appended: Self.id(5), applied: Self.id(3)))
        #expect(scheduler.nextAction(now: at(100)) == .sleep(until: at(10_000)))
        #expect(scheduler.appended([2: (1, Self.id(6))], now: at(500)) == .wakeLoop)
        #expect(scheduler.nextAction(now: at(500)) == .sleep(until: at(1_500)))
        #expect(scheduler.appended([3: (1, Self.id(7))], now: at(600)) == .none)
        #expect(scheduler.nextAction(now: at(1_500)) == .flush)
    }

    @Test("uncertain slots make a flush due with nothing counted, to read their logs again")
    func uncertainSlots() {
        var scheduler = scheduler()
        #expect(scheduler.nextAction(now: at(0)) == .waitForEvent)
        #expect(scheduler.uncertain([5, 3]) == .wakeLoop)
        #expect(scheduler.hasPendingChanges(inSlot: 3))
        #expect(scheduler.nextAction(now: at(1)) == .flush)
        #expect(scheduler.slotsToRescan == [3, 5])
        #expect(scheduler.rescanned(slot: 3, length: 4, newest: Self.id(9), now: at(10)) == .none)
        #expect(scheduler.rescanned(slot: 5, length: 0, newest: nil, now: at(10)) == .none)
        #expect(scheduler.uncertainSlots.isEmpty)
        #expect(scheduler.backlog(ofSlot: 3) == Backlog(pending: 4, dirtySince: at(10), appended: Self.id(9), applied: nil))
        #expect(scheduler.backlog(ofSlot: 5) == nil)
        #expect(!scheduler.hasPendingChanges(inSlot: 5))
        #expect(scheduler.pendingTotal == 4)
        #expect(scheduler.flushPlan(now: at(10))?.slots.map(\.slot) == [3])
    }

    @Test("a rescan takes the log's length as the truth and keeps the newest id known")
    func rescanArithmetic() {
        var scheduler = scheduler()
        _ = scheduler.appended([1: (10, Self.id(20))], now: at(0))
        _ = scheduler.uncertain([1])
        _ = scheduler.rescanned(slot: 1, length: 3, newest: Self.id(15), now: at(40))
        #expect(scheduler.backlog(ofSlot: 1) == Backlog(pending: 3, dirtySince: at(0), appended: Self.id(20), applied: nil))
        #expect(scheduler.pendingTotal == 3)
        _ = scheduler.rescanned(slot: 1, length: 12, newest: Self.id(30), now: at(50))
        #expect(scheduler.backlog(ofSlot: 1)?.appended == Self.id(30))
        #expect(scheduler.pendingTotal == 12)
        // An empty log: nothing counted, but 30 is not known applied, so a flush must look. The
        // age stays until that flush finds the log empty.
        _ = scheduler.rescanned(slot: 1, length: 0, newest: nil, now: at(60))
        #expect(scheduler.backlog(ofSlot: 1) == Backlog(pending: 0, dirtySince: at(0), appended: Self.id(30), applied: nil))
        #expect(scheduler.pendingTotal == 0)
        #expect(scheduler.hasPendingChanges(inSlot: 1))
        #expect(scheduler.unflushedMarks == [1: Self.id(30)])
    }

    // MARK: - Waiters

    @Test("waiters resume exactly when every marked slot has applied its mark")
    func waitersResolve() throws {
        var scheduler = scheduler()
        _ = scheduler.appended([1: (2, Self.id(5)), 2: (1, Self.id(7))], now: at(0))
        guard case .wait(let both, _) = scheduler.waiterAdded(marks: [1: Self.id(5), 2: Self.id(7)]),
            case .wait(let first, _) = scheduler.waiterAdded(marks: [1: Self.id(4)])
        else {
            Issue.record("waiters should wait")
            return
        }
        #expect(scheduler.waiterIDs == [both, first])
        #expect(scheduler.settled(slot: 1, removed: 1, applied: Self.id(4), stillDirtySince: nil) == [first])
        #expect(scheduler.settled(slot: 1, removed: 1, applied: Self.id(5), stillDirtySince: nil) == [])
        #expect(scheduler.settled(slot: 2, removed: 0, applied: Self.id(6), stillDirtySince: nil) == [])
        #expect(scheduler.settled(slot: 2, removed: 1, applied: Self.id(7), stillDirtySince: nil) == [both])
        #expect(scheduler.waiterIDs.isEmpty)
        // Already applied, or nothing asked: at once.
        #expect(scheduler.waiterAdded(marks: [1: Self.id(5), 2: Self.id(3)]) == .resumeNow)
        #expect(scheduler.waiterAdded(marks: [:]) == .resumeNow)
    }

    @Test("a waiter makes a flush due while changes wait, and wakes the sleeping loop for it")
    func waiterMakesFlushDue() {
        var scheduler = scheduler(interval: .seconds(60), maxAge: .seconds(60))
        _ = scheduler.appended([1: (1, Self.id(5))], now: at(0))
        #expect(scheduler.nextAction(now: at(0)) == .sleep(until: at(60_000)))
        guard case .wait(_, let signal) = scheduler.waiterAdded(marks: [1: Self.id(5)]) else {
            Issue.record("the waiter should wait")
            return
        }
        #expect(signal == .wakeLoop)
        #expect(scheduler.nextAction(now: at(1)) == .flush)
    }

    @Test("a log found empty settles what the plan knew; appends noted since stay counted")
    func emptyLog() {
        var scheduler = scheduler()
        _ = scheduler.appended([1: (5, Self.id(5))], now: at(0))
        guard case .wait(let waiter, _) = scheduler.waiterAdded(marks: [1: Self.id(5)]) else {
            Issue.record("the waiter should wait")
            return
        }
        let plan = scheduler.flushPlan(now: at(10))
        #expect(plan == FlushScheduler.FlushPlan(slots: [.init(slot: 1, pending: 5, appended: Self.id(5))], changesPerSlot: 100))
        _ = scheduler.appended([1: (2, Self.id(7))], now: at(20))
        #expect(scheduler.emptyLogRead(plan!.slots[0]) == [waiter])
        #expect(scheduler.backlog(ofSlot: 1) == Backlog(pending: 2, dirtySince: at(0), appended: Self.id(7), applied: Self.id(5)))
        #expect(scheduler.pendingTotal == 2)
    }

    // MARK: - Stopping

    @Test("stop without drain fails the waiters at once and refuses new ones")
    func stopAtOnce() {
        var scheduler = scheduler()
        _ = scheduler.appended([1: (1, Self.id(5))], now: at(0))
        #expect(scheduler.nextAction(now: at(0)) == .sleep(until: at(200)))
        guard case .wait(let waiter, .wakeLoop) = scheduler.waiterAdded(marks: [1: Self.id(5)]) else {
            Issue.record("the waiter should wait and wake the loop")
            return
        }
        #expect(scheduler.nextAction(now: at(1)) == .flush)
        #expect(scheduler.stop(drain: false) == .none) // awake: it asks again anyway
        #expect(scheduler.nextAction(now: at(2)) == .finish(failWaiters: [waiter]))
        #expect(scheduler.isStopped)
        #expect(scheduler.waiterAdded(marks: [1: Self.id(5)]) == .refuse)
        #expect(scheduler.nextAction(now: at(3)) == .finish(failWaiters: []))
    }

    @Test("stop without drain wakes a sleeping loop, even one backing off")
    func stopWakes() {
        var scheduler = scheduler(batch: 1)
        _ = scheduler.appended([1: (1, Self.id(5))], now: at(0))
        #expect(scheduler.nextAction(now: at(0)) == .flush)
        scheduler.flushFailed(now: at(0))
        #expect(scheduler.nextAction(now: at(1)) == .sleep(until: at(50)))
        #expect(scheduler.stop(drain: true) == .none)
        #expect(scheduler.stop(drain: false) == .wakeLoop)
        #expect(scheduler.nextAction(now: at(2)) == .finish(failWaiters: []))
    }

    @Test("stop with drain flushes what waits, then finishes; waiters nothing will satisfy fail")
    func drain() {
        var scheduler = scheduler(interval: .seconds(60), maxAge: .seconds(60))
        _ = scheduler.appended([1: (5, Self.id(5))], now: at(0))
        guard case .wait(let flushed, _) = scheduler.waiterAdded(marks: [1: Self.id(5)]),
            case .wait(let hopeless, _) = scheduler.waiterAdded(marks: [9: Self.id(1)])
        else {
            Issue.record("waiters should wait")
            return
        }
        #expect(scheduler.nextAction(now: at(0)) == .flush) // a waiter is there
        scheduler.flushFailed(now: at(0))
        #expect(scheduler.nextAction(now: at(1)) == .sleep(until: at(50)))
        #expect(scheduler.stop(drain: true) == .none) // the backoff runs its course
        #expect(scheduler.nextAction(now: at(50)) == .flush)
        #expect(scheduler.flushPlan(now: at(50))?.slots.map(\.slot) == [1])
        #expect(scheduler.settled(slot: 1, removed: 5, applied: Self.id(5), stillDirtySince: nil) == [flushed])
        scheduler.flushCommitted(at: at(60))
        scheduler.flushSucceeded()
        #expect(scheduler.nextAction(now: at(60)) == .finish(failWaiters: [hopeless]))
    }

    @Test("stop with drain ends an idle loop at once")
    func drainIdle() {
        var scheduler = scheduler()
        #expect(scheduler.nextAction(now: at(0)) == .waitForEvent)
        #expect(scheduler.stop(drain: true) == .wakeLoop)
        #expect(scheduler.nextAction(now: at(1)) == .finish(failWaiters: []))
    }

    // MARK: - Retries

    @Test("failed flushes back off, doubling to the maximum, whatever events come; a success starts over")
    func backoff() {
        var scheduler = scheduler(batch: 1)
        _ = scheduler.appended([1: (1, Self.id(5))], now: at(0))
        #expect(scheduler.nextAction(now: at(0)) == .flush)
        var now = 0
        for expected in [50, 100, 200, 400, 400] {
            #expect(scheduler.flushFailed(now: at(now)) == .milliseconds(expected))
            #expect(scheduler.nextAction(now: at(now + 1)) == .sleep(until: at(now + expected)))
            // Nothing but the end of the flusher cuts a backoff short.
            #expect(scheduler.appended([2: (10, Self.id(6))], now: at(now + 2)) == .none)
            #expect(scheduler.uncertain([3]) == .none)
            if case .wait(_, let signal) = scheduler.waiterAdded(marks: [1: Self.id(5)]) {
                #expect(signal == .none)
            } else {
                Issue.record("the waiter should wait")
            }
            now += expected
            #expect(scheduler.nextAction(now: at(now)) == .flush)
        }
        scheduler.flushSucceeded()
        #expect(scheduler.flushFailed(now: at(now)) == .milliseconds(50))
    }

    // MARK: - Arithmetic

    @Test("settling never counts below zero, and the total is always the sum of the slots")
    func settleArithmetic() {
        var scheduler = scheduler()
        _ = scheduler.appended([1: (3, Self.id(3)), 2: (4, Self.id(4))], now: at(0))
        func sum() -> Int { (0..<10).reduce(0) { $0 + (scheduler.backlog(ofSlot: UInt16($1))?.pending ?? 0) } }
        #expect(scheduler.pendingTotal == 7 && sum() == 7)
        _ = scheduler.settled(slot: 1, removed: 10, applied: Self.id(3), stillDirtySince: nil)
        #expect(scheduler.backlog(ofSlot: 1) == Backlog(pending: 0, dirtySince: nil, appended: Self.id(3), applied: Self.id(3)))
        #expect(scheduler.pendingTotal == 4 && sum() == 4)
        _ = scheduler.settled(slot: 2, removed: -5, applied: nil, stillDirtySince: nil)
        #expect(scheduler.pendingTotal == 4 && sum() == 4)
        _ = scheduler.settled(slot: 2, removed: 1, applied: nil, stillDirtySince: at(500))
        #expect(scheduler.backlog(ofSlot: 2) == Backlog(pending: 3, dirtySince: at(500), appended: Self.id(4), applied: nil))
        _ = scheduler.settled(slot: 2, removed: 1, applied: Self.id(2), stillDirtySince: nil)
        #expect(scheduler.backlog(ofSlot: 2) == Backlog(pending: 2, dirtySince: at(500), appended: Self.id(4), applied: Self.id(2)))
        _ = scheduler.settled(slot: 9, removed: 3, applied: nil, stillDirtySince: nil)
        #expect(scheduler.backlog(ofSlot: 9) == nil)
        #expect(scheduler.pendingTotal == 2 && sum() == 2)
        #expect(scheduler.oldestDirtySince == at(500))
    }

    @Test(
        "a flush reads every slot whole when all fits in flushBatchSize; otherwise the oldest first, each up to its share (at least 64), until about flushBatchSize"
    )
    func plan() {
        var scheduler = scheduler(batch: 200)
        for (slot, time, pending) in [(10, 50, 100), (11, 10, 100), (12, 30, 10), (13, 10, 30), (14, 40, 100)] as [(UInt16, Int, Int)] {
            _ = scheduler.appended([slot: (pending, Self.id(UInt64(slot)))], now: at(time))
        }
        // Five dirty: 200 / 5 is below 64, so shares of 64. Oldest first (equal ages by slot):
        // 11 (64 of its 100), 13 (30), 12 (10), 14 (64): 168, then 10 brings it past 200.
        #expect(
            scheduler.flushPlan(now: at(100))
                == FlushScheduler.FlushPlan(
                    slots: [
                        .init(slot: 11, pending: 100, appended: Self.id(11)),
                        .init(slot: 13, pending: 30, appended: Self.id(13)),
                        .init(slot: 12, pending: 10, appended: Self.id(12)),
                        .init(slot: 14, pending: 100, appended: Self.id(14)),
                        .init(slot: 10, pending: 100, appended: Self.id(10)),
                    ], changesPerSlot: 64))
        // Big slots: the batch fills sooner. 500 each, shares of 64: four slots make 256 ≥ 200.
        var busy = self.scheduler(batch: 200)
        for slot: UInt16 in 1...6 { _ = busy.appended([slot: (500, Self.id(UInt64(slot)))], now: at(Int(slot))) }
        #expect(busy.flushPlan(now: at(100))?.slots.map(\.slot) == [1, 2, 3, 4])

        var wide = self.scheduler(batch: 1_000)
        for slot: UInt16 in 1...4 { _ = wide.appended([slot: (1, Self.id(UInt64(slot)))], now: at(Int(slot))) }
        // Slot 1's pending entries are gone but entry 1 is not known applied: it has work and no
        // age, so it counts as dirty since the plan's time and comes last.
        _ = wide.settled(slot: 1, removed: 1, applied: nil, stillDirtySince: nil)
        let plan = wide.flushPlan(now: at(100))
        #expect(plan?.slots.map(\.slot) == [2, 3, 4, 1])
        // Everything waiting fits in the batch: no slot is capped.
        #expect(plan?.changesPerSlot == 1_000)
    }

    // MARK: - Random events

    @Test(
        "random events: the scheduler stays equal to the plain reference, no wake-up is lost or repeated, a drain empties the logs",
        arguments: 0..<20)
    func randomEvents(seed: Int) throws {
        var simulation = FlushSimulation(seed: seed, start: t0)
        try simulation.run(events: 300)
        #expect(simulation.flushes > 0)
        #expect(simulation.wakeUps > 0)
    }
}

// MARK: - Random events against a reference

/// The flusher's rules written the plain way, as the actor kept them before the scheduler
/// existed: sums by scanning, the backlog as a dictionary of slots. The random test holds
/// `FlushScheduler`, with its running sums and wake-up signals, to it after every event.
private struct ReferenceFlusher {
    typealias Slot = FlushScheduler.SlotBacklog
    typealias WaiterID = FlushScheduler.WaiterID

    let batchSize: Int
    let interval: Duration
    let maxAge: Duration
    var backlog: [UInt16: Slot] = [:]
    var uncertain: Set<UInt16> = []
    var waiters: [(id: WaiterID, marks: [UInt16: StreamEntryID])] = []
    var lastFlush: ContinuousClock.Instant
    var stopping = false
    var stopped = false
    var backoff: ReconnectBackoff
    var retryAt: ContinuousClock.Instant?

    init(configuration: WritePathConfiguration, now: ContinuousClock.Instant) {
        batchSize = configuration.flushBatchSize
        interval = configuration.flushInterval
        maxAge = configuration.flushMaxAge
        backoff = ReconnectBackoff(initial: configuration.retryInitialDelay, maximum: configuration.retryMaximumDelay)
        lastFlush = now
    }

    var pendingTotal: Int { backlog.values.reduce(0) { $0 + $1.pending } }
    var anyWork: Bool { backlog.values.contains(where: \.hasWork) }
    var oldest: ContinuousClock.Instant? { backlog.values.compactMap(\.dirtySince).min() }
    var finishDue: Bool { stopped || (stopping && !anyWork && uncertain.isEmpty) }

    var deadline: ContinuousClock.Instant? {
        guard anyWork else { return nil }
        return [lastFlush + interval, oldest.map { $0 + maxAge }].compactMap { $0 }.min()
    }

    func shouldFlush(now: ContinuousClock.Instant) -> Bool {
        if !uncertain.isEmpty { return true }
        guard anyWork else { return false }
        if stopping || !waiters.isEmpty || pendingTotal >= batchSize { return true }
        if now - lastFlush >= interval { return true }
        return oldest.map { now - $0 >= maxAge } ?? false
    }

    func isApplied(_ marks: [UInt16: StreamEntryID]) -> Bool {
        marks.allSatisfy { slot, id in (backlog[slot]?.applied).map { $0 >= id } ?? false }
    }

    mutating func nextAction(now: ContinuousClock.Instant) -> FlushScheduler.LoopAction {
        if stopped { return finish() }
        if let retryAt, now < retryAt { return .sleep(until: retryAt) }
        if shouldFlush(now: now) { return .flush }
        if stopping && !anyWork && uncertain.isEmpty { return finish() }
        return deadline.map { .sleep(until: $0) } ?? .waitForEvent
    }

    private mutating func finish() -> FlushScheduler.LoopAction {
        stopped = true
        defer { waiters = [] }
        return .finish(failWaiters: waiters.map(\.id))
    }

    mutating func appended(_ batches: [UInt16: (count: Int, newest: StreamEntryID)], now: ContinuousClock.Instant) {
        for (slot, batch) in batches {
            var state = backlog[slot, default: Slot()]
            if state.pending == 0 { state.dirtySince = now }
            state.pending += batch.count
            state.appended = max(state.appended ?? batch.newest, batch.newest)
            backlog[slot] = state
        }
    }

    mutating func rescanned(slot: UInt16, length: Int, newest: StreamEntryID?, now: ContinuousClock.Instant) {
        var state = backlog[slot, default: Slot()]
        state.pending = length
        if let newest { state.appended = max(state.appended ?? newest, newest) }
        if length > 0 && state.dirtySince == nil { state.dirtySince = now }
        if length > 0 || state.appended != nil { backlog[slot] = state }
        uncertain.remove(slot)
    }

    /// Settles like the actor did, then takes every waiter now satisfied, oldest first.
    mutating func settle(_ slot: UInt16, removed: Int, applied: StreamEntryID?, stillDirtySince: ContinuousClock.Instant?) -> [WaiterID] {
        var state = backlog[slot, default: Slot()]
        let removed = min(removed, state.pending)
        state.pending -= removed
        if let applied { state.applied = max(state.applied ?? applied, applied) }
        if state.pending == 0 {
            state.dirtySince = nil
        } else if let stillDirtySince {
            state.dirtySince = stillDirtySince
        }
        backlog[slot] = state
        let satisfied = waiters.filter { isApplied($0.marks) }.map(\.id)
        waiters.removeAll { waiter in satisfied.contains(waiter.id) }
        return satisfied
    }

    func plan(now: ContinuousClock.Instant) -> FlushScheduler.FlushPlan? {
        let allDirty = backlog.filter { $0.value.hasWork }
            .sorted { ($0.value.dirtySince ?? now, $0.key) < ($1.value.dirtySince ?? now, $1.key) }
        guard !allDirty.isEmpty else { return nil }
        let perSlot = pendingTotal <= batchSize ? batchSize : max(64, batchSize / allDirty.count)
        // Oldest first until their shares reach the batch: counted by a plain scan.
        var count = 0
        while count < allDirty.count {
            count += 1
            let planned = allDirty.prefix(count).map { min(max($0.value.pending, 1), perSlot) }.reduce(0, +)
            if planned >= batchSize { break }
        }
        return FlushScheduler.FlushPlan(
            slots: allDirty.prefix(count).map { .init(slot: $0.key, pending: $0.value.pending, appended: $0.value.appended) },
            changesPerSlot: perSlot)
    }
}

/// A flusher driven by random events: fake logs (one array of entry ids per slot) stand in for
/// Redis, random failures for broken servers, and the loop is followed as the actor runs it.
private struct FlushSimulation {
    enum Loop: Equatable {
        case awake
        /// Performing a flush: events meanwhile never signal, and the loop asks again after it.
        case flushing
        case asleep(until: ContinuousClock.Instant?, backoff: Bool)
        case finished
    }

    struct Mismatch: Error, CustomStringConvertible {
        let description: String
    }

    let seed: Int
    var random: SeededGenerator
    var scheduler: FlushScheduler
    var reference: ReferenceFlusher
    var now: ContinuousClock.Instant
    var logs: [UInt16: [StreamEntryID]] = [:]
    var nextEntry: UInt64 = 1
    var loop = Loop.awake
    var marks: [FlushScheduler.WaiterID: [UInt16: StreamEntryID]] = [:]
    var failures = true
    var step = 0
    var wakeUps = 0
    var flushes = 0
    static let slots: [UInt16] = [0, 1, 2, 3, 4, 5, 6, 7]

    init(seed: Int, start: ContinuousClock.Instant) {
        self.seed = seed
        random = SeededGenerator(seed: UInt64(seed) &* 7_919 &+ 13)
        var configuration = WritePathConfiguration()
        configuration.flushBatchSize = [40, 150, 1_000][Int(random.next() % 3)]
        configuration.flushInterval = .milliseconds(Int64(50 + random.next() % 400))
        configuration.flushMaxAge = .milliseconds(Int64(20 + random.next() % 600))
        configuration.retryInitialDelay = .milliseconds(10)
        configuration.retryMaximumDelay = .milliseconds(160)
        scheduler = FlushScheduler(configuration: configuration, now: start)
        reference = ReferenceFlusher(configuration: configuration, now: start)
        now = start
    }

    func check(_ condition: Bool, _ what: @autoclosure () -> String) throws {
        if !condition { throw Mismatch(description: "seed \(seed), step \(step): \(what())") }
    }

    mutating func chance(_ percent: UInt64) -> Bool { random.next() % 100 < percent }

    mutating func randomSlot() -> UInt16 { Self.slots[Int(random.next() % UInt64(Self.slots.count))] }

    mutating func newEntries(in slot: UInt16, count: Int) -> StreamEntryID {
        for _ in 0..<count {
            logs[slot, default: []].append(StreamEntryID(milliseconds: nextEntry, sequence: 0))
            nextEntry += 1
        }
        return logs[slot]!.last!
    }

    // MARK: Events from outside the loop

    mutating func append() throws {
        var batches: [UInt16: (count: Int, newest: StreamEntryID)] = [:]
        for _ in 0..<(1 + random.next() % 3) {
            let slot = randomSlot()
            let count = 1 + Int(random.next() % 30)
            batches[slot] = ((batches[slot]?.count ?? 0) + count, newEntries(in: slot, count: count))
        }
        let now = self.now
        let expected = expectedWake(afterEvent: { $0.appended(batches, now: now) })
        try follow(scheduler.appended(batches, now: now), expected: expected, "appended \(batches.mapValues(\.count))")
    }

    /// A write broke mid-way: entries reached the log that nobody noted.
    mutating func lostAppend() throws {
        let slot = randomSlot()
        if chance(70) { _ = newEntries(in: slot, count: 1 + Int(random.next() % 5)) }
        let expected = expectedWake(afterEvent: { _ = $0.uncertain.insert(slot) })
        try follow(scheduler.uncertain([slot]), expected: expected, "uncertain \(slot)")
    }

    /// A `postgres` acknowledgement waits for the newest entry of a slot or two.
    mutating func addRandomWaiter() throws {
        var wanted: [UInt16: StreamEntryID] = [:]
        for _ in 0..<(1 + random.next() % 2) {
            let slot = randomSlot()
            if let entries = logs[slot], let newest = entries.last {
                wanted[slot] = newest
            } else if let known = reference.backlog[slot]?.appended {
                wanted[slot] = known
            }
        }
        try addWaiter(marks: wanted)
    }

    mutating func addWaiter(marks wanted: [UInt16: StreamEntryID]) throws {
        let decision = scheduler.waiterAdded(marks: wanted)
        if reference.isApplied(wanted) {
            try check(decision == .resumeNow, "waiter for applied \(wanted): \(decision)")
        } else if reference.stopped {
            try check(decision == .refuse, "waiter after the end: \(decision)")
        } else {
            guard case .wait(let id, let signal) = decision else { throw Mismatch(description: "seed \(seed), step \(step): waiter \(decision)") }
            let expected = expectedWake(afterEvent: { $0.waiters.append((id, wanted)) })
            marks[id] = wanted
            try follow(signal, expected: expected, "waiter \(wanted)")
        }
    }

    /// What `flushAll` does: read the uncertain logs again, then wait for everything appended.
    mutating func flushAll() throws {
        var failed = false
        for slot in scheduler.slotsToRescan {
            if failures && chance(20) {
                failed = true
                continue
            }
            try rescan(slot)
        }
        if !failed { try addWaiter(marks: scheduler.unflushedMarks) }
        try compareState()
        try turnLoop()
    }

    mutating func stop(drain: Bool) throws {
        let expected = expectedWake(afterEvent: { reference in
            reference.stopping = true
            if !drain { reference.stopped = true }
        })
        try follow(scheduler.stop(drain: drain), expected: expected, "stop(drain: \(drain))")
    }

    mutating func passTime(_ duration: Duration) throws {
        now += duration
        if case .asleep(let deadline?, _) = loop, deadline <= now {
            loop = .awake
        } else if case .asleep(_, false) = loop {
            // Asleep and rightly so: nothing is due yet.
            try check(!reference.shouldFlush(now: now) && !reference.finishDue, "overslept at \(now)")
        }
        try turnLoop()
    }

    /// Applies `event` to the reference and says whether the loop, as it sleeps now, must wake:
    /// the reference would flush or finish, or its deadline is earlier than the one slept until.
    mutating func expectedWake(afterEvent event: (inout ReferenceFlusher) -> Void) -> Bool {
        event(&reference)
        guard case .asleep(let deadline, let backoff) = loop else { return false }
        if backoff { return reference.stopped }
        if reference.finishDue || reference.shouldFlush(now: now) { return true }
        guard let due = reference.deadline else { return false }
        return deadline.map { due < $0 } ?? true
    }

    mutating func follow(_ signal: FlushScheduler.LoopSignal, expected: Bool, _ event: String) throws {
        try check((signal == .wakeLoop) == expected, "\(event) signalled \(signal), the loop being \(loop)")
        if signal == .wakeLoop {
            wakeUps += 1
            loop = .awake
        }
        try compareState()
        try turnLoop()
    }

    // MARK: The loop

    mutating func turnLoop() throws {
        var turns = 0
        while loop == .awake {
            turns += 1
            try check(turns < 500, "the loop turns without end")
            let action = scheduler.nextAction(now: now)
            let expected = reference.nextAction(now: now)
            try check(action == expected, "next action \(action), the reference says \(expected)")
            switch action {
            case .flush:
                flushes += 1
                loop = .flushing
                try flush()
                loop = .awake
            case .sleep(let deadline):
                try check(deadline > now, "sleep until \(deadline), already past at \(now)")
                loop = .asleep(until: deadline, backoff: reference.retryAt.map { now < $0 } ?? false)
            case .waitForEvent:
                loop = .asleep(until: nil, backoff: false)
            case .finish(let failing):
                for id in failing { try check(marks.removeValue(forKey: id) != nil, "\(id) failed twice") }
                loop = .finished
            }
            try compareState()
        }
    }

    /// One flush as the actor performs it, with random failures and appends noted meanwhile.
    mutating func flush() throws {
        var nodeFailure = false
        for slot in scheduler.slotsToRescan {
            if failures && chance(10) {
                nodeFailure = true
                continue
            }
            try rescan(slot)
        }
        let planTime = now
        let plan = scheduler.flushPlan(now: now)
        try check(plan == reference.plan(now: now), "plan \(String(describing: plan)), reference \(String(describing: reference.plan(now: now)))")
        guard let plan else {
            // As the actor does: with nothing to read, a failed rescan is not thrown.
            return succeeded()
        }
        if chance(30) { try append() }
        now += .milliseconds(Int64(random.next() % 5))
        var reads: [(planned: FlushScheduler.FlushPlan.Slot, entries: [StreamEntryID]?)] = []
        for planned in plan.slots {
            if failures && chance(10) {
                nodeFailure = true
                reads.append((planned, nil))
            } else {
                reads.append((planned, Array((logs[planned.slot] ?? []).prefix(plan.changesPerSlot))))
            }
        }
        if chance(30) { try append() }
        for (planned, entries) in reads where entries?.isEmpty == true {
            try settled(
                scheduler.emptyLogRead(planned),
                reference.settle(planned.slot, removed: planned.pending, applied: planned.appended, stillDirtySince: nil))
        }
        var read: [(slot: UInt16, newest: StreamEntryID, count: Int)] = []
        for (planned, entries) in reads {
            if let entries, let newest = entries.last { read.append((planned.slot, newest, entries.count)) }
        }
        guard !read.isEmpty else { return nodeFailure ? try failed() : succeeded() }
        // PostgreSQL refused the transaction: nothing applied, nothing trimmed.
        if failures && chance(5) { return try failed() }
        if chance(20) { try append() }
        for (slot, newest, count) in read {
            var removed = 0
            if !(failures && chance(10)) {
                removed = logs[slot]!.prefix { $0 <= newest }.count
                logs[slot]!.removeFirst(removed)
            }
            let stillDirtySince = count >= plan.changesPerSlot ? nil : planTime
            try settled(
                scheduler.settled(slot: slot, removed: removed, applied: newest, stillDirtySince: stillDirtySince),
                reference.settle(slot, removed: removed, applied: newest, stillDirtySince: stillDirtySince))
        }
        scheduler.flushCommitted(at: now)
        reference.lastFlush = now
        nodeFailure ? try failed() : succeeded()
    }

    mutating func rescan(_ slot: UInt16) throws {
        let entries = logs[slot] ?? []
        let signal = scheduler.rescanned(slot: slot, length: entries.count, newest: entries.last, now: now)
        let now = self.now
        let expected = expectedWake(afterEvent: { $0.rescanned(slot: slot, length: entries.count, newest: entries.last, now: now) })
        try check((signal == .wakeLoop) == expected, "rescan of \(slot) signalled \(signal), the loop being \(loop)")
        if signal == .wakeLoop {
            wakeUps += 1
            loop = .awake
        }
    }

    mutating func settled(_ resumed: [FlushScheduler.WaiterID], _ expected: [FlushScheduler.WaiterID]) throws {
        try check(resumed == expected, "resumed \(resumed), the reference \(expected)")
        for id in resumed {
            let wanted = marks.removeValue(forKey: id)
            try check(wanted.map(reference.isApplied) == true, "\(id) resumed before \(String(describing: wanted)) was applied")
        }
    }

    mutating func succeeded() {
        scheduler.flushSucceeded()
        reference.backoff.reset()
        reference.retryAt = nil
    }

    mutating func failed() throws {
        let delay = scheduler.flushFailed(now: now)
        let expected = reference.backoff.nextDelay()
        reference.retryAt = now + expected
        try check(delay == expected, "retry delay \(delay), the reference \(expected)")
    }

    // MARK: Invariants

    func compareState() throws {
        var sum = 0
        for slot in Self.slots {
            let state = scheduler.backlog(ofSlot: slot) ?? .init()
            let expected = reference.backlog[slot] ?? .init()
            try check(state == expected, "slot \(slot): \(state), the reference \(expected)")
            try check(state.pending >= 0, "slot \(slot) counts \(state.pending)")
            try check(
                scheduler.hasPendingChanges(inSlot: slot) == (reference.uncertain.contains(slot) || expected.hasWork),
                "pending changes of slot \(slot)")
            sum += state.pending
        }
        try check(scheduler.pendingTotal == sum && sum == reference.pendingTotal, "total \(scheduler.pendingTotal), slots sum to \(sum)")
        try check(scheduler.uncertainSlots == reference.uncertain, "uncertain \(scheduler.uncertainSlots), the reference \(reference.uncertain)")
        try check(scheduler.waiterIDs == reference.waiters.map(\.id), "waiters \(scheduler.waiterIDs), the reference \(reference.waiters.map(\.id))")
        try check(reference.waiters.allSatisfy { !reference.isApplied($0.marks) }, "a satisfied waiter still waits")
        try check(scheduler.oldestDirtySince == reference.oldest, "oldest dirty")
        try check(scheduler.lastFlush == reference.lastFlush, "last flush")
        try check(scheduler.unflushedMarks == reference.backlog.filter { $0.value.hasWork }.compactMapValues(\.appended), "unflushed marks")
    }

    // MARK: An episode

    mutating func run(events: Int) throws {
        try turnLoop()
        for event in 0..<events {
            step = event
            switch random.next() % 100 {
            case 0..<40: try append()
            case 40..<47: try lostAppend()
            case 47..<57: try addRandomWaiter()
            case 57..<60: try flushAll()
            default: try passTime(.milliseconds(Int64(random.next() % 120)))
            }
        }
        // The end: no more failures, then stop, and let the loop run out.
        failures = false
        step = events
        let drain = random.next() % 4 != 0
        try stop(drain: drain)
        while loop != .finished {
            step += 1
            try check(step < events + 10_000, "the loop never finishes")
            guard case .asleep(let deadline?, _) = loop else {
                throw Mismatch(description: "seed \(seed): stopping, the loop sleeps with no deadline")
            }
            try passTime(deadline - now)
        }
        try check(marks.isEmpty, "waiters neither resumed nor failed: \(marks)")
        if drain {
            try check(logs.values.allSatisfy(\.isEmpty), "entries left in the logs: \(logs.filter { !$0.value.isEmpty })")
            try check(scheduler.pendingTotal == 0, "\(scheduler.pendingTotal) still counted after the drain")
            try check(Self.slots.allSatisfy { !scheduler.hasPendingChanges(inSlot: $0) }, "work left after the drain")
        }
        try check(scheduler.waiterAdded(marks: [0: StreamEntryID(milliseconds: .max, sequence: 0)]) == .refuse, "a waiter after the end")
    }
}
