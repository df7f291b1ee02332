import Persistence
import RedisDriver
import ShardRouter

/// Operations, batches and large posts: what arrives, who waits where, and one batch at a time
/// through `BatchStateMachine` (a group commit: everything queued while the batch before was in
/// flight).
extension ShardStateMachine {
    // MARK: - Arrivals

    /// Queues `operations` for the next batch; refuses them while stopping, and writes while
    /// the backlog waiting for PostgreSQL is at its limit (in changes, or in the age of its oldest).
    mutating func arrived(_ operations: [ShardOperation], now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard accepting else {
            let refusal = CounterError(code: .shuttingDown, message: "the node is shutting down")
            actions.append(.answer(operations.map { ($0, .failure(refusal)) }))
            return
        }
        let pending = scheduler.pendingTotal
        let limit = configuration.backlogLimitPerShard
        let age = oldestPendingAge(now: now)
        let tooOld = configuration.backlogMaximumAge.flatMap { maximum in age.map { $0 >= maximum } } ?? false
        if pending < limit && !tooOld {
            if refusingWrites {
                refusingWrites = false
                actions.append(.log(ShardLogLine(.info, "writes_accepted", [("shard", String(index)), ("pending_changes", String(pending))])))
            }
            if queued.isEmpty { queued = operations } else { queued.append(contentsOf: operations) }
            stats.operations += operations.count
            return
        }
        var refused: [(ShardOperation, Result<LikeState, CounterError>)] = []
        let waited = Int((age ?? .zero).inSeconds)
        let why = pending >= limit ? "\(pending) changes of this shard wait for PostgreSQL (limit \(limit)); retry later"
            : "the oldest change of this shard has waited \(waited) s for PostgreSQL (limit \(Int((configuration.backlogMaximumAge ?? .zero).inSeconds)) s); retry later"
        for operation in operations {
            if operation.request.operation.mayWrite {
                refused.append((operation, .failure(CounterError(code: .backlogFull, message: why, retryAfterSeconds: 1))))
            } else {
                queued.append(operation)
                stats.operations += 1
            }
        }
        if !refused.isEmpty {
            if !refusingWrites {
                refusingWrites = true
                actions.append(.log(ShardLogLine(.warn, "writes_refused", [
                    ("shard", String(index)), ("pending_changes", String(pending)), ("backlog_limit", String(limit)),
                    ("oldest_pending_age_s", String(waited)),
                    ("why", "PostgreSQL is behind; writes get 503 backlog_full until the flusher catches up"),
                ])))
            }
            actions.append(.answer(refused))
        }
    }

    /// How long the oldest waiting change has waited (`nil`: none waits, or no age limit is
    /// set), looked at afresh at most every `backlogAgeRecheck`.
    private mutating func oldestPendingAge(now: ContinuousClock.Instant) -> Duration? {
        guard configuration.backlogMaximumAge != nil, scheduler.pendingTotal > 0 else { return nil }
        if let last = backlogAge, now - last.checkedAt < Self.backlogAgeRecheck {
            return last.age.map { $0 + (now - last.checkedAt) }
        }
        let age = scheduler.oldestDirtySince.map { now - $0 }
        backlogAge = (now, age)
        return age
    }

    /// A caller of `queuedOperationsDone` waits for the take that holds what is queued now (or
    /// the batch in flight); answered at once when nothing is.
    mutating func addBarrier(_ reply: ShardReply<Void>, into actions: inout [Action]) {
        let take = queued.isEmpty ? (batch?.take ?? lastTakeDone) : nextTake
        if take <= lastTakeDone {
            actions.append(.reply(reply.with(())))
        } else {
            barriers.append((take, reply))
        }
    }

