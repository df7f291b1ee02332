import CounterCore
import Foundation
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter

/// Everything one shard decides, as a state machine: events in, actions out. No I/O, no clock
/// (time comes with each event), no suspension — `Shard` performs each action and feeds its
/// result back as an event, so no state is read across an `await` without the machine knowing.
///
/// A shard is the one owner of its slots: of the decisions of their batches (`BatchStateMachine`,
/// one batch at a time, a group commit), of their write-behind (`FlushScheduler`'s books and one
/// flush at a time, `FlushRun`), of their ownership (`SlotLifecycle`, the only place a slot
/// moves), of the posts loading in the background and of those known not to exist
/// (`UnknownPostMemory`). Work that must not overlap a batch (publishing a large post, resetting
/// or dropping posts' Redis keys) runs between batches, one item at a time.
///
/// The extensions hold the parts: `+Events` (the events and actions), `+Batches` (operations, batches, large posts), `+Slots`
/// (claims, hand-offs, fences), `+Flushes` (the flush loop and its steps, waiters),
/// `+BetweenBatches` (resync, dropped posts, publication, log lengths).
struct ShardStateMachine {
    // MARK: - Configuration

    let index: Int
    let configuration: WritePathConfiguration
    let layout: RedisKeyLayout
    /// The slots this shard owns.
    let slotRange: Range<Int>
    /// Whether writes carry epochs (`false` for a sole writer: every slot served under 0).
    let isFenced: Bool

    // MARK: - State

    /// Each slot's ownership, by slot number minus `slotRange.lowerBound`.
    var slots: [SlotLifecycle.State]
    /// Slots whose state changed since the shell last took them (`takeChangedSlots()`).
    var changedSlots: Set<UInt16> = []
    /// The slots waiting for the batch in flight to end before their hand-off's flush.
    var quiescingSlots: Set<UInt16> = []
    /// What waits in each slot's log, who waits for it, when to flush.
    var scheduler: FlushScheduler
    /// Posts PostgreSQL does not have, refused without asking it again for a while.
    var unknownPosts: UnknownPostMemory
    /// The posts this shard holds in Redis, least recently touched first, for eviction.
    var hotPosts = HotPosts()
    /// When idle posts are looked for next (`+Eviction`).
    var nextEvictionCheck: ContinuousClock.Instant
    /// Posts with changes in the dead-letter stream, which stay in Redis (`+Eviction`).
    var deadLetterPins: DeadLetterPins
    /// The changes logged and not yet applied, by post and by user, for the lists (`+Lists`).
    var pendingLikes = PendingLikes()
    /// Whether this node may decide for its slots: `false` while its cluster lease may be
    /// running out (no renewal got through), when operations on slots it serves are refused.
    var deciding = true
    /// Slots whose log read empty while entries were noted in it, while PostgreSQL's progress
    /// of them is read (`+Flushes`).
    var verifyingEmptyLogs: [UInt16: FlushScheduler.FlushPlan.Slot] = [:]
    /// Slots being repaired after their Redis master failed over, and the repairs finished
    /// since they were last logged (`+Repair`).
    var repairs: [UInt16: SlotRepair] = [:]
    var repairsDone = RepairTotals()
    /// Slots whose master failed over while a batch was in flight: repaired once it ends, so
    /// that nothing it reads before the repair is written after it (`+Repair`).
    var failoversAfterBatch: Set<UInt16> = []
    /// Slots whose log a drain is reading or waiting on (a claim's or a repair's): one at a time.
    var slotsDraining: Set<UInt16> = []
    /// Slots whose master failed over while they were not served here, with when: a claim of
    /// one within `failoverMemory` repairs it before serving it (`+Repair`).
    var recentFailovers: [UInt16: ContinuousClock.Instant] = [:]

