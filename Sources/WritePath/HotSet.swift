import CounterCore
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter

/// A shard's hot set as a state machine of its own: the posts it holds in Redis and when each was
/// last touched (`HotPosts`), their eviction, the posts pinned by dead letters (`DeadLetterPins`),
/// the sweeper's walks that find posts in Redis, and the promotion of warm posts (loaded whole in
/// the background, `WarmPostPromotion`).
///
/// Eviction: a hot or warm post untouched for `hotIdle` — or, while Redis is above its memory
/// target, the least recently touched — leaves Redis (its hydration marker, likers set and warm
/// hash are deleted, fenced by its slot's epoch like every write) once PostgreSQL has all of it.
/// The post is cold then: its reads are answered from PostgreSQL, its next write loads it again
/// (or turns it warm, from `warmThreshold` likers). A post is evicted only when nothing of it is
/// pending: its slot's log is known (not uncertain), and the newest entry holding one of its
/// changes written by this shard is applied (or, for a post this shard never wrote, the slot's
/// whole log is); no change of it waits in the dead-letter stream (Redis is then the only record
/// of that change); no batch runs (eviction is work between batches), it is not loading in the
/// background, and its slot is served here. The deletion is one atomic transaction, so a crash or
/// a Redis restart leaves the post either hot and whole, warm with its hash, or cold — each read
/// correctly by the next touch.
///
/// Its state is private: the router (`ShardStateMachine`) calls the methods below, which are its
/// events; what it needs of the slots and of the write-behind comes in read only. Work that must
/// not overlap a batch (an eviction, a promotion's publication) is handed back to the router,
/// which queues it on the batch lane.
struct HotSet {
    /// One warm post being promoted: loaded whole in the background while it answers warm.
    private struct Promotion {
        enum Phase {
            case waiting
            case loading
            case loaded(WarmPostPromotion, Result<Int, Error>)
            case publishing(WarmPostPromotion, loaded: Int)
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

    /// Whether a post may leave Redis now.
    enum Evictability: Equatable {
        /// Yes, written under this epoch.
        case evictable(epoch: Int64)
        /// Not yet: something of it is pending, it is loading, or its slot is moving.
        case pending
        /// Its slot is not this shard's (any more): another node keeps it.
        case notOwned
    }

    /// What the hot set has done, for the shard's statistics.
    struct Counters {
        var evictedPosts = 0
        var evictedForMemory = 0
        var promotedPosts = 0
        var redisErrors = 0
        var postgresErrors = 0
    }

    /// Promotions a shard runs at once; others wait their turn. Each load holds a PostgreSQL
    /// connection of the pool (shared with the flusher and the batches) while it runs.
    static let concurrentPromotions = 2

    /// A post of this many likers is large: the default `warmThreshold`, from which a cold post
    /// is written warm (every promotion's start and end are logged, `hydrating_large_post`).
    static let largePostLikers = 10_000

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

    // MARK: - State

    private let shard: Int
    private let configuration: WritePathConfiguration
    private let isFenced: Bool
    /// The posts this shard holds in Redis, least recently touched first.
    private var hotPosts = HotPosts()
    /// When idle posts are looked for next.
    private var nextEvictionCheck: ContinuousClock.Instant
    /// Posts with changes in the dead-letter stream, which stay in Redis.
    private var deadLetterPins: DeadLetterPins
    /// While a sweep walks Redis's markers: the posts evicted since it began (a page it read
    /// before their deletion would otherwise bring them back as hot). `nil` between walks.
    private var evictedDuringDiscovery: Set<Int64>?
    /// Warm posts being promoted.
    private var promotions: [Int64: Promotion] = [:]
    /// Per warm post, the memberships of its users looked up in PostgreSQL since it turned warm
    /// (or since this process started): at `warmPromotionLookups` it is promoted.
    private var warmLookups: [Int64: Int] = [:]
    private(set) var counters = Counters()

    init(shard: Int, configuration: WritePathConfiguration, isFenced: Bool, now: ContinuousClock.Instant) {
        self.shard = shard
        self.configuration = configuration
        self.isFenced = isFenced
        self.nextEvictionCheck = now + Self.evictionCheckInterval(configuration)
        self.deadLetterPins = DeadLetterPins(now: now)
    }

    /// Hot posts tracked.
    var count: Int { hotPosts.count }

    /// When idle posts are looked for next (the `eviction` timer), while any are tracked.
    var evictionDeadline: ContinuousClock.Instant? {
        configuration.hotIdle != nil && !hotPosts.isEmpty ? nextEvictionCheck : nil
    }

    // MARK: - What batches did