    /// Answers the barriers whose take has ended.
    mutating func resolveBarriers(into actions: inout [Action]) {
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
    mutating func startBatch(now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard batch == nil, !queued.isEmpty else { return }
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
        let firstSlot = slotRange.lowerBound
        for (offset, operation) in taken.enumerated() {
            let slot = operation.slot
            let state = owns(slot) ? slots[Int(slot) - firstSlot] : .notOwned
            if !deciding, state.admission == .decide {
                // The node's lease may be running out (it cannot renew it): another node may
                // soon decide for this slot.
                if live == nil { live = Array(taken[..<offset]) }
                refused.append((operation, .failure(Self.leaseLapsed)))
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
                slotParked[slot, default: []].append((operation, slotWait))
            case .elsewhere:
                if operation.waitsForSlot {
                    slotParked[slot, default: []].append((operation, slotWait))
                } else {
                    refused.append((operation, .failure(.notOwner(slot))))
                }
            }
        }
        if !refused.isEmpty { actions.append(.answer(refused)) }
        let batchOperations = live ?? taken
        guard !batchOperations.isEmpty else {
            lastTakeDone = take
            return
        }
        var machine = BatchStateMachine(requests: batchOperations.map(\.request), acknowledgement: configuration.acknowledgement, layout: layout,
                                        largePostThreshold: configuration.streamingHydrationThreshold)
        let action = machine.start()
        batch = BatchInFlight(machine: machine, operations: batchOperations, epochs: isFenced ? epochs : nil, take: take)
        follow(action, now: now, into: &actions)
    }

    /// Gives what the batch's machine settled, then performs its next step.
    private mutating func follow(_ action: BatchStateMachine.Action, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard let current = batch else { return }
        settle(batch!.machine.takeSettled(), of: current, now: now, into: &actions)
        switch action {
        case .read(let groups):
            actions.append(.batchRedis(groups, epochs: nil))
        case .write(let groups):
            actions.append(.batchRedis(groups, epochs: current.epochs))
        case .findPosts(let lookup):
            batch!.waitingForPostgres = true
            actions.append(.findPosts(lookup, take: current.take))
        case .finish(let completion):
            if configuration.acknowledgement == .replicated, !completion.appended.isEmpty, !completion.answers.isEmpty {
                // The books learn of the write at once (a flush, an eviction, a list must know
                // what is in the logs); the answers wait for the replicas, and so does the next
                // batch, whose writes would queue behind the `WAIT` on the same connections anyway.
                book(completion, of: current, now: now, into: &actions)
                batch!.awaitingReplication = completion
                actions.append(.awaitReplication(slots: completion.appended.keys.sorted(), replicas: configuration.acknowledgementReplicas,
                                                 timeout: configuration.acknowledgementReplicaTimeout))
            } else {
                finishBatch(completion, of: current, now: now, into: &actions)
            }
        }
    }

    /// Whether the node may decide for its slots. When it may not (its lease may be running
    /// out), it says so at once to what waits for a decision: the operations queued, and a batch
    /// waiting for PostgreSQL — it has written nothing yet, and PostgreSQL may not answer for
    /// seconds (the cut that kept the lease from being renewed).
    mutating func setDeciding(_ deciding: Bool, now: ContinuousClock.Instant, into actions: inout [Action]) {
        self.deciding = deciding
        guard !deciding else { return }
        if !queued.isEmpty {
            actions.append(.answer(queued.map { ($0, .failure(Self.leaseLapsed)) }))
            queued = []
        }
        if let current = batch, current.waitingForPostgres {
            batchPostsFound(take: current.take, .failure(Self.leaseLapsed), now: now, into: &actions)
        }
    }

    /// The replicas confirmed the batch's writes, or did not in time: then its writes are
    /// answered `not_replicated` (they are written and logged all the same).
    mutating func replicationAwaited(_ outcome: ReplicationOutcome, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard let current = batch, var completion = current.awaitingReplication else { return }
        if !outcome.confirmed {
            let error = CounterError(code: .notReplicated,
                                     message: "the change is written on its Redis master but not confirmed on \(configuration.acknowledgementReplicas) replica(s) within \(configuration.acknowledgementReplicaTimeout) (\(outcome.detail)); it stands unless that master fails first: read the state before repeating a toggle",
                                     retryAfterSeconds: 1)
            var refused = 0
            completion.answers = completion.answers.map { answer in
                guard case .success = answer.result, current.operations[answer.request].request.operation.writes else { return answer }
                refused += 1
                return BatchStateMachine.Answer(request: answer.request, result: .failure(error))
            }
            stats.unreplicatedWrites += refused
            actions.append(.log(ShardLogLine(.warn, "not_replicated", [("shard", String(index)), ("answers", String(refused)),
                                                                        ("detail", outcome.detail)])))
        }
        end(current, answering: completion, now: now, into: &actions)
    }

    mutating func batchRedisReplied(_ results: [Result<[RedisReply], RedisError>], fenced: [FencedSlot],
                                    now: ContinuousClock.Instant, into actions: inout [Action]) {
        slotsFenced(fenced, now: now, into: &actions)
        guard batch != nil else { return }
        let next = batch!.machine.redisReplied(results)
        follow(next, now: now, into: &actions)
    }

    mutating func batchPostsFound(take: UInt64, _ result: Result<ColdLookup.Found, Error>, now: ContinuousClock.Instant,
                                  into actions: inout [Action]) {
        // The lookup of a batch given up (its node stopped deciding) comes back late: nothing.
        guard batch?.take == take, batch?.waitingForPostgres == true else { return }
        batch!.waitingForPostgres = false
        let next: BatchStateMachine.Action
        switch result {
        case .success(let found): next = batch!.machine.postsFound(found)
        case .failure(let error): next = batch!.machine.postgresFailed(error)
        }
        follow(next, now: now, into: &actions)
    }

    /// Answers due now, and posts found missing (remembered).
    private mutating func settle(_ settled: BatchStateMachine.Settled, of current: BatchInFlight, now: ContinuousClock.Instant,
                                 into actions: inout [Action]) {
        if !settled.missingPosts.isEmpty { unknownPosts.remember(settled.missingPosts, at: now) }
        if !settled.answers.isEmpty { actions.append(.answerBatch(current.operations, settled.answers)) }
    }

    /// Tells the flusher's books what the write did (before answering, so that a caller's
    /// flush after its answer covers its change), then answers — in `postgres` mode once the
    /// flush holding the batch commits.
    private mutating func finishBatch(_ completion: BatchStateMachine.Completion, of current: BatchInFlight,
                                      now: ContinuousClock.Instant, into actions: inout [Action]) {
        book(completion, of: current, now: now, into: &actions)
        end(current, answering: completion, now: now, into: &actions)
    }

    /// What the batch's write did, into the books: the flusher's, the lists' index, the hot set,
    /// the statistics.
    private mutating func book(_ completion: BatchStateMachine.Completion, of current: BatchInFlight,
                               now: ContinuousClock.Instant, into actions: inout [Action]) {
        if !completion.uncertainSlots.isEmpty { wake(scheduler.uncertain(completion.uncertainSlots)) }
        stats.record(completion.statistics)
        for (change, entry) in completion.logged { pendingLikes.logged(change, in: entry) }
        if configuration.hotIdle != nil || configuration.hotMemoryTarget != nil {
            // A written post is touched by its change: one queue slot per post and batch.
            for (post, id) in completion.newestChanges { hotPosts.changed(post, in: id, at: now) }
            hotPosts.touched(completion.touched.lazy.filter { completion.newestChanges[$0] == nil }, at: now)
            // A write whose outcome is unknown may have logged changes under an entry no id
            // names: evicting such a post on its older entry's flush would leave one of its
            // changes only in the log while its reads go to PostgreSQL (found by the
            // whole-shard model test).
            if !completion.uncertainSlots.isEmpty {
                for operation in current.operations where completion.uncertainSlots.contains(operation.slot) {
                    hotPosts.changedInUnknownEntry(operation.request.postID)
                }
            }
        }
        if !completion.appended.isEmpty { wake(scheduler.appended(completion.appended, now: now)) }
        if !completion.warmLookups.isEmpty { countWarmLookups(completion.warmLookups, epochs: current.epochs, now: now, into: &actions) }
    }

    /// The batch is over: its answers, and what waited for it to end.
    private mutating func end(_ current: BatchInFlight, answering completion: BatchStateMachine.Completion,
                              now: ContinuousClock.Instant, into actions: inout [Action]) {
        batch = nil
        lastTakeDone = current.take
        if !completion.answers.isEmpty { actions.append(.answerBatch(current.operations, completion.answers)) }
        if let (marks, waiting) = completion.afterApplied {
            let answers = waiting.compactMap { answer -> (ShardOperation, LikeState)? in
                guard case .success(let state) = answer.result else { return nil }
                return (current.operations[answer.request], state)
            }
            addWaiter(marks: marks, .acknowledgements(answers), now: now, into: &actions)
        }
        // Slots being handed off waited for this batch to end.
        if !quiescingSlots.isEmpty {
            for slot in quiescingSlots.sorted() { move(slot, .batchEnded, now: now, into: &actions) }
        }
        // So did repairs of slots whose master failed over meanwhile.
        if !failoversAfterBatch.isEmpty {
            let slots = failoversAfterBatch.sorted()
            failoversAfterBatch = []
            redisFailedOver(slots, now: now, into: &actions)
        }
    }

    // MARK: - Operations waiting for their slot

    /// Operations parked on `slot` go to the front of the queue (the slot is served now).
    mutating func admitParked(_ slot: UInt16) {
        guard let parked = slotParked.removeValue(forKey: slot) else { return }
        queued.insert(contentsOf: parked.map(\.operation), at: 0)
    }

    /// Operations parked on `slot` are refused: another node decides them.
    mutating func refuseParked(_ slot: UInt16, into actions: inout [Action]) {
        guard let parked = slotParked.removeValue(forKey: slot) else { return }
        let refusal = CounterError.notOwner(slot)
        actions.append(.answer(parked.map { ($0.operation, .failure(refusal)) }))
    }

    /// Parked operations whose wait has run out are refused: `slotMoving` while the slot
    /// changes owner, `notOwner` when it never came here.
    mutating func expireParked(now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard !slotParked.isEmpty else { return }
        var refused: [(ShardOperation, Result<LikeState, CounterError>)] = []
        for slot in Array(slotParked.keys) {
            var remaining = slotParked[slot]!
            let expired = remaining.prefix { $0.until <= now }
            guard !expired.isEmpty else { continue }
            remaining.removeFirst(expired.count)
            let refusal: CounterError = slotState(slot) == .notOwned
                ? .notOwner(slot)
                : CounterError(code: .slotMoving,
                               message: "slot \(slot) is changing owner and did not settle within \(configuration.slotMoveWait); nothing was done",
                               retryAfterSeconds: 1)
            refused += expired.map { ($0.operation, .failure(refusal)) }
            slotParked[slot] = remaining.isEmpty ? nil : remaining
        }
        if !refused.isEmpty { actions.append(.answer(refused)) }
    }

    // MARK: - Promotions of warm posts

    /// Promotions a shard runs at once; others wait their turn. Each load holds a PostgreSQL
    /// connection of the pool (shared with the flusher and the batches) while it runs.
    static let concurrentLargeLoads = 2

    /// A post of this many likers is large: the default `streamingHydrationThreshold`, from
    /// which a cold post is written warm (every promotion's start and end are logged,
    /// `hydrating_large_post`).
    static let largePostLikers = 10_000

    /// Counts the PostgreSQL lookups of warm posts' users; a post that reaches
    /// `warmPromotionLookups` is promoted: loaded whole in the background while it keeps
    /// answering warm, published between batches under the epoch its batch held (a fenced batch
    /// that held none promotes nothing).
    private mutating func countWarmLookups(_ lookups: [Int64: Int], epochs: [UInt16: Int64]?, now: ContinuousClock.Instant,
                                           into actions: inout [Action]) {
        for (post, count) in lookups.sorted(by: { $0.key < $1.key }) where largeLoads[post] == nil {
            let total = warmLookups[post, default: 0] + count
            guard total >= configuration.warmPromotionLookups else {
                warmLookups[post] = total
                continue
            }
            let epoch = epochs?[HashSlot(post: post).rawValue]
            if isFenced && epoch == nil { continue }
            warmLookups[post] = nil
            largeLoads[post] = LargeLoad(epoch: epoch, started: now)
        }
        startLargeLoads(into: &actions)
    }

    /// Starts waiting loads while fewer than `concurrentLargeLoads` run.
    mutating func startLargeLoads(into actions: inout [Action]) {
        var running = largeLoads.values.filter(\.isRunning).count
        for post in largeLoads.keys.sorted() where running < Self.concurrentLargeLoads {
            guard case .waiting = largeLoads[post]!.phase else { continue }
            largeLoads[post]!.phase = .loading
            running += 1
            actions.append(.log(ShardLogLine(.info, "hydrating_large_post", [("shard", String(index)), ("post", String(post)),
                                                                           ("phase", "started")])))
            actions.append(.loadLargePost(post))
        }
    }

    /// A background load ended: its publication waits for the gap between two batches.
    mutating func largePostLoaded(_ hydration: LargePostHydration, _ result: Result<Int, Error>) {
        guard largeLoads[hydration.post] != nil else { return }
        largeLoads[hydration.post]!.phase = .loaded(hydration, result)
        betweenBatches.append(.publish(post: hydration.post))
    }

    /// Large posts whose Redis copy is being reset or dropped: their loads are not published.
    mutating func cancelLargeLoads(of posts: [Int64]) {
        guard !largeLoads.isEmpty else { return }
        for post in posts where largeLoads[post] != nil { largeLoads[post]!.cancelled = true }
    }
}
