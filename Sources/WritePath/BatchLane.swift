import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// A shard's batch lane as a state machine of its own: operations queue; one batch at a time takes
/// all of them (a group commit, through `BatchStateMachine`); between two batches, one item of
/// work that must not overlap a batch runs at a time (`BetweenBatchesWork`: an eviction, a
/// promotion's publication, a resync, the keys of deleted posts). It also holds who waits for the
/// queue to be decided (barriers), the operations parked on slots that are changing owner, the
/// posts known not to exist (`UnknownPostMemory`), and whether the node may decide at all.
///
/// Its state is private: the router (`ShardStateMachine`) calls the methods below, which are its
/// events; they ask the shell for the batch's I/O with the shard's `Action`s and tell the router,
/// as `Effect`s, what a batch's end means to the other machines: what it wrote (the books), what
/// waits for PostgreSQL (`postgres` acks), and that it ended (hand-offs and repairs waited).
struct BatchLane {
    /// What a batch tells the shard's other machines.
    enum Effect {
        /// The batch's write is done: the write-behind and the hot set book it — before any
        /// answer, so that a caller's flush after its answer covers its change.
        case wrote(BatchStateMachine.Completion, operations: [ShardOperation], epochs: [UInt16: Int64]?)
        /// Operations answered once the entries of `marks` are in PostgreSQL (`postgres` acks).
        case answerWhenApplied([(ShardOperation, LikeState)], marks: [UInt16: StreamEntryID])
        /// The batch is over: what waited for it goes on (hand-offs, repairs).
        case batchEnded
    }

    /// The batch in flight: its machine, its operations (by the machine's request indexes), the
    /// epochs its writes carry (`nil`: unfenced), and its take.
    private struct BatchInFlight {
        var machine: BatchStateMachine
        let operations: [ShardOperation]
        let epochs: [UInt16: Int64]?
        let take: UInt64
        /// With `--ack replicated`: the batch is written and waits for the replicas
        /// (`.awaitReplication`) before it finishes with this.
        var awaitingReplication: BatchStateMachine.Completion?
        /// Its cold lookup is with PostgreSQL (`.findPosts`).
        var waitingForPostgres = false
        /// Slots whose Redis master failed over while the batch ran: what it read of them may
        /// come from the promoted replica before the slot's repair, which lacks what the master
        /// had not replicated, so its answers on them are refused (`slotsFailedOver(_:)`).
        var failedOver: Set<UInt16> = []
        /// Its writes were sent (`.write`): the replies that come next are theirs.
        var writing = false
        /// Which opening of each master's connection carried its writes: the `WAIT` of
        /// `--ack replicated` must ask on those (`RedisClient.waitForReplicas`).
        var writtenOn = RedisOpenings()
    }

    /// What the lane has done, for the shard's statistics.
    struct Counters {
        var operations = 0
        var unreplicatedWrites = 0
        /// What the batches did (group commits, reads, errors).
        var batches = ShardStats()
    }

    // MARK: - State

    private let shard: Int
    private let configuration: WritePathConfiguration
    private let layout: RedisKeyLayout
    private let isFenced: Bool
    /// Operations waiting for the next batch, in arrival order.
    private var queued: [ShardOperation] = []
    /// The batch in flight.
    private var batch: BatchInFlight?
    /// Work that runs between batches, in order, and the item under way.
    private var work: [BetweenBatchesWork] = []
    private(set) var runningWork: BetweenBatchesWork?
    /// Numbers each take of the queue; `lastTakeDone` is the last whose batch ended.
    private var nextTake: UInt64 = 1
    private var lastTakeDone: UInt64 = 0
    /// Callers of `queuedOperationsDone`, with the take they wait for.
    private var barriers: [(take: UInt64, reply: ShardReply<Void>)] = []
    /// Operations on slots that are changing owner, with when they give up.
    private var parked: [UInt16: [(operation: ShardOperation, until: ContinuousClock.Instant)]] = [:]
    /// Posts PostgreSQL does not have, refused without asking it again for a while.
    private var unknownPosts: UnknownPostMemory
    /// Whether this node may decide for its slots: `false` while its cluster lease may be running
    /// out (no renewal got through), when operations on slots it serves are refused.
    private var deciding = true
    /// Whether writes are being refused for the backlog: logged when it starts and ends.
    private var refusingWrites = false
    private(set) var counters = Counters()

