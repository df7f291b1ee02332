import CounterCore
import Persistence
import ShardRouter
import Synchronization

/// One shard: owns the posts of its slots and serialises every decision about them.
///
/// The shard is a loop (`run()`, a child of the write path's service) around one
/// `ShardStateMachine`, which only the loop touches: it takes what arrived in the `ShardInbox`,
/// hands each event to the machine, performs the actions the machine asks for — answers and
/// replies at once; the batch's own round trips awaited in the loop; every other I/O (flushes,
/// large posts, epoch keys) as child tasks of the loop (`ShardIO`) whose results come back
/// through the inbox as events — and sleeps until the next arrival or until one of the machine's
/// timers fires (`ShardTimers`: the machine sets and cancels them with actions, and each comes
/// back as `timerFired`). No lock guards the machine and no state is read across an `await`:
/// between two events the machine is the whole truth.
///
/// A batch costs one Redis read round trip (is the post hydrated, its count, the membership of
/// the batch's users), a decision in memory (`ShardDecider`), and one Redis write round trip
/// that carries every change with its write-behind log entry, atomically per slot. Operations
/// that arrive meanwhile queue; the next batch takes all of them (group commit), so thousands
/// of concurrent likes on one post cost a few round trips, not thousands.
final class Shard: Sendable {
    let index: Int
    let inbox: ShardInbox
    private let io: ShardIO
    private let slotRange: Range<Int>
    private let configuration: WritePathConfiguration
    /// Where slot states are published for the rest of the node.
    private let ownership: OwnedSlots
    private let log: NodeLog
    /// When the shard was made: a sole writer serves its slots from then on (what a read of the
    /// dead-letter stream begun since then finds is all it must know: `DeadLetterPins`).
    private let createdAt = ContinuousClock.now

    init(index: Int, slots: Range<Int>, io: ShardIO, configuration: WritePathConfiguration, ownership: OwnedSlots, log: NodeLog) {
        self.index = index
        self.slotRange = slots
        self.io = io
        self.configuration = configuration
        self.ownership = ownership
        self.log = log
        self.inbox = ShardInbox(index: index, limit: max(1, configuration.maximumQueuedOperationsPerShard))
    }

    // MARK: - The loop

    /// Runs the shard until its machine finishes (after `.stop`), then cancels what I/O is
    /// still under way (large posts loading) and returns once every child task has ended.
    func run() async {
        var machine = ShardStateMachine(
            index: index, slotRange: slotRange, configuration: configuration,
            isFenced: ownership.isFenced, now: createdAt)
        let timers = ShardTimers()
        let inbox = self.inbox
        await withDiscardingTaskGroup { group in
            group.addTask { await timers.run { inbox.post(.timerFired($0)) } }
            var actions: [ShardStateMachine.Action] = []
            while !machine.isFinished {
                let (operations, events) = await inbox.take()
                let now = ContinuousClock.now
                if !operations.isEmpty { machine.handle(.operations(operations), now: now, into: &actions) }
                for event in events { machine.handle(event, now: now, into: &actions) }
                // A batch's Redis round trips are awaited here, in the loop, their result taken at
                // once (with whatever arrived meanwhile): a child task per round trip would cost a
                // second wake-up of the pool per reply. Nothing they wait for needs the loop. Its
                // cold lookup in PostgreSQL is a child task: PostgreSQL may not answer for seconds
                // (a cut), and the loop must hear meanwhile that the node stopped deciding.
                while let batchIO = performRound(&actions, machine: &machine, in: &group, timers: timers) {
                    let event = await io.perform(batchIO)
                    let now = ContinuousClock.now
                    if let (operations, events) = inbox.takeIfAny() {
                        if !operations.isEmpty { machine.handle(.operations(operations), now: now, into: &actions) }
                        for event in events { machine.handle(event, now: now, into: &actions) }
                    }
                    if let event { machine.handle(event, now: now, into: &actions) }
                }
            }
            inbox.close(with: machine)
            group.cancelAll()
        }
    }

    /// Ends a round: publishes the slots that moved (before any reply, so a caller that hears
    /// of a move sees it), performs the actions, and returns the batch's I/O action, if any,
    /// for the loop to await.
    private func performRound(
        _ actions: inout [ShardStateMachine.Action], machine: inout ShardStateMachine,
        in group: inout DiscardingTaskGroup, timers: ShardTimers
    ) -> ShardStateMachine.Action? {
        for (slot, state) in machine.takeChangedSlots() { ownership.publish(slot, state.published) }
        inbox.roundEnded(held: machine.heldOperations, operationsWake: machine.wantsOperations)
        var batchIO: ShardStateMachine.Action?
        for action in actions {
            switch action {
            case .batchRedis: batchIO = action
            case .setTimer(let timer, let deadline): timers.set(timer, at: deadline)
            case .cancelTimer(let timer): timers.cancel(timer)
            default: perform(action, in: &group)
            }
        }
        actions.removeAll(keepingCapacity: true)
        return batchIO
    }

