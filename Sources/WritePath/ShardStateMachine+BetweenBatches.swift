import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// Work that must not overlap a batch — publishing a warm post's promotion, resetting posts' keys
/// from PostgreSQL (a resync), deleting the keys of posts PostgreSQL no longer has — one item
/// at a time, while no batch runs; and questions about a slot's log that need its length.
extension ShardStateMachine {
    /// Starts the next item, if any (items that need no I/O end at once, and the next starts).
    mutating func startBetweenBatchesWork(now: ContinuousClock.Instant, into actions: inout [Action]) {
        if betweenBatchesRunning == nil && betweenBatches.isEmpty { startEviction(now: now) }
        while betweenBatchesRunning == nil, !betweenBatches.isEmpty {
            let work = betweenBatches.removeFirst()
            switch work {
            case .publish(let post):
                startPublication(post, now: now, into: &actions)
            case .resync(let posts, let reply):
                startResync(posts, reply: reply, into: &actions)
            case .resyncUnloading:
                break
            case .dropDeleted(let posts):
                betweenBatchesRunning = work
                actions.append(.unloadPosts(posts, epochs: writeEpochs(of: posts), .deleted))
            case .evict(let queued, let reason):
                let (posts, epochs) = stillEvictable(queued)
                guard !posts.isEmpty else { continue }
                betweenBatchesRunning = .evict(posts, reason)
                actions.append(.unloadPosts(posts, epochs: epochs, .evicted(reason)))
            }
        }
    }

    // MARK: - Promotions of warm posts

    /// Publishes a warm post's promotion under the epoch held by the batch that started it — or,
    /// when its Redis copy was reset or dropped meanwhile, discards it.
    private mutating func startPublication(_ post: Int64, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard let load = largeLoads[post], case .loaded(let hydration, let result) = load.phase else { return }
        // A write of the post's slot may or may not have run (its connection broke): it could
        // still land after the publication, on a hash the publication dropped. Given up; the
        // post stays warm and is promoted later.
        if load.cancelled || scheduler.uncertainSlots.contains(HashSlot(post: post).rawValue) {
            largeLoads[post] = nil
            actions.append(.discardLargePost(hydration))
            startLargeLoads(into: &actions)
            return
        }
        switch result {
        case .success(let loaded):
            largeLoads[post]!.phase = .publishing(hydration, loaded: loaded)
            betweenBatchesRunning = .publish(post: post)
            actions.append(.publishLargePost(hydration, loaded: loaded, epoch: load.epoch))
        case .failure(let error):
            largeLoads[post] = nil
            largeLoadFailed(post, error, hydration: hydration, into: &actions)
            startLargeLoads(into: &actions)
        }
    }

    mutating func largePostPublished(_ post: Int64, _ result: Result<Void, Error>, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard case .publish(let running)? = betweenBatchesRunning, running == post else { return }
        betweenBatchesRunning = nil
        guard let load = largeLoads.removeValue(forKey: post), case .publishing(let hydration, let loaded) = load.phase else { return }
        switch result {
        case .success:
            actions.append(.log(ShardLogLine(.info, "hydrating_large_post", [
                ("shard", String(index)), ("post", String(post)), ("phase", "loaded"), ("likers", String(loaded)),
                ("promoted_from", "warm"), ("ms", String(Int((now - load.started).inSeconds * 1_000))),
            ])))
            stats.promotedPosts += 1
        case .failure(let error):
            largeLoadFailed(post, error, hydration: hydration, into: &actions)
        }
        startLargeLoads(into: &actions)
    }

    /// A promotion failed: the post stays warm, and its count of lookups starts again from
    /// zero, so it is tried again only after another `warmPromotionLookups` (a post whose
    /// `likes_count` drifted from its rows fails every time with `MISMATCH`: reconcile repairs
    /// it; meanwhile it is not loaded again and again).
    private mutating func largeLoadFailed(_ post: Int64, _ error: Error, hydration: LargePostHydration, into actions: inout [Action]) {
        count(error)
        warmLookups[post] = 0
        actions.append(.discardLargePost(hydration))
        actions.append(.log(ShardLogLine(.warn, "hydrating_large_post", [("shard", String(index)), ("post", String(post)),
                                                                        ("phase", "failed"), ("error", "\(error)")])))
    }

    // MARK: - Resync