    init(shard: Int, configuration: WritePathConfiguration, isFenced: Bool) {
        self.shard = shard
        self.configuration = configuration
        self.layout = RedisKeyLayout(prefix: configuration.keyPrefix)
        self.isFenced = isFenced
        self.unknownPosts = UnknownPostMemory(capacity: max(1, configuration.unknownPostsRemembered), lifetime: configuration.unknownPostMemory)
    }

    // MARK: - What the rest of the shard reads

    /// Whether a batch is in flight.
    var isBatchInFlight: Bool { batch != nil }

    /// Whether neither a batch nor work between batches runs: the next of either may start.
    var isIdle: Bool { batch == nil && runningWork == nil }

    /// Whether everything queued before now is decided and written, and no work waits: what a
    /// stop with a drain waits for before the write-behind drains.
    var isDrained: Bool { queued.isEmpty && isIdle && work.isEmpty }

    /// Operations the lane holds (queued, parked on slots; the batch in flight excluded): they
    /// count toward `maximumQueuedOperationsPerShard`.
    var heldOperations: Int {
        queued.count + parked.values.reduce(0) { $0 + $1.count }
    }

    /// Whether operations arriving now would be looked at before the batch in flight (or the
    /// work between batches) ends: only then need they wake the loop.
    /// While the node does not decide, arrivals are refused at once (`arrived`), so they wake it.
    var wantsOperations: Bool { isIdle || !deciding }

    /// When the first parked operation gives up (the `parkedOperations` timer).
    var parkedDeadline: ContinuousClock.Instant? {
        var earliest: ContinuousClock.Instant?
        for waiting in parked.values {
            if let first = waiting.first?.until { earliest = min(earliest ?? first, first) }
        }
        return earliest
    }

    // MARK: - Arrivals

    /// Queues `operations` for the next batch; refuses them while the shard stops (`accepting`
    /// false), those this node would decide while it may not (its lease may be running out —
    /// they would otherwise wait behind a batch or work held up by what keeps the lease from
    /// being renewed), and writes while the backlog waiting for PostgreSQL is at its limit
    /// (`pending` changes, or the age of the oldest).
    mutating func arrived(
        _ arrivals: [ShardOperation], accepting: Bool, slots: SlotOwnership, pending: Int, oldestPendingAge age: Duration?,
        into actions: inout [ShardStateMachine.Action]
    ) {
        guard accepting else {
            let refusal = CounterError(code: .shuttingDown, message: "the node is shutting down")
            actions.append(.answer(arrivals.map { ($0, .failure(refusal)) }))
            return
        }
        var operations = arrivals
        if !deciding {
            var refused: [(ShardOperation, Result<LikeState, CounterError>)] = []
            operations.removeAll { operation in
                guard slots.state(of: operation.slot).admission == .decide else { return false }
                refused.append((operation, .failure(ShardStateMachine.leaseLapsed)))
                return true
            }
            if !refused.isEmpty { actions.append(.answer(refused)) }
            guard !operations.isEmpty else { return }
        }
        let limit = configuration.backlogLimitPerShard
        let tooOld = configuration.backlogMaximumAge.flatMap { maximum in age.map { $0 >= maximum } } ?? false
        if pending < limit && !tooOld {
            if refusingWrites {
                refusingWrites = false
                actions.append(.log(ShardLogLine(.info, "writes_accepted", [("shard", String(shard)), ("pending_changes", String(pending))])))
            }
            if queued.isEmpty { queued = operations } else { queued.append(contentsOf: operations) }
            counters.operations += operations.count
            return
        }
        var refused: [(ShardOperation, Result<LikeState, CounterError>)] = []
        let waited = Int((age ?? .zero).inSeconds)
        let why =
            pending >= limit
            ? "\(pending) changes of this shard wait for PostgreSQL (limit \(limit)); retry later"
            : "the oldest change of this shard has waited \(waited) s for PostgreSQL (limit \(Int((configuration.backlogMaximumAge ?? .zero).inSeconds)) s); retry later"
        for operation in operations {
            if operation.request.operation.mayWrite {
                refused.append((operation, .failure(CounterError(code: .backlogFull, message: why, retryAfterSeconds: 1))))
            } else {
                queued.append(operation)
                counters.operations += 1
            }
        }
        guard !refused.isEmpty else { return }
        if !refusingWrites {
            refusingWrites = true
            actions.append(
                .log(
                    ShardLogLine(
                        .warn, "writes_refused",
                        [
                            ("shard", String(shard)), ("pending_changes", String(pending)), ("backlog_limit", String(limit)),
                            ("oldest_pending_age_s", String(waited)),
                            ("why", "PostgreSQL is behind; writes get 503 backlog_full until the flusher catches up"),
                        ])))
        }
        actions.append(.answer(refused))
    }

