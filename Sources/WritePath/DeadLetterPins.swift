/// The posts a shard must keep in Redis because the dead-letter stream holds changes of theirs.
///
/// A change PostgreSQL refused is acknowledged and stays in the post's likers set, but not in
/// PostgreSQL: until it is replayed (or dropped), Redis is the only place that answers it, and a
/// replay reads the membership there to tell a letter still wanted from one a later change
/// superseded. Evicting such a post would answer its reads from PostgreSQL without the change and
/// make the replay drop it. So a post with letters is *pinned*: never evicted.
///
/// Pins come from two places: this shard's flusher, the moment it writes letters; and complete
/// reads of the stream (`HotSetSweeper`), which also end pins of letters replayed or dropped. A
/// read replaces the pins, except those the flusher added since the read began. Until a read
/// that began after the shard last gained a slot (the start, a claim), the shard does not know
/// the letters other processes wrote for its posts, and evicts nothing. Pure: no I/O.
struct DeadLetterPins {
    /// The posts pinned now.
    private(set) var posts: Set<Int64> = []
    /// Pins the flusher added, with when: kept through a read that began before them.
    private var addedAt: [Int64: ContinuousClock.Instant] = [:]
    /// When the newest complete read of the stream began (`nil`: none yet).
    private(set) var readStartedAt: ContinuousClock.Instant?
    /// When the shard last gained a slot.
    private(set) var slotsGainedAt: ContinuousClock.Instant

    /// Pins of a shard that serves its slots from `now` (or gains them later).
    init(now: ContinuousClock.Instant) {
        slotsGainedAt = now
    }

    /// Whether `post` must stay in Redis: it is pinned, or the letters are not known yet.
    func holds(_ post: Int64) -> Bool {
        guard let readStartedAt, readStartedAt >= slotsGainedAt else { return true }
        return posts.contains(post)
    }

    /// The flusher wrote letters of `posts` at `now`.
    mutating func lettersWritten(of posts: some Sequence<Int64>, at now: ContinuousClock.Instant) {
        for post in posts {
            self.posts.insert(post)
            addedAt[post] = now
        }
    }

    /// A complete read of the stream that began at `started` found letters of `posts` (this
    /// shard's): they are the pins now, with those the flusher added since `started`. A read
    /// older than the newest one taken is ignored.
    mutating func read(_ posts: Set<Int64>, startedAt started: ContinuousClock.Instant) {
        if let readStartedAt, started < readStartedAt { return }
        readStartedAt = started
        addedAt = addedAt.filter { $0.value >= started }
        self.posts = posts.union(addedAt.keys)
    }

    /// The shard began serving a slot at `now`: letters of its posts written elsewhere are known
    /// only from the next read.
    mutating func slotGained(at now: ContinuousClock.Instant) {
        slotsGainedAt = max(slotsGainedAt, now)
    }
}
