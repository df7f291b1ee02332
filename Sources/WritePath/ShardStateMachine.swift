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
/// It is a router over four smaller machines, each with private state, its own events (its
/// methods) and its own effects on the others:
///
/// - `BatchLane` — operations queue; one batch at a time (`BatchStateMachine`, a group commit);
///   between batches, one item of work that must not overlap one; parked operations, barriers,
///   posts known not to exist.
/// - `WriteBehind` — what waits in each slot's log and who waits for it (`FlushScheduler`), the
///   lists' index (`PendingLikes`), one flush at a time (`FlushRun`).
/// - `SlotOwnership` — each slot's state (`SlotLifecycle`, the only place a slot moves), claims,
///   hand-offs, fences, repairs after a Redis failover.
/// - `HotSet` — the posts held in Redis and their eviction, dead-letter pins, the sweeper's walks,
///   promotions of warm posts.
///
/// `handle` is the one way in: it hands each event to the machine it concerns, routes the effects
/// that machine has on the others (`+Routing`), then lets each start what can start
/// (`proceed`). The machines ask the shell for I/O with this machine's one `Action` type; their
/// timers are actions too (`setTimer`/`cancelTimer`, `timerFired` back). Stopping is one
/// `Lifecycle`: running → draining (or abandoning) → finished. An event a machine cannot receive
/// in its state is a bug: it fails in debug builds and is logged in release builds
/// (`unexpected`).
struct ShardStateMachine {
    /// Where the shard is in its life.
    enum Lifecycle: Equatable {
        /// Deciding what arrives.
        case running
        /// Asked to stop with a drain: new operations are refused, those queued are decided, then
        /// (`flusherStopping`) the write-behind drains everything to PostgreSQL.
        case draining(flusherStopping: Bool)
        /// Asked to stop without a drain: the write-behind stops after the flush under way (what
        /// is left waits in the Redis logs for the next start).
        case abandoning
        /// The loop's end: nothing more will be done; every caller is answered at once.
        case finished
    }

    /// The shard's timers: each is set and cancelled by an action and comes back as
    /// `timerFired`.
    enum Timer: Int, CaseIterable, Sendable {
        /// The sleeping flush loop's deadline.
        case flush
        /// The next look for idle posts to evict.
        case eviction
        /// The first parked operation gives up.
        case parkedOperations
        /// A failed repair step is tried again.
        case repairRetry
    }

    // MARK: - Configuration and state

    let index: Int
    let configuration: WritePathConfiguration
    /// The slots this shard owns.
    let slotRange: Range<Int>
    /// Whether writes carry epochs (`false` for a sole writer: every slot served under 0).
    let isFenced: Bool

    private(set) var lifecycle = Lifecycle.running
    /// The machines: only this file changes them (through their events), so `handle` is the one
    /// way in; other files and the tests read them.
    private(set) var lane: BatchLane
    private(set) var flushes: WriteBehind
    private(set) var ownership: SlotOwnership
    private(set) var hotSet: HotSet
    /// The deadline each timer was last set to (by `Timer.rawValue`); `nil`: not set.
    private var timers: [ContinuousClock.Instant?] = Array(repeating: nil, count: Timer.allCases.count)

    // MARK: - Making one

    /// A shard of `slotRange`; a sole writer (`isFenced == false`) serves every slot under
    /// epoch 0 from the start, a node of a cluster none until it claims them.
    init(index: Int, slotRange: Range<Int>, configuration: WritePathConfiguration, isFenced: Bool, now: ContinuousClock.Instant) {
        self.index = index
        self.slotRange = slotRange
        self.configuration = configuration
        self.isFenced = isFenced
        self.lane = BatchLane(shard: index, configuration: configuration, isFenced: isFenced)
        self.flushes = WriteBehind(shard: index, configuration: configuration, isFenced: isFenced, now: now)
        self.ownership = SlotOwnership(shard: index, slotRange: slotRange, isFenced: isFenced)
        self.hotSet = HotSet(shard: index, configuration: configuration, isFenced: isFenced, now: now)
    }

    // MARK: - The one way in