    /// Operations waiting for the next batch, in arrival order.
    var queued: [ShardOperation] = []
    /// The batch in flight.
    var batch: BatchInFlight?
    /// Numbers each take of the queue; `lastTakeDone` is the last whose batch ended.
    var nextTake: UInt64 = 1
    var lastTakeDone: UInt64 = 0
    /// Callers of `queuedOperationsDone`, with the take they wait for.
    var barriers: [(take: UInt64, reply: ShardReply<Void>)] = []
    /// Operations on slots that are changing owner, with when they give up.
    var slotParked: [UInt16: [(operation: ShardOperation, until: ContinuousClock.Instant)]] = [:]
    /// Warm posts being promoted: loaded whole in the background.
    var largeLoads: [Int64: LargeLoad] = [:]
    /// Per warm post, the memberships of its users looked up in PostgreSQL since it turned warm
    /// (or since this process started): at `warmPromotionLookups` it is loaded whole.
    var warmLookups: [Int64: Int] = [:]
    /// While a sweep walks Redis's markers: the posts evicted since it began (a page it read
    /// before their deletion would otherwise bring them back as hot). `nil` between walks.
    var evictedDuringDiscovery: Set<Int64>?
    /// Work that runs between batches, in order, and the item under way.
    var betweenBatches: [BetweenBatchesWork] = []
    var betweenBatchesRunning: BetweenBatchesWork?

    /// The flush under way, and whether the flush loop sleeps (and until when).
    var flush: FlushRun?
    var flushLoop: FlushLoop = .awake
    /// Who waits for what to reach PostgreSQL, by the scheduler's ids.
    var waiters: [FlushScheduler.WaiterID: Waiter] = [:]
    /// `flushAll` and drains that wait for the uncertain logs to be read first.
    var afterRescan: [AfterRescan] = []
    /// Claims and hand-offs under way, with the callers waiting for them.
    var claims: [ClaimRecord] = []
    var releases: [ReleaseRecord] = []
    /// Epoch keys to raise, gathered while slots move in one event.
    var pendingClaimRaises: [UInt16: Int64] = [:]
    var pendingHandOffRaises: [UInt16: Int64] = [:]

    /// What the shard has done, for `stats`.
    var stats = ShardStats()
    /// Whether writes are being refused for the backlog: logged when it starts and ends.
    var refusingWrites = false
    /// The age of the oldest waiting change as last looked at, and when: finding it walks the
    /// shard's slots, so arrivals look again at most every `backlogAgeRecheck`.
    var backlogAge: (checkedAt: ContinuousClock.Instant, age: Duration?)?
    static let backlogAgeRecheck: Duration = .milliseconds(100)
    /// Failed flush attempts in a row, for the log.
    var flushFailuresInARow = 0
    /// Whether operations are refused (`stop`), and whether the flusher was told to stop.
    var accepting = true
    var stopRequested: Bool? = nil
    var schedulerStopped = false
    /// The loop's end: nothing more will be done.
    private(set) var isFinished = false

    // MARK: - Parts of the state

    /// The batch in flight: its machine, its operations (by the machine's request indexes),
    /// the epochs its writes carry (`nil`: unfenced), and its take.
    struct BatchInFlight {
        var machine: BatchStateMachine
        let operations: [ShardOperation]
        let epochs: [UInt16: Int64]?
        let take: UInt64
        /// With `--ack replicated`: the batch is written and waits for the replicas
        /// (`.awaitReplication`) before it finishes with this.
        var awaitingReplication: BatchStateMachine.Completion?
        /// Its cold lookup is with PostgreSQL (`.findPosts`).
        var waitingForPostgres = false
    }

    /// One warm post being promoted: loaded whole in the background while it answers warm.
    struct LargeLoad {
        enum Phase {
            case waiting
            case loading
            case loaded(LargePostHydration, Result<Int, Error>)
            case publishing(LargePostHydration, loaded: Int)
        }
        /// The epoch held as the batch that started the promotion began (`nil` for a sole
        /// writer): the load is published only under it.
        let epoch: Int64?
        var phase = Phase.waiting
        /// Redis's copy of the post was reset or dropped meanwhile: the load is not published.
        var cancelled = false
        let started: ContinuousClock.Instant

        var isRunning: Bool {
            if case .waiting = phase { return false }
            return true
        }
    }