    /// A caller of `queuedOperationsDone` waits for the take that holds what is queued now (or
    /// the batch in flight); answered at once when nothing is.
    mutating func addBarrier(_ reply: ShardReply<Void>, into actions: inout [ShardStateMachine.Action]) {
        let take = queued.isEmpty ? (batch?.take ?? lastTakeDone) : nextTake
        if take <= lastTakeDone {
            actions.append(.reply(reply.with(())))
        } else {
            barriers.append((take, reply))
        }
    }

    /// Answers the barriers whose take has ended (after every event).
    mutating func resolveBarriers(into actions: inout [ShardStateMachine.Action]) {
        guard !barriers.isEmpty else { return }
        let done = lastTakeDone
        barriers.removeAll { barrier in
            guard barrier.take <= done else { return false }
            actions.append(.reply(barrier.reply.with(())))
            return true
        }
    }

    // MARK: - A batch

    /// Takes everything queued: operations on posts known not to exist are refused, those on
    /// slots changing owner wait for the slot (or go elsewhere); the rest is the next batch,
    /// under the epochs its slots have now — so a batch whose slot changes owner meanwhile (even
    /// back to this node) is refused rather than written on reads made under another owner.
    mutating func startBatch(now: ContinuousClock.Instant, slots: SlotOwnership, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        guard isIdle, !queued.isEmpty else { return [] }
        let taken = queued
        queued = []
        let take = nextTake
        nextTake += 1
        if !unknownPosts.isEmpty { unknownPosts.dropExpired(at: now) }
        // `live` stays `nil` while every operation taken so far goes into the batch: then the
        // batch is `taken` itself, with no copy.
        var live: [ShardOperation]?
        var epochs: [UInt16: Int64] = [:]
        var refused: [(ShardOperation, Result<LikeState, CounterError>)] = []
        let slotWait = now + configuration.slotMoveWait
        let checkUnknown = !unknownPosts.isEmpty
        for (offset, operation) in taken.enumerated() {
            let slot = operation.slot
            let state = slots.state(of: slot)
            if !deciding, state.admission == .decide {
                // The node's lease may be running out (it cannot renew it): another node may
                // soon decide for this slot.
                if live == nil { live = Array(taken[..<offset]) }
                refused.append((operation, .failure(ShardStateMachine.leaseLapsed)))
                continue
            }
            var plain = state.admission == .decide
            if plain, checkUnknown, unknownPosts.isUnknown(operation.request.postID, at: now) { plain = false }
            if plain {
                if isFenced, let epoch = state.batchEpoch, epochs[slot] == nil { epochs[slot] = epoch }
                live?.append(operation)
                continue
            }
            if live == nil { live = Array(taken[..<offset]) }
            switch state.admission {
            case .decide:
                refused.append((operation, .failure(.unknownPost(operation.request.postID))))
            case .wait:
                parked[slot, default: []].append((operation, slotWait))
            case .elsewhere:
                if operation.waitsForSlot {
                    parked[slot, default: []].append((operation, slotWait))
                } else {
                    refused.append((operation, .failure(.notOwner(slot))))
                }
            }
        }
        if !refused.isEmpty { actions.append(.answer(refused)) }
        let batchOperations = live ?? taken
        guard !batchOperations.isEmpty else {
            lastTakeDone = take
            return []
        }
        var machine = BatchStateMachine(
            requests: batchOperations.map(\.request), acknowledgement: configuration.acknowledgement, layout: layout,
            warmThreshold: configuration.warmThreshold, reactions: configuration.reactions)
        let action = machine.start()
        batch = BatchInFlight(machine: machine, operations: batchOperations, epochs: isFenced ? epochs : nil, take: take)
        return follow(action, now: now, into: &actions)
    }