    /// A resync resets the keys of the posts whose slots have nothing waiting for PostgreSQL
    /// (PostgreSQL does not have what waits yet). When the books say a slot has changes, its
    /// log's length is read first: after a failover dropped counted entries, only an empty log
    /// can tell that nothing waits.
    private mutating func startResync(_ posts: [Int64], reply: ShardReply<Set<Int64>>, into actions: inout [Action]) {
        cancelLargeLoads(of: posts)
        betweenBatchesRunning = .resync(posts, reply)
        var asked: [UInt16: StreamEntryID?] = [:]
        for post in posts {
            let slot = HashSlot(post: post).rawValue
            if scheduler.hasPendingChanges(inSlot: slot) && !scheduler.uncertainSlots.contains(slot) {
                asked[slot] = scheduler.newestAppended(inSlot: slot)
            }
        }
        if asked.isEmpty {
            unloadQuiet(posts, reply: reply, into: &actions)
        } else {
            actions.append(.readLogLengths(LogLengthQuestion(purpose: .resync, appendedWhenAsked: asked)))
        }
    }

    private mutating func unloadQuiet(_ posts: [Int64], reply: ShardReply<Set<Int64>>, into actions: inout [Action]) {
        let quiet = posts.filter { !scheduler.hasPendingChanges(inSlot: HashSlot(post: $0).rawValue) }
        guard !quiet.isEmpty else {
            betweenBatchesRunning = nil
            actions.append(.reply(reply.with([])))
            return
        }
        betweenBatchesRunning = .resyncUnloading(quiet, reply)
        actions.append(.unloadPosts(quiet, epochs: writeEpochs(of: quiet), .resync))
    }

    mutating func postsUnloaded(_ purpose: UnloadPurpose, failed: Set<Int64>, fenced: [FencedSlot], now: ContinuousClock.Instant,
                                into actions: inout [Action]) {
        slotsFenced(fenced, now: now, into: &actions)
        if case .repaired(let slots) = purpose {
            repairUnloaded(slots, failed: failed, now: now, into: &actions)
            return
        }
        switch (purpose, betweenBatchesRunning) {
        case (.resync, .resyncUnloading(let quiet, let reply)?):
            betweenBatchesRunning = nil
            hotPosts.forget(quiet.filter { !failed.contains($0) })
            actions.append(.reply(reply.with(Set(quiet).subtracting(failed))))
        case (.evicted(let reason), .evict(let posts, _)?):
            betweenBatchesRunning = nil
            evicted(posts, failed: failed, reason: reason)
        case (.deleted, .dropDeleted(let posts)?):
            betweenBatchesRunning = nil
            hotPosts.forget(posts.filter { !failed.contains($0) })
            // A failed delete is counted; the post is then refused only while remembered.
            if !failed.isEmpty { stats.redisErrors += 1 }
        default:
            break
        }
    }

    // MARK: - Log lengths

    /// Whether `slot`'s log may hold changes PostgreSQL does not have yet (also when a write's
    /// outcome there is unknown and the log has not been read again). When the books say so,
    /// the log's length is read.
    mutating func askPending(_ slot: UInt16, reply: ShardReply<Bool>, into actions: inout [Action]) {
        guard scheduler.hasPendingChanges(inSlot: slot) else {
            actions.append(.reply(reply.with(false)))
            return
        }
        if scheduler.uncertainSlots.contains(slot) {
            actions.append(.reply(reply.with(true)))
            return
        }
        actions.append(.readLogLengths(LogLengthQuestion(purpose: .pendingQuery(reply),
                                                         appendedWhenAsked: [slot: scheduler.newestAppended(inSlot: slot)])))
    }

    /// An empty log holds nothing, whatever the books counted (what they counted is applied,
    /// or was lost with a Redis node that failed over).
    mutating func logLengthsRead(_ question: LogLengthQuestion, _ lengths: [UInt16: Int], now: ContinuousClock.Instant,
                                 into actions: inout [Action]) {
        for (slot, length) in lengths.sorted(by: { $0.key < $1.key }) where length == 0 {
            guard let asked = question.appendedWhenAsked[slot] else { continue }
            let satisfied = scheduler.logFoundEmpty(slot: slot, appendedWhenAsked: asked)
            // An empty log holds nothing: what the index kept of it is applied (or was lost with
            // its Redis node, as Redis's own copy was).
            if let asked, !scheduler.hasPendingChanges(inSlot: slot) { pendingLikes.applied(slot: slot, through: asked) }
            resume(satisfied, now: now, into: &actions)
        }
        switch question.purpose {
        case .pendingQuery(let reply):
            let slot = question.appendedWhenAsked.keys.first ?? 0
            actions.append(.reply(reply.with(scheduler.hasPendingChanges(inSlot: slot))))
        case .resync:
            guard case .resync(let posts, let reply)? = betweenBatchesRunning else { return }
            unloadQuiet(posts, reply: reply, into: &actions)
        }
    }
}