    /// Work that must not overlap a batch.
    enum BetweenBatchesWork {
        /// Publish (or discard) a large post whose load ended.
        case publish(post: Int64)
        /// Reset posts' keys, those whose slots have nothing pending.
        case resync([Int64], ShardReply<Set<Int64>>)
        /// A resync deleting the keys of its quiet posts.
        case resyncUnloading([Int64], ShardReply<Set<Int64>>)
        /// Delete the keys of posts PostgreSQL no longer has.
        case dropDeleted([Int64])
        /// Delete the keys of posts PostgreSQL has all of (eviction): judged again as it starts,
        /// which gives the epochs the deletion carries.
        case evict([Int64], EvictionReason)
    }

    /// Whether the flush loop is awake (it asks the scheduler what to do at the end of the
    /// round), flushing, or asleep until a deadline or an event the scheduler signals.
    enum FlushLoop: Equatable {
        case awake
        case flushing
        case sleeping(until: ContinuousClock.Instant?)
        case finished
    }

    /// What a scheduler waiter stands for.
    enum Waiter {
        /// A caller of `flushAll`.
        case caller(ShardReply<Result<Void, Error>>)
        /// Nobody (`requestFlushAll`).
        case nobody
        /// Operations answered once their batch's entries are in PostgreSQL (`postgres` acks).
        case acknowledgements([(ShardOperation, LikeState)])
        /// A slot drained before it is served.
        case drain(slot: UInt16, epoch: Int64)
        /// A slot flushed before it is handed off.
        case handOffFlush(slot: UInt16, epoch: Int64)
    }

    /// What waits for the logs whose content is unknown to be read.
    enum AfterRescan {
        /// A `flushAll` caller.
        case flushAll(ShardReply<Result<Void, Error>>)
        /// A slot being drained (its claim raised the key; the log is read next).
        case drain(slot: UInt16, epoch: Int64)
        /// A sole writer's recovery.
        case recovery(ShardReply<Result<Void, Error>>)
    }

    /// A claim under way.
    struct ClaimRecord {
        var waitingFor: Set<UInt16>
        let epochs: [UInt16: Int64]
        var served: Set<UInt16> = []
        var failure: Error?
        let reply: ShardReply<Result<Set<UInt16>, Error>>
    }

    /// A release under way.
    struct ReleaseRecord {
        var waitingFor: Set<UInt16>
        let epochs: [UInt16: Int64]
        var failure: Error?
        let reply: ShardReply<Result<Void, Error>>
    }

    // MARK: - Making one

    /// A shard of `slotRange`; a sole writer (`isFenced == false`) serves every slot under
    /// epoch 0 from the start, a node of a cluster none until it claims them.
    init(index: Int, slotRange: Range<Int>, configuration: WritePathConfiguration, isFenced: Bool, now: ContinuousClock.Instant) {
        self.index = index
        self.slotRange = slotRange
        self.configuration = configuration
        self.layout = RedisKeyLayout(prefix: configuration.keyPrefix)
        self.isFenced = isFenced
        self.slots = Array(repeating: isFenced ? .notOwned : .serving(epoch: 0), count: slotRange.count)
        self.scheduler = FlushScheduler(configuration: configuration, now: now)
        self.unknownPosts = UnknownPostMemory(capacity: max(1, configuration.unknownPostsRemembered),
                                              lifetime: configuration.unknownPostMemory)
        self.nextEvictionCheck = now + Self.evictionCheckInterval(configuration)
        self.deadLetterPins = DeadLetterPins(now: now)
    }

    // MARK: - The one way in