    /// Gives what the batch's machine settled, then performs its next step.
    private mutating func follow(
        _ action: BatchStateMachine.Action, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        guard let current = batch else { return [] }
        settle(batch!.machine.takeSettled(), of: current, now: now, into: &actions)
        switch action {
        case .read(let groups):
            actions.append(.batchRedis(groups, epochs: nil))
        case .write(let groups):
            batch!.writing = true
            actions.append(.batchRedis(groups, epochs: current.epochs))
        case .findPosts(let lookup):
            batch!.waitingForPostgres = true
            actions.append(.findPosts(lookup, take: current.take))
        case .finish(let completion):
            counters.batches.record(completion.statistics)
            let wrote = Effect.wrote(completion, operations: current.operations, epochs: current.epochs)
            if configuration.acknowledgement == .replicated, !completion.appended.isEmpty, !completion.answers.isEmpty {
                // The books learn of the write at once (a flush, an eviction, a list must know
                // what is in the logs); the answers wait for the replicas, and so does the next
                // batch, whose writes would queue behind the `WAIT` on the same connections anyway.
                batch!.awaitingReplication = completion
                actions.append(
                    .awaitReplication(
                        slots: completion.appended.keys.sorted(), replicas: configuration.acknowledgementReplicas,
                        timeout: configuration.acknowledgementReplicaTimeout, writtenOn: current.writtenOn))
                return [wrote]
            }
            return [wrote] + end(current, answering: completion, into: &actions)
        }
        return []
    }

    /// The batch's Redis groups answered.
    mutating func redisReplied(
        _ results: [Result<[RedisReply], RedisError>], openings: RedisOpenings = RedisOpenings(), now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        guard batch != nil, batch!.awaitingReplication == nil, !batch!.waitingForPostgres else {
            ShardStateMachine.unexpected("a batch's Redis replies while no batch waits for Redis", shard: shard, state: laneState, into: &actions)
            return []
        }
        if batch!.writing { batch!.writtenOn.merge(openings) }
        let next = batch!.machine.redisReplied(results)
        return follow(next, now: now, into: &actions)
    }

    /// The batch's cold lookup answered. The lookup of a batch given up (its node stopped
    /// deciding) may come back late: then it changes nothing.
    mutating func postsFound(
        take: UInt64, _ result: Result<ColdLookup.Found, Error>, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        guard batch?.take == take, batch?.waitingForPostgres == true else { return [] }
        batch!.waitingForPostgres = false
        let next: BatchStateMachine.Action
        switch result {
        case .success(let found): next = batch!.machine.postsFound(found)
        case .failure(let error): next = batch!.machine.postgresFailed(error)
        }
        return follow(next, now: now, into: &actions)
    }