    /// Takes `event` at `now` and appends what to do to `actions`.
    mutating func handle(_ event: Event, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard lifecycle != .finished else {
            refuseAfterFinish(event, into: &actions)
            return
        }
        switch event {
        case .operations(let operations):
            lane.arrived(
                operations, accepting: lifecycle == .running, slots: ownership, pending: flushes.pendingTotal,
                oldestPendingAge: flushes.oldestPendingAge(now: now), into: &actions)
        case .queuedOperationsDone(let reply): lane.addBarrier(reply, into: &actions)
        case .flushAll(let reply): route(flushes.flushAll(reply, into: &actions), now: now, into: &actions)
        case .requestFlushAll: flushes.requestFlushAll()
        case .recover(let reply): flushes.recover(slotRange, reply: reply)
        case .claim(let epochs, let reply): route(ownership.claim(epochs, reply: reply, now: now, into: &actions), now: now, into: &actions)
        case .release(let slots, let reply):
            route(ownership.release(slots, reply: reply, batchInFlight: lane.isBatchInFlight, now: now, into: &actions), now: now, into: &actions)
        case .resume(let slots): route(ownership.resume(slots, now: now, into: &actions), now: now, into: &actions)
        case .handedOff(let epochs, let alsoDropping, let reply):
            route(ownership.handedOff(epochs, alsoDropping: alsoDropping, reply: reply, now: now, into: &actions), now: now, into: &actions)
        case .drop(let slots, let reply):
            route(ownership.drop(slots, now: now, into: &actions), now: now, into: &actions)
            actions.append(.reply(reply.with(())))
        case .resync(let posts, let reply): lane.enqueue(.resync(posts, reply))
        case .recheckExistence(let posts): lane.recheckExistence(posts)
        case .probe(let probe, let reply): lane.enqueue(.probe(probe, reply))
        case .logsUncertain(let slots): flushes.logsUncertain(slots.filter(ownership.owns))
        case .pendingBySlot(let reply): actions.append(.reply(reply.with(flushes.pendingBySlot)))
        case .pendingLikes(let question, let reply): actions.append(.reply(reply.with(pendingAnswer(question))))
        case .statistics(let reply): actions.append(.reply(reply.with(currentStats(now: now))))
        case .stop(let drain): stop(drain: drain, into: &actions)
        case .timerFired(let timer): timerFired(timer, now: now, into: &actions)
        case .redisFailedOver(let slots):
            // The flushes that failed on the dead master need not wait out their backoff: its
            // replica serves now, and the repair's drain is a flush.
            flushes.failureResolved()
            lane.slotsFailedOver(Set(slots))
            route(ownership.redisFailedOver(slots, batchInFlight: lane.isBatchInFlight, now: now, into: &actions), now: now, into: &actions)
        case .postgresReachable: flushes.failureResolved()
        case .deciding(let deciding): route(lane.setDeciding(deciding, now: now, into: &actions), now: now, into: &actions)
        case .slotPostsListed(let results): route(ownership.slotPostsListed(results, now: now, into: &actions), now: now, into: &actions)
        case .flushProgressRead(let result):
            route(flushes.flushProgressRead(result, now: now, slots: ownership, into: &actions), now: now, into: &actions)
        case .discoveryBegan: hotSet.discoveryBegan()
        case .discovered(let posts): hotSet.discovered(posts, now: now, slots: ownership)
        case .discoveryEnded: hotSet.discoveryEnded()
        case .deadLettersRead(let posts, let started): hotSet.deadLettersRead(posts, startedAt: started)
        case .shrink(let slots, let count):
            guard lifecycle == .running else { break }
            let posts = hotSet.toShrink(slots: slots, count: count, slots: ownership, flushes: flushes)
            if !posts.isEmpty { lane.enqueue(.evict(posts, .memory)) }

        case .batchRedisReplied(let results, let fenced, let openings):
            fence(fenced, why: nil, now: now, into: &actions)
            route(lane.redisReplied(results, openings: openings, now: now, into: &actions), now: now, into: &actions)
        case .replicationAwaited(let outcome): route(lane.replicationAwaited(outcome, into: &actions), now: now, into: &actions)
        case .batchPostsFound(let take, let result): route(lane.postsFound(take: take, result, now: now, into: &actions), now: now, into: &actions)
        case .warmPostLoaded(let promotion, let result):
            hotSet.loaded(promotion, result, into: &actions)
            lane.enqueue(.publish(post: promotion.post))
        case .promotionPublished(let post, let result): promotionPublished(post, result, now: now, into: &actions)
        case .epochKeysRaised(let results): route(ownership.epochKeysRaised(results, now: now, into: &actions), now: now, into: &actions)
        case .logsRescanned(let results):
            route(flushes.logsRescanned(results, now: now, slots: ownership, into: &actions), now: now, into: &actions)
        case .logsRead(let reads, let failure):
            route(flushes.logsRead(reads, failure: failure, now: now, slots: ownership, into: &actions), now: now, into: &actions)
        case .deadLettersAdded(let result):
            route(flushes.deadLettersAdded(result, now: now, slots: ownership, into: &actions), now: now, into: &actions)
        case .flushTransactionEnded(let outcome):
            route(flushes.flushTransactionEnded(outcome, now: now, slots: ownership, into: &actions), now: now, into: &actions)
        case .logsTrimmed(let results, let fenced):
            // What Redis fenced is given up first: a slot that is another node's is not settled.
            fence(fenced, why: nil, now: now, into: &actions)
            route(flushes.logsTrimmed(results, now: now, slots: ownership, into: &actions), now: now, into: &actions)
        case .logLengthsRead(let question, let lengths): logLengthsRead(question, lengths, now: now, into: &actions)
        case .postsUnloaded(let purpose, let failed, let fenced): postsUnloaded(purpose, failed: failed, fenced: fenced, now: now, into: &actions)
        case .postsProbed(let result): postsProbed(result, into: &actions)
        }
        proceed(now: now, into: &actions)
    }