    /// What a batch's write did to the hot set: a written post is touched by its change (one
    /// queue slot per post and batch), a read one by its answer.
    mutating func batchWrote(_ completion: BatchStateMachine.Completion, operations: [ShardOperation], now: ContinuousClock.Instant) {
        guard configuration.hotIdle != nil || configuration.hotMemoryTarget != nil else { return }
        for (post, id) in completion.newestChanges { hotPosts.changed(post, in: id, at: now) }
        hotPosts.touched(completion.touched.lazy.filter { completion.newestChanges[$0] == nil }, at: now)
        // A write whose outcome is unknown may have logged changes under an entry no id names:
        // evicting such a post on its older entry's flush would leave one of its changes only in
        // the log while its reads go to PostgreSQL (found by the whole-shard model test).
        if !completion.uncertainSlots.isEmpty {
            for operation in operations where completion.uncertainSlots.contains(operation.slot) {
                hotPosts.changedInUnknownEntry(operation.request.postID)
            }
        }
    }

    // MARK: - Promotions of warm posts

    /// Counts the PostgreSQL lookups of warm posts' users; a post that reaches
    /// `warmPromotionLookups` is promoted: loaded whole in the background while it keeps
    /// answering warm, published between batches under the epoch its batch held (a fenced batch
    /// that held none promotes nothing).
    mutating func countWarmLookups(
        _ lookups: [Int64: Int], epochs: [UInt16: Int64]?, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) {
        for (post, count) in lookups.sorted(by: { $0.key < $1.key }) where promotions[post] == nil {
            let total = warmLookups[post, default: 0] + count
            guard total >= configuration.warmPromotionLookups else {
                warmLookups[post] = total
                continue
            }
            let epoch = epochs?[HashSlot(post: post).rawValue]
            if isFenced && epoch == nil { continue }
            warmLookups[post] = nil
            promotions[post] = Promotion(epoch: epoch, started: now)
        }
        startLoads(into: &actions)
    }

    /// Starts waiting loads while fewer than `concurrentPromotions` run.
    private mutating func startLoads(into actions: inout [ShardStateMachine.Action]) {
        var running = promotions.values.filter(\.isRunning).count
        for post in promotions.keys.sorted() where running < Self.concurrentPromotions {
            guard case .waiting = promotions[post]!.phase else { continue }
            promotions[post]!.phase = .loading
            running += 1
            actions.append(
                .log(ShardLogLine(.info, "hydrating_large_post", [("shard", String(shard)), ("post", String(post)), ("phase", "started")])))
            actions.append(.loadWarmPost(post))
        }
    }

    /// A background load ended: its publication waits for the gap between two batches (the
    /// caller queues it).
    mutating func loaded(_ hydration: WarmPostPromotion, _ result: Result<Int, Error>, into actions: inout [ShardStateMachine.Action]) {
        guard promotions[hydration.post] != nil else {
            ShardStateMachine.unexpected(
                "a large post loaded that is not being promoted", shard: shard,
                state: "promotions of \(promotions.keys.sorted())", into: &actions)
            return
        }
        promotions[hydration.post]!.phase = .loaded(hydration, result)
    }

    /// Publishes a loaded promotion under the epoch held by the batch that started it — or,
    /// when its Redis copy was reset or dropped meanwhile, or a write of its slot may or may not
    /// have run (`slotUncertain`: it could still land after the publication, on a hash the
    /// publication dropped), discards it; the post stays warm and is promoted later. Whether
    /// the publication runs now (between batches, until `published`).
    mutating func publish(_ post: Int64, slotUncertain: Bool, into actions: inout [ShardStateMachine.Action]) -> Bool {
        guard let promotion = promotions[post], case .loaded(let hydration, let result) = promotion.phase else {
            ShardStateMachine.unexpected(
                "a publication of post \(post), which has not loaded", shard: shard,
                state: "promotions of \(promotions.keys.sorted())", into: &actions)
            return false
        }
        if promotion.cancelled || slotUncertain {
            promotions[post] = nil
            actions.append(.discardPromotion(hydration))
            startLoads(into: &actions)
            return false
        }
        switch result {
        case .success(let loaded):
            promotions[post]!.phase = .publishing(hydration, loaded: loaded)
            actions.append(.publishPromotion(hydration, loaded: loaded, epoch: promotion.epoch))
            return true
        case .failure(let error):
            promotions[post] = nil
            promotionFailed(post, error, hydration: hydration, into: &actions)
            startLoads(into: &actions)
            return false
        }
    }