    /// The replicas confirmed the batch's writes, or did not in time: then its writes are
    /// answered `not_replicated` (they are written and logged all the same).
    mutating func replicationAwaited(_ outcome: ReplicationOutcome, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        guard let current = batch, var completion = current.awaitingReplication else {
            ShardStateMachine.unexpected("replicas awaited while no batch waits for them", shard: shard, state: laneState, into: &actions)
            return []
        }
        if !outcome.confirmed {
            let error = CounterError(
                code: .notReplicated,
                message:
                    "the change is written on its Redis master but not confirmed on \(configuration.acknowledgementReplicas) replica(s) within \(configuration.acknowledgementReplicaTimeout) (\(outcome.detail)); it stands unless that master fails first: read the state before repeating a toggle",
                retryAfterSeconds: 1)
            var refused = 0
            completion.answers = completion.answers.map { answer in
                guard case .success = answer.result, current.operations[answer.request].request.operation.writes else { return answer }
                refused += 1
                return BatchStateMachine.Answer(request: answer.request, result: .failure(error))
            }
            counters.unreplicatedWrites += refused
            actions.append(
                .log(ShardLogLine(.warn, "not_replicated", [("shard", String(shard)), ("answers", String(refused)), ("detail", outcome.detail)])))
        }
        return end(current, answering: completion, into: &actions)
    }

    /// These slots' Redis master failed over while the batch runs. The batch may read a slot
    /// from the promoted replica before the slot is repaired: an answer decided on what that
    /// replica lacks — an unlike found already done because the like it undoes was lost — would
    /// contradict a change acknowledged before, even one PostgreSQL has. Its answers on these
    /// slots are refused (`lostInFailover`: the outcome is unknown, read before repeating);
    /// what it wrote stays in the slot's log, which the repair drains.
    mutating func slotsFailedOver(_ slots: Set<UInt16>) {
        guard batch != nil, !slots.isEmpty else { return }
        batch!.failedOver.formUnion(slots)
    }

    /// `answers`, with those on slots that failed over during the batch refused.
    private func refusingFailedOver(_ answers: [BatchStateMachine.Answer], of current: BatchInFlight) -> [BatchStateMachine.Answer] {
        guard !current.failedOver.isEmpty else { return answers }
        return answers.map { answer in
            guard case .success = answer.result, current.failedOver.contains(current.operations[answer.request].slot) else { return answer }
            return BatchStateMachine.Answer(request: answer.request, result: .failure(ShardStateMachine.lostInFailover))
        }
    }

    /// Answers due now, and posts found missing (remembered).
    private mutating func settle(
        _ settled: BatchStateMachine.Settled, of current: BatchInFlight, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) {
        if !settled.missingPosts.isEmpty { unknownPosts.remember(settled.missingPosts, at: now) }
        if !settled.answers.isEmpty { actions.append(.answerBatch(current.operations, refusingFailedOver(settled.answers, of: current))) }
    }

    /// The batch is over: its answers, and what waited for it to end.
    private mutating func end(
        _ current: BatchInFlight, answering completion: BatchStateMachine.Completion,
        into actions: inout [ShardStateMachine.Action]
    ) -> [Effect] {
        batch = nil
        lastTakeDone = current.take
        var answers = completion.answers
        var waiting = completion.afterApplied?.answers ?? []
        if !current.failedOver.isEmpty {
            let failedOver = { (answer: BatchStateMachine.Answer) in current.failedOver.contains(current.operations[answer.request].slot) }
            answers = refusingFailedOver(answers + waiting.filter(failedOver), of: current)
            waiting.removeAll(where: failedOver)
        }
        if !answers.isEmpty { actions.append(.answerBatch(current.operations, answers)) }
        var effects: [Effect] = []
        if let marks = completion.afterApplied?.marks {
            let answers = waiting.compactMap { answer -> (ShardOperation, LikeState)? in
                guard case .success(let state) = answer.result else { return nil }
                return (current.operations[answer.request], state)
            }
            effects.append(.answerWhenApplied(answers, marks: marks))
        }
        effects.append(.batchEnded)
        return effects
    }