    /// After every event: start what can start — work between batches, the next batch, a
    /// flush — see whether the shard is done, and set the timers it wants.
    private mutating func proceed(now: ContinuousClock.Instant, into actions: inout [Action]) {
        ownership.sendClaimRaises(into: &actions)
        if lane.isIdle { startBetweenBatchesWork(now: now, into: &actions) }
        if lane.isIdle { route(lane.startBatch(now: now, slots: ownership, into: &actions), now: now, into: &actions) }
        lane.resolveBarriers(into: &actions)
        route(flushes.resolveForgottenRescans(into: &actions), now: now, into: &actions)
        if lifecycle == .draining(flusherStopping: false) && lane.isDrained {
            // Everything queued before the stop is decided and noted: now the flusher drains.
            lifecycle = .draining(flusherStopping: true)
            flushes.stop(drain: true)
        }
        route(flushes.driveLoop(now: now, slots: ownership, into: &actions), now: now, into: &actions)
        if flushes.isFinished && lane.isIdle { finish(now: now, into: &actions) }
        setTimers(now: now, into: &actions)
    }

    /// Sets (or cancels) each timer whose deadline changed since it was last set. An eviction
    /// that is due while the lane is busy needs no timer: it starts when the lane is next idle
    /// (and none starts while the shard stops).
    private mutating func setTimers(now: ContinuousClock.Instant, into actions: inout [Action]) {
        for timer in Timer.allCases {
            let wanted: ContinuousClock.Instant?
            switch lifecycle == .finished ? nil : timer {
            case .flush?: wanted = flushes.wakeUpDeadline
            case .eviction?: wanted = hotSet.evictionDeadline.flatMap { lifecycle == .running && $0 > now ? $0 : nil }
            case .parkedOperations?: wanted = lane.parkedDeadline
            case .repairRetry?: wanted = ownership.nextRepairRetry
            case nil: wanted = nil
            }
            guard wanted != timers[timer.rawValue] else { continue }
            timers[timer.rawValue] = wanted
            actions.append(wanted.map { .setTimer(timer, at: $0) } ?? .cancelTimer(timer))
        }
    }

    /// A timer's deadline came (the shell forgot it as it fired).
    private mutating func timerFired(_ timer: Timer, now: ContinuousClock.Instant, into actions: inout [Action]) {
        timers[timer.rawValue] = nil
        switch timer {
        case .flush, .eviction: break // `proceed` looks at the time.
        case .parkedOperations: lane.expireParked(now: now, slots: ownership, into: &actions)
        case .repairRetry: ownership.retryRepairs(now: now, into: &actions)
        }
    }

    /// Operations the shard holds (queued, parked on slots; the batch in flight excluded): they
    /// count toward `maximumQueuedOperationsPerShard`.
    var heldOperations: Int { lane.heldOperations }

    /// Whether operations arriving now would be looked at before the batch in flight (or the
    /// work between batches) ends: only then need they wake the loop.
    var wantsOperations: Bool { lane.wantsOperations }

