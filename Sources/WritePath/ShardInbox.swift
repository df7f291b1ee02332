import Synchronization

/// What reaches one shard from any thread — operations, callers' requests, the results of the
/// shard's own actions — kept under one lock until the shard's loop takes it all at once. The
/// HTTP thread adds an operation here without a hop; the loop sleeps while nothing waits.
///
/// It also bounds what a shard holds: an operation is refused (`overloaded`) while the inbox
/// and the shard's machine hold `maximumQueuedOperationsPerShard` operations between them.
/// After the loop has finished, what still arrives is answered by the machine as it finished
/// (`ShardStateMachine` refuses operations and answers every caller at once).
final class ShardInbox: Sendable {
    private struct State {
        var operations: [ShardOperation] = []
        var events: [ShardStateMachine.Event] = []
        /// Operations the machine holds (queued or parked), as of its last round.
        var held = 0
        /// Whether an operation wakes the sleeping loop: not while a batch is in flight (the
        /// loop takes what queued when the batch's answer wakes it), so a stream of arrivals
        /// costs a wake-up per batch, not one per operation.
        var operationsWake = true
        /// The loop, asleep until something arrives.
        var sleeper: CheckedContinuation<Void, Never>?
        /// The machine as the loop ended: later arrivals are answered by it. (`hasFinished` is
        /// what the hot path reads: looking at the optional itself copies the machine.)
        var finished: ShardStateMachine?
        var hasFinished = false
    }

    private let state = Mutex(State())
    private let limit: Int
    private let index: Int

    /// An inbox that refuses operations beyond `limit` held (`maximumQueuedOperationsPerShard`).
    init(index: Int, limit: Int) {
        self.index = index
        self.limit = limit
    }

    /// Adds an operation for the next batch, or answers it at once when the shard holds as
    /// many as it may (or has finished).
    func submit(_ operation: ShardOperation) {
        var overloaded = false
        var afterEnd: [ShardStateMachine.Action] = []
        let sleeper = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.hasFinished {
                state.finished!.handle(.operations([operation]), now: .now, into: &afterEnd)
                return nil
            }
            if state.operations.count + state.held >= limit {
                overloaded = true
                return nil
            }
            state.operations.append(operation)
            guard state.operationsWake else { return nil }
            defer { state.sleeper = nil }
            return state.sleeper
        }
        sleeper?.resume()
        if overloaded {
            operation.answer(
                .failure(
                    CounterError(
                        code: .overloaded, message: "shard \(index) already holds \(limit) operations waiting to be decided; retry later",
                        retryAfterSeconds: 1)))
        }
        Self.deliver(afterEnd)
    }

    /// Adds an event for the loop (after the loop's end, the finished machine answers it).
    func post(_ event: ShardStateMachine.Event) {
        var afterEnd: [ShardStateMachine.Action] = []
        let sleeper = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.hasFinished {
                state.finished!.handle(event, now: .now, into: &afterEnd)
                return nil
            }
            state.events.append(event)
            defer { state.sleeper = nil }
            return state.sleeper
        }
        sleeper?.resume()
        Self.deliver(afterEnd)
    }

    /// Everything that arrived, once something has; sleeps until then.
    func take() async -> (operations: [ShardOperation], events: [ShardStateMachine.Event]) {
        while true {
            if let taken = takeIfAny() { return taken }
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Bool in
                    if !state.operations.isEmpty || !state.events.isEmpty { return true }
                    state.sleeper = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// Everything that arrived, or `nil` when nothing has (never sleeps).
    func takeIfAny() -> (operations: [ShardOperation], events: [ShardStateMachine.Event])? {
        state.withLock { state in
            guard !state.operations.isEmpty || !state.events.isEmpty else { return nil }
            defer {
                state.operations = []
                state.events = []
            }
            return (state.operations, state.events)
        }
    }

    /// After a round of the loop: the operations the machine holds now (counted toward the
    /// limit), and whether arriving operations should wake the loop.
    func roundEnded(held: Int, operationsWake: Bool) {
        state.withLock { state in
            state.held = held
            state.operationsWake = operationsWake
        }
    }

    /// The loop has ended with `machine`: what arrived meanwhile, and whatever arrives later, is
    /// answered by it.
    func close(with machine: ShardStateMachine) {
        var afterEnd: [ShardStateMachine.Action] = []
        state.withLock { state in
            var finished = machine
            if !state.operations.isEmpty { finished.handle(.operations(state.operations), now: .now, into: &afterEnd) }
            for event in state.events { finished.handle(event, now: .now, into: &afterEnd) }
            state.operations = []
            state.events = []
            state.finished = finished
            state.hasFinished = true
        }
        Self.deliver(afterEnd)
    }

    /// Runs the answers and replies of a finished machine (it asks for nothing else).
    private static func deliver(_ actions: [ShardStateMachine.Action]) {
        for action in actions {
            switch action {
            case .answer(let answers): for (operation, result) in answers { operation.answer(result) }
            case .answerBatch(let operations, let answers): for answer in answers { operations[answer.request].answer(answer.result) }
            case .reply(let delivery): delivery.run()
            default: break
            }
        }
    }
}