    /// Whether the node may decide for its slots. When it may not (its lease may be running
    /// out), it says so at once to what waits for a decision: the operations queued, and a batch
    /// waiting for PostgreSQL — it has written nothing yet, and PostgreSQL may not answer for
    /// seconds (the cut that kept the lease from being renewed).
    mutating func setDeciding(_ deciding: Bool, now: ContinuousClock.Instant, into actions: inout [ShardStateMachine.Action]) -> [Effect] {
        self.deciding = deciding
        guard !deciding else { return [] }
        if !queued.isEmpty {
            actions.append(.answer(queued.map { ($0, .failure(ShardStateMachine.leaseLapsed)) }))
            queued = []
        }
        guard let current = batch else { return [] }
        if current.waitingForPostgres {
            return postsFound(take: current.take, .failure(ShardStateMachine.leaseLapsed), now: now, into: &actions)
        }
        // A batch waiting for Redis answers now. Its round trip is awaited in the shard's loop
        // (for at most `batchRedisTimeout`), so this is heard when the reply is back but before
        // the batch takes it: what it read is not decided on (nothing is written), and what it
        // wrote is answered as unknown. The batch itself goes on.
        guard current.awaitingReplication == nil else { return [] }
        let answers = batch!.machine.giveUpAnswers(notDecided: ShardStateMachine.leaseLapsed, maybeWritten: Self.lapsedWhileWriting)
        if !answers.isEmpty { actions.append(.answerBatch(current.operations, answers)) }
        return []
    }

    /// The answer to a request whose write was sent to Redis when the node stopped deciding.
    static let lapsedWhileWriting = CounterError(
        code: .unavailable,
        message:
            "this node cannot renew its cluster lease and stops deciding; the change was sent to Redis, which has not answered: it may or may not have been made — read the state before repeating a toggle",
        retryAfterSeconds: 1)

    // MARK: - Operations waiting for their slot

    /// Operations parked on `slot` go to the front of the queue (the slot is served now).
    mutating func admitParked(_ slot: UInt16) {
        guard let waiting = parked.removeValue(forKey: slot) else { return }
        queued.insert(contentsOf: waiting.map(\.operation), at: 0)
    }

    /// Operations parked on `slot` are refused: another node decides them.
    mutating func refuseParked(_ slot: UInt16, into actions: inout [ShardStateMachine.Action]) {
        guard let waiting = parked.removeValue(forKey: slot) else { return }
        let refusal = CounterError.notOwner(slot)
        actions.append(.answer(waiting.map { ($0.operation, .failure(refusal)) }))
    }

    /// Every parked operation is refused with `error` (the shard stops).
    mutating func refuseAllParked(_ error: CounterError, into actions: inout [ShardStateMachine.Action]) {
        var refused: [(ShardOperation, Result<LikeState, CounterError>)] = []
        for (_, waiting) in parked { refused += waiting.map { ($0.operation, .failure(error)) } }
        parked = [:]
        if !refused.isEmpty { actions.append(.answer(refused)) }
    }

    /// Parked operations whose wait has run out are refused (the `parkedOperations` timer):
    /// `slotMoving` while the slot changes owner, `notOwner` when it never came here.
    mutating func expireParked(now: ContinuousClock.Instant, slots: SlotOwnership, into actions: inout [ShardStateMachine.Action]) {
        guard !parked.isEmpty else { return }
        var refused: [(ShardOperation, Result<LikeState, CounterError>)] = []
        for slot in Array(parked.keys) {
            var remaining = parked[slot]!
            let expired = remaining.prefix { $0.until <= now }
            guard !expired.isEmpty else { continue }
            remaining.removeFirst(expired.count)
            let refusal: CounterError =
                slots.state(of: slot) == .notOwned
                ? .notOwner(slot)
                : CounterError(
                    code: .slotMoving,
                    message: "slot \(slot) is changing owner and did not settle within \(configuration.slotMoveWait); nothing was done",
                    retryAfterSeconds: 1)
            refused += expired.map { ($0.operation, .failure(refusal)) }
            parked[slot] = remaining.isEmpty ? nil : remaining
        }
        if !refused.isEmpty { actions.append(.answer(refused)) }
    }