    /// Takes `event` at `now` and appends what to do to `actions`.
    mutating func handle(_ event: Event, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard !isFinished else {
            refuseAfterFinish(event, into: &actions)
            return
        }
        switch event {
        case .operations(let operations): arrived(operations, now: now, into: &actions)
        case .queuedOperationsDone(let reply): addBarrier(reply, into: &actions)
        case .flushAll(let reply): flushAll(reply, now: now, into: &actions)
        case .requestFlushAll: requestFlushAll()
        case .recover(let reply): recover(reply)
        case .claim(let epochs, let reply): claim(epochs, reply: reply, now: now, into: &actions)
        case .release(let slots, let reply): release(slots, reply: reply, now: now, into: &actions)
        case .resume(let slots): for slot in slots.sorted() where owns(slot) { move(slot, .resume, now: now, into: &actions) }
        case .handedOff(let epochs, let alsoDropping, let reply): handedOff(epochs, alsoDropping: alsoDropping, reply: reply, now: now, into: &actions)
        case .drop(let slots, let reply):
            for slot in slots.sorted() where owns(slot) { move(slot, .drop, now: now, into: &actions) }
            actions.append(.reply(reply.with(())))
        case .resync(let posts, let reply): betweenBatches.append(.resync(posts, reply))
        case .recheckExistence(let posts): unknownPosts.remove(posts)
        case .logsUncertain(let slots): wake(scheduler.uncertain(slots.filter(owns)))
        case .hasPendingChanges(let slot, let reply): askPending(slot, reply: reply, into: &actions)
        case .pendingBySlot(let reply): actions.append(.reply(reply.with(scheduler.pendingBySlot)))
        case .pendingLikes(let question, let reply): answerPending(question, reply: reply, into: &actions)
        case .statistics(let reply): actions.append(.reply(reply.with(currentStats(now: now))))
        case .stop(let drain): stop(drain: drain, now: now, into: &actions)
        case .tick:
            expireParked(now: now, into: &actions)
            if !repairs.isEmpty { retryRepairs(now: now, into: &actions) }
        case .redisFailedOver(let slots): redisFailedOver(slots, now: now, into: &actions)
        case .deciding(let deciding): setDeciding(deciding, now: now, into: &actions)
        case .slotPostsListed(let results): slotPostsListed(results, now: now, into: &actions)
        case .flushProgressRead(let result): flushProgressRead(result, now: now, into: &actions)
        case .discoveryBegan: evictedDuringDiscovery = []
        case .discovered(let posts): discovered(posts, now: now)
        case .discoveryEnded: evictedDuringDiscovery = nil
        case .deadLettersRead(let posts, let started): deadLetterPins.read(posts, startedAt: started)
        case .shrink(let slots, let count): shrink(slots: slots, count: count)

        case .batchRedisReplied(let results, let fenced): batchRedisReplied(results, fenced: fenced, now: now, into: &actions)
        case .replicationAwaited(let outcome): replicationAwaited(outcome, now: now, into: &actions)
        case .batchPostsFound(let take, let result): batchPostsFound(take: take, result, now: now, into: &actions)
        case .largePostLoaded(let hydration, let result): largePostLoaded(hydration, result)
        case .largePostPublished(let post, let result): largePostPublished(post, result, now: now, into: &actions)
        case .epochKeysRaised(let results): epochKeysRaised(results, now: now, into: &actions)
        case .logsRescanned(let results): logsRescanned(results, now: now, into: &actions)
        case .logsRead(let reads, let failure): logsRead(reads, failure: failure, now: now, into: &actions)
        case .deadLettersAdded(let result): deadLettersAdded(result, now: now, into: &actions)
        case .flushTransactionEnded(let outcome): flushTransactionEnded(outcome, now: now, into: &actions)
        case .logsTrimmed(let results, let fenced): logsTrimmed(results, fenced: fenced, now: now, into: &actions)
        case .logLengthsRead(let question, let lengths): logLengthsRead(question, lengths, now: now, into: &actions)
        case .postsUnloaded(let purpose, let failed, let fenced): postsUnloaded(purpose, failed: failed, fenced: fenced, now: now, into: &actions)
        }
        proceed(now: now, into: &actions)
    }