    /// A publication ended.
    mutating func published(
        _ post: Int64, _ result: Result<Void, Error>, now: ContinuousClock.Instant,
        into actions: inout [ShardStateMachine.Action]
    ) {
        guard let promotion = promotions.removeValue(forKey: post), case .publishing(let hydration, let loaded) = promotion.phase else {
            ShardStateMachine.unexpected(
                "post \(post) published while no publication of it runs", shard: shard,
                state: "promotions of \(promotions.keys.sorted())", into: &actions)
            return
        }
        switch result {
        case .success:
            actions.append(
                .log(
                    ShardLogLine(
                        .info, "hydrating_large_post",
                        [
                            ("shard", String(shard)), ("post", String(post)), ("phase", "loaded"), ("likers", String(loaded)),
                            ("promoted_from", "warm"), ("ms", String(Int((now - promotion.started).inSeconds * 1_000))),
                        ])))
            counters.promotedPosts += 1
        case .failure(let error):
            promotionFailed(post, error, hydration: hydration, into: &actions)
        }
        startLoads(into: &actions)
    }

    /// A promotion failed: the post stays warm, and its count of lookups starts again from
    /// zero, so it is tried again only after another `warmPromotionLookups` (a post whose
    /// `likes_count` drifted from its rows fails every time with `MISMATCH`: reconcile repairs
    /// it; meanwhile it is not loaded again and again).
    private mutating func promotionFailed(
        _ post: Int64, _ error: Error, hydration: WarmPostPromotion,
        into actions: inout [ShardStateMachine.Action]
    ) {
        if error is RedisError { counters.redisErrors += 1 }
        if error is PostgresError { counters.postgresErrors += 1 }
        warmLookups[post] = 0
        actions.append(.discardPromotion(hydration))
        actions.append(
            .log(
                ShardLogLine(
                    .warn, "hydrating_large_post",
                    [
                        ("shard", String(shard)), ("post", String(post)),
                        ("phase", "failed"), ("error", "\(error)"),
                    ])))
    }

    /// Large posts whose Redis copy is being reset or dropped: their loads are not published.
    mutating func cancelPromotions(of posts: [Int64]) {
        guard !promotions.isEmpty else { return }
        for post in posts where promotions[post] != nil { promotions[post]!.cancelled = true }
    }

    /// The shard stops: no promotion is published.
    mutating func cancelAllPromotions() {
        for post in promotions.keys { promotions[post]!.cancelled = true }
    }

    // MARK: - Eviction

    /// The idle posts to evict now, when a check is due (called between batches, when no other
    /// work between batches waits): those that may go, for the caller to queue.
    mutating func idleToEvict(now: ContinuousClock.Instant, slots: SlotOwnership, flushes: WriteBehind) -> [Int64] {
        guard let idle = configuration.hotIdle, !hotPosts.isEmpty, now >= nextEvictionCheck else { return [] }
        let candidates = hotPosts.takeIdle(touchedBefore: now - idle, limit: Self.evictionsPerRound)
        let evicting = candidates.isEmpty ? [] : sortForEviction(candidates, slots: slots, flushes: flushes).posts
        nextEvictionCheck =
            now + (evicting.count == Self.evictionsPerRound ? Self.evictionBacklogInterval : Self.evictionCheckInterval(configuration))
        return evicting
    }

    /// Redis is above its memory target where `slots` live (`nil`: everywhere): the least
    /// recently touched posts there go, idle or not, as far as nothing of them is pending.
    mutating func toShrink(slots inSlots: Set<UInt16>?, count: Int, slots: SlotOwnership, flushes: WriteBehind) -> [Int64] {
        guard count > 0, !hotPosts.isEmpty else { return [] }
        let candidates = hotPosts.takeLeastRecent(limit: min(count, Self.evictionsPerRound)) { post in
            inSlots.map { $0.contains(HashSlot(post: post).rawValue) } ?? true
        }
        guard !candidates.isEmpty else { return [] }
        return sortForEviction(candidates, slots: slots, flushes: flushes).posts
    }

    /// The posts of a queued eviction that may still go as it starts, with the epochs their
    /// deletion carries (`nil` for a sole writer). A memory shrink is an event, and it may come
    /// while a batch runs: a post judged then may have been written by that batch since, and
    /// deleting it would leave a change PostgreSQL lacks in the log of a post read cold from
    /// PostgreSQL (found by the whole-shard model test). So every eviction is judged again
    /// here, between batches, where nothing can write meanwhile; those that may not go yet are
    /// requeued, those of slots no longer here forgotten.
    mutating func stillEvictable(_ posts: [Int64], slots: SlotOwnership, flushes: WriteBehind) -> (posts: [Int64], epochs: [UInt16: Int64]?) {
        sortForEviction(posts.compactMap { post in hotPosts.entry(of: post).map { (post, $0) } }, slots: slots, flushes: flushes)
    }