    /// Whether the loop has ended.
    var isFinished: Bool { lifecycle == .finished }

    /// The slots whose state changed since the last call, with their states now.
    mutating func takeChangedSlots() -> [(slot: UInt16, state: SlotLifecycle.State)] {
        ownership.takeChangedSlots()
    }

    /// `slot`'s state (`notOwned` for another shard's).
    func slotState(_ slot: UInt16) -> SlotLifecycle.State {
        ownership.state(of: slot)
    }

    // MARK: - Stopping

    /// Refuses new operations and parked ones (queued ones are still decided); no promotion is
    /// published. With `drain`, the flusher then drains everything to PostgreSQL; without, it
    /// stops after the flush under way.
    private mutating func stop(drain: Bool, into actions: inout [Action]) {
        lane.refuseAllParked(CounterError(code: .shuttingDown, message: "the node is shutting down"), into: &actions)
        hotSet.cancelAllPromotions()
        switch (lifecycle, drain) {
        case (.running, true):
            lifecycle = .draining(flusherStopping: false)
        case (.running, false), (.draining, false):
            lifecycle = .abandoning
            flushes.stop(drain: false)
        case (.draining, true), (.abandoning, _), (.finished, _):
            break
        }
    }

    /// The loop's end: callers still waiting are told nothing more will happen.
    private mutating func finish(now: ContinuousClock.Instant, into actions: inout [Action]) {
        lifecycle = .finished
        lane.finish(into: &actions)
        hotSet.finish(into: &actions)
        route(flushes.finish(into: &actions), now: now, into: &actions)
        ownership.finish(into: &actions)
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
        case .probe(_, let reply): actions.append(.reply(reply.with(.failure(stopped))))
        case .pendingBySlot(let reply): actions.append(.reply(reply.with(flushes.pendingBySlot)))
        case .pendingLikes(_, let reply): actions.append(.reply(reply.with(.incomplete)))
        case .statistics(let reply): actions.append(.reply(reply.with(countedStats)))
        default: break
        }
    }

    static let stopped = CounterError(code: .shuttingDown, message: "the write path has stopped")
    static let leaseLapsed = CounterError(
        code: .unavailable,
        message:
            "this node cannot renew its cluster lease (PostgreSQL does not answer it), so it stops deciding before another node may take its slots; nothing was done: retry (another node serves them soon)",
        retryAfterSeconds: 1)
    static let lostInFailover = CounterError(
        code: .unavailable,
        message:
            "the change was written to Redis, which lost it (a master that failed over before its replica had it, or a restart without its data): it was not applied; read the state before repeating it",
        retryAfterSeconds: 1)

    /// An event a machine cannot receive in its state: a bug. It fails in debug builds; in
    /// release builds it is logged and changes nothing.
    static func unexpected(_ what: String, shard: Int, state: String, into actions: inout [Action]) {
        assertionFailure("shard \(shard): \(what) (state: \(state))")
        actions.append(.log(ShardLogLine(.error, "shard_unexpected_event", [("shard", String(shard)), ("event", what), ("state", state)])))
    }

    // MARK: - Routing the machines' effects

    /// What the write-behind asks of the other machines.
    private mutating func route(_ effects: [WriteBehind.Effect], now: ContinuousClock.Instant, into actions: inout [Action]) {
        for effect in effects {
            switch effect {
            case .drained(let slot, let epoch):
                route(ownership.drained(slot, epoch: epoch, now: now, into: &actions), now: now, into: &actions)
            case .drainFailed(let slot, let epoch, let error):
                route(ownership.drainFailed(slot, epoch: epoch, error: error, now: now, into: &actions), now: now, into: &actions)
            case .handOffFlushed(let slot, let epoch):
                route(ownership.handOffFlushed(slot, epoch: epoch, now: now, into: &actions), now: now, into: &actions)
            case .fenced(let fenced, let why):
                fence(fenced, why: why, now: now, into: &actions)
            case .postsMissing(let posts):
                // The shard forgets the posts and deletes their Redis keys, so the next touch
                // asks PostgreSQL again (and is refused).
                lane.rememberMissing(posts, now: now)
                hotSet.cancelPromotions(of: posts)
                lane.enqueue(.dropDeleted(posts))
            case .refusedLettersWritten(let posts):
                hotSet.lettersWritten(of: posts, at: now)
            case .lostInRepair(let slot, let lost):
                ownership.lostInRepair(slot, lost)
            }
        }
    }

    /// What a move of a slot asks of the other machines.
    private mutating func route(_ effects: [SlotOwnership.Effect], now: ContinuousClock.Instant, into actions: inout [Action]) {
        for effect in effects {
            switch effect {
            case .drainLog(let slot, let epoch): flushes.drain(slot: slot, epoch: epoch)
            case .flushLog(let slot, let epoch): route(flushes.flushForHandOff(slot: slot, epoch: epoch, into: &actions), now: now, into: &actions)
            case .forgetBacklog(let slot): route(flushes.forget(slot: slot, into: &actions), now: now, into: &actions)
            case .admitParked(let slot): lane.admitParked(slot)
            case .refuseParked(let slot): lane.refuseParked(slot, into: &actions)
            case .slotGained: hotSet.slotGained(at: now)
            case .cancelPromotions(let posts): hotSet.cancelPromotions(of: posts)
            case .postsDropped(let posts): hotSet.forget(posts)
            case .failureResolved: flushes.failureResolved()
            }
        }
    }

    /// What a batch asks of the other machines.
    private mutating func route(_ effects: [BatchLane.Effect], now: ContinuousClock.Instant, into actions: inout [Action]) {
        for effect in effects {
            switch effect {
            case .wrote(let completion, let operations, let epochs):
                flushes.batchWrote(uncertain: completion.uncertainSlots, logged: completion.logged, appended: completion.appended, now: now)
                hotSet.batchWrote(completion, operations: operations, now: now)
                if !completion.warmLookups.isEmpty { hotSet.countWarmLookups(completion.warmLookups, epochs: epochs, now: now, into: &actions) }
            case .answerWhenApplied(let answers, let marks):
                route(flushes.answerWhenApplied(answers, marks: marks, into: &actions), now: now, into: &actions)
            case .batchEnded:
                route(ownership.batchEnded(now: now, into: &actions), now: now, into: &actions)
            }
        }
    }

    /// Redis or PostgreSQL refused writes made under these epochs: the slots are another node's.
    private mutating func fence(_ fenced: [FencedSlot], why: String?, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard !fenced.isEmpty else { return }
        route(ownership.fenced(fenced, why: why, now: now, into: &actions), now: now, into: &actions)
    }

    // MARK: - Work between batches

    /// Starts the next item of work between batches, if any (items that need no I/O end at
    /// once, and the next starts); when none waits, an eviction of idle posts when one is due.
    private mutating func startBetweenBatchesWork(now: ContinuousClock.Instant, into actions: inout [Action]) {
        if !lane.hasQueuedWork && lifecycle == .running {
            let idle = hotSet.idleToEvict(now: now, slots: ownership, flushes: flushes)
            if !idle.isEmpty { lane.enqueue(.evict(idle, .idle)) }
        }
        while let work = lane.takeWork() {
            switch work {
            case .publish(let post):
                if hotSet.publish(post, slotUncertain: flushes.isUncertain(HashSlot(post: post).rawValue), into: &actions) { lane.workRuns(work) }
            case .resync(let posts, let reply):
                startResync(posts, reply: reply, into: &actions)
            case .resyncUnloading:
                ShardStateMachine.unexpected("a resync's unloading queued", shard: index, state: "between batches", into: &actions)
            case .dropDeleted(let posts):
                lane.workRuns(work)
                actions.append(.unloadPosts(posts, epochs: ownership.writeEpochs(of: posts), .deleted))
            case .evict(let queued, let reason):
                let (posts, epochs) = hotSet.stillEvictable(queued, slots: ownership, flushes: flushes)
                guard !posts.isEmpty else { continue }
                lane.workRuns(.evict(posts, reason))
                actions.append(.unloadPosts(posts, epochs: epochs, .evicted(reason)))
            case .probe(let probe, _):
                // No batch writes the posts while the read runs; a slot with nothing waiting is
                // not flushed either.
                let pending = Set(probe.posts.map { HashSlot(post: $0).rawValue }.filter(flushes.hasPendingChanges(inSlot:)))
                lane.workRuns(work)
                actions.append(.probePosts(probe, pendingSlots: pending))
            }
        }
    }

    /// A promotion's publication ended.
    private mutating func promotionPublished(_ post: Int64, _ result: Result<Void, Error>, now: ContinuousClock.Instant, into actions: inout [Action])
    {
        guard case .publish(let running)? = lane.runningWork, running == post else {
            Self.unexpected(
                "post \(post)'s promotion published while it is not under way", shard: index, state: "\(String(describing: lane.runningWork))",
                into: &actions)
            return
        }
        lane.workEnded()
        hotSet.published(post, result, now: now, into: &actions)
    }

    /// A resync resets the keys of the posts whose slots have nothing waiting for PostgreSQL
    /// (PostgreSQL does not have what waits yet). When the books say a slot has changes, its
    /// log's length is read first: after a failover dropped counted entries, only an empty log
    /// can tell that nothing waits.
    private mutating func startResync(_ posts: [Int64], reply: ShardReply<Set<Int64>>, into actions: inout [Action]) {
        hotSet.cancelPromotions(of: posts)
        lane.workRuns(.resync(posts, reply))
        var asked: [UInt16: StreamEntryID?] = [:]
        for post in posts {
            let slot = HashSlot(post: post).rawValue
            let books = flushes.lengthQuestion(slot: slot)
            if books.pending && !books.uncertain { asked[slot] = books.appended }
        }
        if asked.isEmpty {
            unloadQuiet(posts, reply: reply, into: &actions)
        } else {
            actions.append(.readLogLengths(LogLengthQuestion(appendedWhenAsked: asked)))
        }
    }

    private mutating func unloadQuiet(_ posts: [Int64], reply: ShardReply<Set<Int64>>, into actions: inout [Action]) {
        let quiet = posts.filter { !flushes.hasPendingChanges(inSlot: HashSlot(post: $0).rawValue) }
        guard !quiet.isEmpty else {
            lane.workEnded()
            actions.append(.reply(reply.with([])))
            return
        }
        lane.workRuns(.resyncUnloading(quiet, reply))
        actions.append(.unloadPosts(quiet, epochs: ownership.writeEpochs(of: quiet), .resync))
    }

    /// Posts' keys were deleted (the slots Redis fenced are given up first).
    private mutating func postsUnloaded(
        _ purpose: UnloadPurpose, failed: Set<Int64>, fenced: [FencedSlot], now: ContinuousClock.Instant,
        into actions: inout [Action]
    ) {
        fence(fenced, why: nil, now: now, into: &actions)
        if case .repaired(let slots) = purpose {
            route(ownership.repairUnloaded(slots, failed: failed, now: now, into: &actions), now: now, into: &actions)
            return
        }
        switch (purpose, lane.runningWork) {
        case (.resync, .resyncUnloading(let quiet, let reply)?):
            lane.workEnded()
            hotSet.forget(quiet.filter { !failed.contains($0) })
            actions.append(.reply(reply.with(Set(quiet).subtracting(failed))))
        case (.evicted(let reason), .evict(let posts, _)?):
            lane.workEnded()
            hotSet.evicted(posts, failed: failed, reason: reason)
        case (.deleted, .dropDeleted(let posts)?):
            lane.workEnded()
            hotSet.deletedPostsUnloaded(posts, failed: failed)
        default:
            Self.unexpected(
                "posts unloaded (\(purpose)) while no such unloading runs", shard: index,
                state: "\(String(describing: lane.runningWork))", into: &actions)
        }
    }

    /// An operator's probe was read: the lane is free again.
    private mutating func postsProbed(_ result: Result<PostProbeResult, Error>, into actions: inout [Action]) {
        guard case .probe(_, let reply)? = lane.runningWork else {
            Self.unexpected("posts probed while no probe runs", shard: index, state: "\(String(describing: lane.runningWork))", into: &actions)
            return
        }
        lane.workEnded()
        actions.append(.reply(reply.with(result)))
    }

    // MARK: - Log lengths

    /// An empty log holds nothing, whatever the books counted; then the resync goes on.
    private mutating func logLengthsRead(
        _ question: LogLengthQuestion, _ lengths: [UInt16: Int], now: ContinuousClock.Instant,
        into actions: inout [Action]
    ) {
        route(flushes.logLengthsRead(question, lengths, into: &actions), now: now, into: &actions)
        guard case .resync(let posts, let reply)? = lane.runningWork else {
            Self.unexpected(
                "a resync's log lengths while no resync runs", shard: index, state: "\(String(describing: lane.runningWork))",
                into: &actions)
            return
        }
        unloadQuiet(posts, reply: reply, into: &actions)
    }
}