    /// After every event: start what can start — work between batches, the next batch, a
    /// flush — and see whether the shard is done.
    private mutating func proceed(now: ContinuousClock.Instant, into actions: inout [Action]) {
        sendClaimRaises(into: &actions)
        if batch == nil && betweenBatchesRunning == nil { startBetweenBatchesWork(now: now, into: &actions) }
        if batch == nil && betweenBatchesRunning == nil { startBatch(now: now, into: &actions) }
        resolveBarriers(into: &actions)
        if !afterRescan.isEmpty, !(flush.map { if case .rescanning = $0.step { return true } else { return false } } ?? false) {
            // Logs forgotten meanwhile need no reading: what waited only for them goes on.
            resolveAfterRescan(failures: [:], now: now, into: &actions)
        }
        if stopRequested == true && !schedulerStopped && queued.isEmpty && batch == nil && betweenBatchesRunning == nil
            && betweenBatches.isEmpty {
            // Everything queued before the stop is decided and noted: now the flusher drains.
            schedulerStopped = true
            wake(scheduler.stop(drain: true))
        }
        driveFlushLoop(now: now, into: &actions)
        if flushLoop == .finished && batch == nil && betweenBatchesRunning == nil {
            finish(now: now, into: &actions)
        }
    }

    /// The earliest time the machine wants a `tick`: the flush loop's deadline, or when the
    /// first parked operation gives up; `nil` when nothing waits for time.
    var nextDeadline: ContinuousClock.Instant? {
        var earliest: ContinuousClock.Instant?
        if case .sleeping(let until?) = flushLoop { earliest = until }
        if configuration.hotIdle != nil && !hotPosts.isEmpty { earliest = min(earliest ?? nextEvictionCheck, nextEvictionCheck) }
        for parked in slotParked.values {
            if let first = parked.first?.until { earliest = min(earliest ?? first, first) }
        }
        if let retry = nextRepairRetry { earliest = min(earliest ?? retry, retry) }
        return earliest
    }

    /// Operations the shard holds (queued, parked on slots, in the batch in flight excluded):
    /// they count toward `maximumQueuedOperationsPerShard`.
    var heldOperations: Int {
        queued.count + slotParked.values.reduce(0) { $0 + $1.count }
    }

    /// Whether operations arriving now would be looked at before the batch in flight (or the
    /// work between batches) ends: only then need they wake the loop.
    var wantsOperations: Bool {
        batch == nil && betweenBatchesRunning == nil
    }

    /// The slots whose state changed since the last call, with their states now.
    mutating func takeChangedSlots() -> [(slot: UInt16, state: SlotLifecycle.State)] {
        guard !changedSlots.isEmpty else { return [] }
        defer { changedSlots = [] }
        return changedSlots.sorted().map { ($0, slotState($0)) }
    }

    // MARK: - Slots as the rest of the shard reads them

    /// Whether `slot` is one of this shard's.
    func owns(_ slot: UInt16) -> Bool {
        slotRange.contains(Int(slot))
    }

    /// `slot`'s state (`notOwned` for another shard's).
    func slotState(_ slot: UInt16) -> SlotLifecycle.State {
        owns(slot) ? slots[Int(slot) - slotRange.lowerBound] : .notOwned
    }