    /// Sorts `candidates` by `evictability`: returns those that may go, with their epochs; puts
    /// those that may not yet back in the queue and forgets those of slots no longer here.
    private mutating func sortForEviction(
        _ candidates: [(post: Int64, entry: HotPosts.Entry)], slots: SlotOwnership,
        flushes: WriteBehind
    ) -> (posts: [Int64], epochs: [UInt16: Int64]?) {
        var evicting: [Int64] = []
        var notYet: [Int64] = []
        var elsewhere: [Int64] = []
        var epochs: [UInt16: Int64] = [:]
        for (post, entry) in candidates {
            let slot = HashSlot(post: post).rawValue
            switch evictability(of: post, entry, slot: slot, slots: slots, flushes: flushes) {
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

    /// The rules of eviction for one post.
    func evictability(of post: Int64, _ entry: HotPosts.Entry, slot: UInt16, slots: SlotOwnership, flushes: WriteBehind) -> Evictability {
        let epoch: Int64
        switch slots.state(of: slot) {
        case .serving(let served): epoch = served
        case .notOwned: return .notOwned
        case .claiming, .draining, .quiescing, .flushing, .handingOver, .repairing: return .pending
        }
        if promotions[post] != nil || flushes.isUncertain(slot) || deadLetterPins.holds(post) { return .pending }
        // Its slot's log holds nothing PostgreSQL lacks, or at least not this post's changes.
        let applied = entry.newestChange.map { flushes.isApplied($0, inSlot: slot) } ?? false
        guard applied || !flushes.hasPendingChanges(inSlot: slot) else { return .pending }
        return .evictable(epoch: epoch)
    }

    /// The eviction's transactions ended: the posts deleted are cold now; those that failed
    /// stay hot and are tried again later (those whose slot was fenced leave with the slot).
    mutating func evicted(_ posts: [Int64], failed: Set<Int64>, reason: EvictionReason) {
        let gone = posts.filter { !failed.contains($0) }
        hotPosts.forget(gone)
        evictedDuringDiscovery?.formUnion(gone)
        if !warmLookups.isEmpty { for post in gone { warmLookups[post] = nil } }
        counters.evictedPosts += gone.count
        if reason == .memory { counters.evictedForMemory += gone.count }
        if !failed.isEmpty {
            counters.redisErrors += 1
            hotPosts.requeue(posts.filter { failed.contains($0) })
        }
    }

    /// `posts` left Redis otherwise (a resync, a repair, a post PostgreSQL no longer has): they
    /// are cold now.
    mutating func forget(_ posts: some Sequence<Int64>) {
        hotPosts.forget(posts)
    }

    /// Deleting the keys of posts PostgreSQL no longer has ended; a failed delete is counted (the
    /// post is then refused only while it is remembered missing).
    mutating func deletedPostsUnloaded(_ posts: [Int64], failed: Set<Int64>) {
        hotPosts.forget(posts.filter { !failed.contains($0) })
        if !failed.isEmpty { counters.redisErrors += 1 }
    }

    // MARK: - The sweeper's walks and dead letters

    /// A sweep's walk of Redis's markers begins.
    mutating func discoveryBegan() {
        evictedDuringDiscovery = []
    }

    /// A sweep found `posts` in Redis: those of slots this shard owns are tracked, as touched
    /// now (evicted once idle like any other) — except those evicted since the walk began (its
    /// page may have been read before their deletion).
    mutating func discovered(_ posts: [Int64], now: ContinuousClock.Instant, slots: SlotOwnership) {
        let evictedMeanwhile = evictedDuringDiscovery ?? []
        hotPosts.discovered(
            posts.filter { post in
                !evictedMeanwhile.contains(post) && slots.state(of: HashSlot(post: post).rawValue) != .notOwned
            }, at: now)
    }

    /// The walk is over (whole or not).
    mutating func discoveryEnded() {
        evictedDuringDiscovery = nil
    }

    /// A complete read of the dead-letter stream, begun at `started`, found refused changes of
    /// `posts`.
    mutating func deadLettersRead(_ posts: Set<Int64>, startedAt started: ContinuousClock.Instant) {
        deadLetterPins.read(posts, startedAt: started)
    }

    /// The flusher wrote letters of refused changes of `posts` at `now`: they stay in Redis.
    mutating func lettersWritten(of posts: [Int64], at now: ContinuousClock.Instant) {
        deadLetterPins.lettersWritten(of: posts, at: now)
    }

    /// The shard began serving a slot at `now`.
    mutating func slotGained(at now: ContinuousClock.Instant) {
        deadLetterPins.slotGained(at: now)
    }

    // MARK: - The end

    /// The shard's loop ends: loaded promotions nobody will publish are discarded.
    mutating func finish(into actions: inout [ShardStateMachine.Action]) {
        for (_, promotion) in promotions {
            if case .loaded(let hydration, _) = promotion.phase { actions.append(.discardPromotion(hydration)) }
        }
        promotions = [:]
    }
}

/// Why posts were evicted.
enum EvictionReason: Sendable, Equatable {
    /// Untouched for `hotIdle`.
    case idle
    /// Redis was above its memory target (`hotMemoryTarget`).
    case memory
}
