import Persistence
import ShardRouter

/// Eviction: a hot or warm post untouched for `hotIdle` — or, while Redis is above its memory
/// target, the least recently touched — leaves Redis — its hydration marker, likers set and warm
/// hash are deleted, fenced by its slot's epoch like every write — once PostgreSQL has all of it.
/// The post is cold then: its reads are answered from PostgreSQL, its next write loads it again
/// (or turns it warm, from 10,000 likers).
///
/// A post is evicted only when nothing of it is pending: its slot's log is known (not
/// uncertain), and the newest entry holding one of its changes written by this shard is applied
/// (or, for a post this shard never wrote, the slot's whole log is); no change of it waits in
/// the dead-letter stream (`DeadLetterPins`: Redis is then the only record of that change); no
/// batch runs (eviction is work between batches), it is not loading in the background, and its
/// slot is served here.
/// The deletion is one atomic transaction, so a crash or a Redis restart leaves the post either
/// hot and whole, warm with its hash, or cold — each read correctly by the next touch.
extension ShardStateMachine {
    /// Most posts one eviction deletes (one transaction per post, in one pipeline).
    static let evictionsPerRound = 1_000

    /// How soon the next round comes after one that evicted a full `evictionsPerRound`: more
    /// idle posts are likely waiting (a million posts gone idle at once leave at up to 20,000
    /// a second per shard, not at one round per `evictionCheckInterval`).
    static let evictionBacklogInterval = Duration.milliseconds(50)

    /// How often idle posts are looked for: a quarter of `hotIdle`, between 50 ms and 5 s.
    static func evictionCheckInterval(_ configuration: WritePathConfiguration) -> Duration {
        guard let idle = configuration.hotIdle else { return .seconds(5) }
        return min(.seconds(5), max(.milliseconds(50), idle / 4))
    }

    /// Queues an eviction of idle posts when one is due (called between batches, when no other
    /// work between batches waits).
    mutating func startEviction(now: ContinuousClock.Instant) {
        guard let idle = configuration.hotIdle, !hotPosts.isEmpty, now >= nextEvictionCheck, accepting else { return }
        let candidates = hotPosts.takeIdle(touchedBefore: now - idle, limit: Self.evictionsPerRound)
        let evicting = evict(candidates, reason: .idle)
        nextEvictionCheck = now + (evicting == Self.evictionsPerRound ? Self.evictionBacklogInterval : Self.evictionCheckInterval(configuration))
    }

    /// Redis is above its memory target where `slots` live (`nil`: everywhere): the least
    /// recently touched posts there go, idle or not, as far as nothing of them is pending.
    mutating func shrink(slots: Set<UInt16>?, count: Int) {
        guard accepting, count > 0, !hotPosts.isEmpty else { return }
        let candidates = hotPosts.takeLeastRecent(limit: min(count, Self.evictionsPerRound)) { post in
            slots.map { $0.contains(HashSlot(post: post).rawValue) } ?? true
        }
        evict(candidates, reason: .memory)
    }

    /// A sweep found `posts` in Redis: those of slots this shard owns are tracked, as touched
    /// now (evicted once idle like any other) — except those evicted since the walk began (its
    /// page may have been read before their deletion).
    mutating func discovered(_ posts: [Int64], now: ContinuousClock.Instant) {
        let evictedMeanwhile = evictedDuringDiscovery ?? []
        hotPosts.discovered(posts.filter { post in
            !evictedMeanwhile.contains(post) && slotState(HashSlot(post: post).rawValue) != .notOwned
        }, at: now)
    }

    /// Queues the eviction of the `candidates` that may go (it starts with the work between
    /// batches, after the event); those that may not yet go back in the queue, those of slots no
    /// longer here are forgotten. Returns how many are queued.
    @discardableResult
    private mutating func evict(_ candidates: [(post: Int64, entry: HotPosts.Entry)], reason: EvictionReason) -> Int {
        guard !candidates.isEmpty else { return 0 }
        let evicting = sortForEviction(candidates).posts
        guard !evicting.isEmpty else { return 0 }
        betweenBatches.append(.evict(evicting, reason))
        return evicting.count
    }