    // MARK: - Posts known not to exist

    /// PostgreSQL does not have `posts`: refused without asking it again for a while.
    mutating func rememberMissing(_ posts: [Int64], now: ContinuousClock.Instant) {
        unknownPosts.remember(posts, at: now)
    }

    /// Forget that these posts were found missing.
    mutating func recheckExistence(_ posts: [Int64]) {
        unknownPosts.remove(posts)
    }

    // MARK: - Work between batches

    /// Queues work that must not overlap a batch.
    mutating func enqueue(_ item: BetweenBatchesWork) {
        work.append(item)
    }

    /// Whether work waits to run between batches.
    var hasQueuedWork: Bool { !work.isEmpty }

    /// The next item of work to run, taken from the queue (`nil`: none waits, or something runs).
    mutating func takeWork() -> BetweenBatchesWork? {
        guard isIdle, !work.isEmpty else { return nil }
        return work.removeFirst()
    }

    /// The item under way (it occupies the lane until `workEnded`), or its next step.
    mutating func workRuns(_ item: BetweenBatchesWork) {
        runningWork = item
    }

    /// The item under way ended: the next item, or batch, may start.
    mutating func workEnded() {
        runningWork = nil
    }

    // MARK: - The end

    /// The shard's loop ends: the operations queued (and those parked since the stop began) are
    /// refused, the barriers answered, and the callers of queued work told nothing was done.
    mutating func finish(into actions: inout [ShardStateMachine.Action]) {
        refuseAllParked(ShardStateMachine.stopped, into: &actions)
        let refused: [(ShardOperation, Result<LikeState, CounterError>)] = queued.map { ($0, .failure(ShardStateMachine.stopped)) }
        queued = []
        if !refused.isEmpty { actions.append(.answer(refused)) }
        for barrier in barriers { actions.append(.reply(barrier.reply.with(()))) }
        barriers = []
        for item in work + (runningWork.map { [$0] } ?? []) {
            switch item {
            case .resync(_, let reply), .resyncUnloading(_, let reply): actions.append(.reply(reply.with([])))
            case .probe(_, let reply): actions.append(.reply(reply.with(.failure(ShardStateMachine.stopped))))
            case .publish, .dropDeleted, .evict: break
            }
        }
        work = []
        runningWork = nil
    }

    /// The lane's state in words, for a log line about an event it did not expect.
    private var laneState: String {
        if let batch {
            return
                "batch \(batch.take)\(batch.waitingForPostgres ? " (waiting for PostgreSQL)" : "")\(batch.awaitingReplication != nil ? " (waiting for replicas)" : "")"
        }
        if let runningWork { return "between batches: \(runningWork)" }
        return "idle"
    }
}

/// Work that must not overlap a batch.
enum BetweenBatchesWork {
    /// Publish (or discard) a large post whose load ended.
    case publish(post: Int64)
    /// Reset posts' keys, those whose slots have nothing pending.
    case resync([Int64], ShardReply<Set<Int64>>)
    /// A resync deleting the keys of its quiet posts (only ever under way, never queued).
    case resyncUnloading([Int64], ShardReply<Set<Int64>>)
    /// Delete the keys of posts PostgreSQL no longer has.
    case dropDeleted([Int64])
    /// Delete the keys of posts PostgreSQL has all of (eviction): judged again as it starts,
    /// which gives the epochs the deletion carries.
    case evict([Int64], EvictionReason)
    /// An operator's look at posts, read while no batch writes them.
    case probe(PostProbe, ShardReply<Result<PostProbeResult, Error>>)
}