    /// The epoch a write between batches (resetting keys) carries for `slot`, or `nil` when
    /// this node may not write it; `0` for a sole writer.
    func writeEpoch(_ slot: UInt16) -> Int64? {
        switch slotState(slot) {
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

    // MARK: - Stopping

    /// Refuses new operations; those queued are still decided. With `drain`, the flusher then
    /// drains everything to PostgreSQL; without, it stops after the flush under way (what is
    /// left waits in the Redis logs for the next start).
    private mutating func stop(drain: Bool, now: ContinuousClock.Instant, into actions: inout [Action]) {
        accepting = false
        refuseParked(CounterError(code: .shuttingDown, message: "the node is shutting down"), into: &actions)
        if drain {
            if stopRequested == nil { stopRequested = true }
        } else {
            stopRequested = false
            schedulerStopped = true
            wake(scheduler.stop(drain: false))
        }
    }

    /// Refuses every operation parked on a slot, and cancels the promotions.
    private mutating func refuseParked(_ error: CounterError, into actions: inout [Action]) {
        var refused: [(ShardOperation, Result<LikeState, CounterError>)] = []
        for (_, parked) in slotParked { refused += parked.map { ($0.operation, .failure(error)) } }
        slotParked = [:]
        for post in largeLoads.keys { largeLoads[post]!.cancelled = true }
        if !refused.isEmpty { actions.append(.answer(refused)) }
    }

    /// The loop's end: callers still waiting are told nothing more will happen.
    private mutating func finish(now: ContinuousClock.Instant, into actions: inout [Action]) {
        isFinished = true
        let stopped = Self.stopped
        let refused: [(ShardOperation, Result<LikeState, CounterError>)] = queued.map { ($0, .failure(stopped)) }
        queued = []
        for (_, load) in largeLoads {
            if case .loaded(let hydration, _) = load.phase { actions.append(.discardLargePost(hydration)) }
        }
        largeLoads = [:]
        if !refused.isEmpty { actions.append(.answer(refused)) }
        for id in Array(waiters.keys) { failWaiter(id, with: stopped, now: now, into: &actions) }
        for item in afterRescan {
            switch item {
            case .flushAll(let reply), .recovery(let reply): actions.append(.reply(reply.with(.failure(stopped))))
            case .drain: break
            }
        }
        afterRescan = []
        for record in claims { actions.append(.reply(record.reply.with(.failure(stopped)))) }
        claims = []
        for record in releases { actions.append(.reply(record.reply.with(.failure(stopped)))) }
        releases = []
        for barrier in barriers { actions.append(.reply(barrier.reply.with(()))) }
        barriers = []
        for work in betweenBatches + (betweenBatchesRunning.map { [$0] } ?? []) {
            switch work {
            case .resync(_, let reply), .resyncUnloading(_, let reply): actions.append(.reply(reply.with([])))
            case .publish, .dropDeleted, .evict: break
            }
        }
        betweenBatches = []
        betweenBatchesRunning = nil
    }

    /// Events that come after the end: callers are answered at once; results are dropped.
    private func refuseAfterFinish(_ event: Event, into actions: inout [Action]) {
        let stopped = Self.stopped
        switch event {
        case .operations(let operations): actions.append(.answer(operations.map { ($0, .failure(stopped)) }))
        case .queuedOperationsDone(let reply), .handedOff(_, _, let reply), .drop(_, let reply): actions.append(.reply(reply.with(())))
        case .flushAll(let reply), .recover(let reply), .release(_, let reply): actions.append(.reply(reply.with(.failure(stopped))))
        case .claim(_, let reply): actions.append(.reply(reply.with(.failure(stopped))))
        case .resync(_, let reply): actions.append(.reply(reply.with([])))
        case .hasPendingChanges(let slot, let reply): actions.append(.reply(reply.with(scheduler.hasPendingChanges(inSlot: slot))))
        case .pendingBySlot(let reply): actions.append(.reply(reply.with(scheduler.pendingBySlot)))
        case .pendingLikes(_, let reply): actions.append(.reply(reply.with(.incomplete)))
        case .statistics(let reply): actions.append(.reply(reply.with(stats)))
        case .logLengthsRead(let question, _):
            if case .pendingQuery(let reply) = question.purpose { actions.append(.reply(reply.with(true))) }
        default: break
        }
    }

    static let stopped = CounterError(code: .shuttingDown, message: "the write path has stopped")
    static let leaseLapsed = CounterError(
        code: .unavailable,
        message: "this node cannot renew its cluster lease (PostgreSQL does not answer it), so it stops deciding before another node may take its slots; nothing was done: retry (another node serves them soon)",
        retryAfterSeconds: 1)

    // MARK: - Statistics

    /// The statistics with the backlog figures of `now`.
    func currentStats(now: ContinuousClock.Instant) -> ShardStats {
        var current = stats
        current.shard = index
        current.pendingChanges = scheduler.pendingTotal
        current.hotPosts = hotPosts.count
        current.secondsSinceFlush = (now - scheduler.lastFlush).inSeconds
        if let oldest = scheduler.oldestDirtySince { current.oldestPendingAgeSeconds = (now - oldest).inSeconds }
        return current
    }

    /// Counts a Redis or PostgreSQL error.
    mutating func count(_ error: Error) {
        if error is RedisError { stats.redisErrors += 1 }
        if error is PostgresError { stats.postgresErrors += 1 }
    }
}