    private func perform(_ action: ShardStateMachine.Action, in group: inout DiscardingTaskGroup) {
        switch action {
        case .answer(let answers):
            for (operation, result) in answers { operation.answer(result) }
        case .answerBatch(let operations, let answers):
            for answer in answers { operations[answer.request].answer(answer.result) }
        case .reply(let delivery):
            delivery.run()
        case .log(let line):
            log.log(line.level, line.event, fields: line.fields)
        default:
            let io = self.io
            let inbox = self.inbox
            group.addTask {
                if let event = await io.perform(action) { inbox.post(event) }
            }
        }
    }

    // MARK: - Calls

    /// Queues one operation; `completion` runs once it is answered (on the shard's loop, or at
    /// once when it is refused). Callable from any thread, without waiting.
    func submit(
        _ request: ShardDecider.Request, slot: UInt16? = nil, waitsForSlot: Bool = false,
        completion: @escaping @Sendable (Result<LikeState, Error>) -> Void
    ) {
        inbox.submit(ShardOperation(request, slot: slot, waitsForSlot: waitsForSlot, completion: completion))
    }

    /// Performs one operation and returns the state after it, once acknowledged as configured.
    /// - Throws: `CounterError`.
    func perform(_ request: ShardDecider.Request, slot: UInt16? = nil, waitsForSlot: Bool = false) async throws -> LikeState {
        try await withCheckedThrowingContinuation { continuation in
            submit(request, slot: slot, waitsForSlot: waitsForSlot) { continuation.resume(with: $0) }
        }
    }

    /// Performs several operations (a feed page's reads, say) in one batch and returns one
    /// result per request, in order.
    func performAll(_ requests: [ShardDecider.Request]) async -> [Result<LikeState, Error>] {
        let collector = ResultCollector(count: requests.count)
        return await withCheckedContinuation { continuation in
            collector.onComplete { continuation.resume(returning: $0) }
            for (offset, request) in requests.enumerated() {
                submit(request) { collector.set(offset, $0) }
            }
        }
    }

    /// Posts the event `make` builds around a reply, and returns the reply's value.
    func ask<Value: Sendable>(_ make: (ShardReply<Value>) -> ShardStateMachine.Event) async -> Value {
        await withCheckedContinuation { continuation in
            inbox.post(make(ShardReply { continuation.resume(returning: $0) }))
        }
    }

    /// Posts an event nobody waits on.
    func tell(_ event: ShardStateMachine.Event) {
        inbox.post(event)
    }
}

/// A shard's timers, as its machine sets and cancels them: one task sleeps until the earliest
/// deadline and posts `timerFired` for each timer whose deadline has come (forgetting it). Only
/// a deadline earlier than every other wakes the sleeper, so moving timers costs no wake-up each.
final class ShardTimers: Sendable {
    private let deadlines = Mutex<[ShardStateMachine.Timer: ContinuousClock.Instant]>([:])
    private let alarm = LoopAlarm()

    /// Sets `timer` to fire at `deadline`, replacing its previous deadline.
    func set(_ timer: ShardStateMachine.Timer, at deadline: ContinuousClock.Instant) {
        let sooner = deadlines.withLock { deadlines -> Bool in
            let earliest = deadlines.values.min()
            deadlines[timer] = deadline
            return earliest.map { deadline < $0 } ?? true
        }
        if sooner { alarm.ring() }
    }

    /// Forgets `timer` (the sleeper, if it sleeps until it, wakes to find nothing due).
    func cancel(_ timer: ShardStateMachine.Timer) {
        deadlines.withLock { _ = $0.removeValue(forKey: timer) }
    }

    /// Calls `fire` with each timer whose deadline has come, until cancelled.
    func run(_ fire: @Sendable (ShardStateMachine.Timer) -> Void) async {
        while !Task.isCancelled {
            await alarm.sleep(until: deadlines.withLock { $0.values.min() })
            if Task.isCancelled { return }
            let due = deadlines.withLock { deadlines -> [ShardStateMachine.Timer] in
                let now = ContinuousClock.now
                let due = deadlines.filter { $0.value <= now }.map(\.key).sorted { $0.rawValue < $1.rawValue }
                for timer in due { deadlines[timer] = nil }
                return due
            }
            for timer in due { fire(timer) }
        }
    }
}