    /// The posts of a queued eviction that may still go as it starts, with the epochs their
    /// deletion carries (`nil` for a sole writer). A memory shrink is an event, and it may come
    /// while a batch runs: a post judged then may have been written by that batch since, and
    /// deleting it would leave a change PostgreSQL lacks in the log of a post read cold from
    /// PostgreSQL (found by the whole-shard model test). So every eviction is judged again
    /// here, between batches, where nothing can write meanwhile; those that may not go yet are
    /// requeued, those of slots no longer here forgotten.
    mutating func stillEvictable(_ posts: [Int64]) -> (posts: [Int64], epochs: [UInt16: Int64]?) {
        sortForEviction(posts.compactMap { post in hotPosts.entry(of: post).map { (post, $0) } })
    }

    /// Sorts `candidates` by `evictability`: returns those that may go, with their epochs; puts
    /// those that may not yet back in the queue and forgets those of slots no longer here.
    private mutating func sortForEviction(_ candidates: [(post: Int64, entry: HotPosts.Entry)]) -> (posts: [Int64], epochs: [UInt16: Int64]?) {
        var evicting: [Int64] = []
        var notYet: [Int64] = []
        var elsewhere: [Int64] = []
        var epochs: [UInt16: Int64] = [:]
        for (post, entry) in candidates {
            let slot = HashSlot(post: post).rawValue
            switch evictability(of: post, entry, slot: slot) {
            case .evictable(let epoch):
                evicting.append(post)
                if isFenced { epochs[slot] = epoch }
            case .pending:
                notYet.append(post)
            case .notOwned:
                elsewhere.append(post)
            }
        }
        hotPosts.requeue(notYet)
        hotPosts.forget(elsewhere)
        return (evicting, isFenced ? epochs : nil)
    }

    /// Whether `post` may leave Redis now.
    enum Evictability: Equatable {
        /// Yes, written under this epoch.
        case evictable(epoch: Int64)
        /// Not yet: something of it is pending, it is loading, or its slot is moving.
        case pending
        /// Its slot is not this shard's (any more): another node keeps it.
        case notOwned
    }

    /// The rules of eviction for one post (pure: the machine's books only).
    func evictability(of post: Int64, _ entry: HotPosts.Entry, slot: UInt16) -> Evictability {
        let epoch: Int64
        switch slotState(slot) {
        case .serving(let served): epoch = served
        case .notOwned: return .notOwned
        case .claiming, .draining, .quiescing, .flushing, .handingOver, .repairing: return .pending
        }
        if largeLoads[post] != nil || scheduler.uncertainSlots.contains(slot) || deadLetterPins.holds(post) { return .pending }
        // Its slot's log holds nothing PostgreSQL lacks, or at least not this post's changes.
        let applied = entry.newestChange.map { scheduler.isApplied([slot: $0]) } ?? false
        guard applied || !scheduler.hasPendingChanges(inSlot: slot) else { return .pending }
        return .evictable(epoch: epoch)
    }

    /// The eviction's transactions ended: the posts deleted are cold now; those that failed
    /// stay hot and are tried again later (those whose slot was fenced leave with the slot).
    mutating func evicted(_ posts: [Int64], failed: Set<Int64>, reason: EvictionReason) {
        let gone = posts.filter { !failed.contains($0) }
        hotPosts.forget(gone)
        evictedDuringDiscovery?.formUnion(gone)
        if !warmLookups.isEmpty { for post in gone { warmLookups[post] = nil } }
        stats.evictedPosts += gone.count
        if reason == .memory { stats.evictedForMemory += gone.count }
        if !failed.isEmpty {
            stats.redisErrors += 1
            hotPosts.requeue(posts.filter { failed.contains($0) })
        }
    }
}

/// Why posts were evicted.
enum EvictionReason: Sendable, Equatable {
    /// Untouched for `hotIdle`.
    case idle
    /// Redis was above its memory target (`hotMemoryTarget`).
    case memory
}
