import RedisDriver
import ShardRouter

/// The posts a shard holds in Redis (hot), in the order they were last touched, with the newest
/// log entry that holds a change of each: what eviction needs to pick the idle ones and to know
/// whether PostgreSQL has all of a post.
///
/// A post enters when a batch answers it from Redis (it was hot already, or the batch loaded
/// it) and leaves when it is evicted, unloaded, or found on a slot the shard no longer owns.
/// Least recently touched first: a touch moves a post to the back of a queue; the slot it left
/// goes stale (its sequence no longer matches) and is skipped when it reaches the front, and
/// the queue is compacted once the stale slots outnumber the live ones — constant work per
/// touch, amortised.
///
/// Pure: the caller passes the time, which must never go back (`ContinuousClock` does not).
struct HotPosts {
    /// What is known of one hot post.
    struct Entry: Equatable {
        var lastTouched: ContinuousClock.Instant
        /// The newest log entry holding a change of the post written by this shard (`nil`: none
        /// since the shard started tracking it — what came before, if anything, is judged by
        /// its slot's whole log).
        var newestChange: StreamEntryID?
        /// Which queue slot is this entry's.
        var sequence: UInt64
    }

    private var entries: [Int64: Entry] = [:]
    private var queue: [(post: Int64, sequence: UInt64)] = []
    private var head = 0
    private var nextSequence: UInt64 = 0

    /// Hot posts tracked.
    var count: Int { entries.count }

    var isEmpty: Bool { entries.isEmpty }

    /// Queue slots held, stale ones included; about twice `count` at most (plus a constant).
    var queuedSlots: Int { queue.count - head }

    /// What is known of `post`; `nil` when it is not tracked as hot.
    func entry(of post: Int64) -> Entry? { entries[post] }

    /// `posts` were answered from Redis at `now`: each is hot, touched now.
    mutating func touched(_ posts: some Sequence<Int64>, at now: ContinuousClock.Instant) {
        for post in posts { touch(post, at: now) }
    }

    /// A change of `post` went into the log entry `id` (and the post was touched at `now`).
    mutating func changed(_ post: Int64, in id: StreamEntryID, at now: ContinuousClock.Instant) {
        touch(post, at: now)
        if let newest = entries[post]?.newestChange, newest >= id { return }
        entries[post]?.newestChange = id
    }

    /// A write of `post` may have logged a change under an entry nobody knows (its connection
    /// broke after the write may have run): the newest entry known for it no longer bounds its
    /// changes, so it is forgotten, and the post is judged by its slot's whole log until a
    /// later change names a newer entry.
    mutating func changedInUnknownEntry(_ post: Int64) {
        entries[post]?.newestChange = nil
    }

    /// `posts` were found in Redis (hot) at `now` by a sweep: those not tracked yet are, as
    /// touched now; those tracked keep their last touch.
    mutating func discovered(_ posts: some Sequence<Int64>, at now: ContinuousClock.Instant) {
        for post in posts where entries[post] == nil { touch(post, at: now) }
    }

    /// Stops tracking `posts` (evicted, unloaded, or another node's now).
    mutating func forget(_ posts: some Sequence<Int64>) {
        for post in posts { entries[post] = nil }
    }

    /// The least recently touched posts last touched before `cutoff`, oldest first, at most
    /// `limit`: they leave the queue (and stay tracked, so `requeue(_:)` or `forget(_:)` must
    /// follow for each).
    mutating func takeIdle(touchedBefore cutoff: ContinuousClock.Instant, limit: Int) -> [(post: Int64, entry: Entry)] {
        var taken: [(post: Int64, entry: Entry)] = []
        while head < queue.count && taken.count < limit {
            let front = queue[head]
            guard let entry = entries[front.post], entry.sequence == front.sequence else {
                head += 1
                continue
            }
            guard entry.lastTouched < cutoff else { break }
            head += 1
            taken.append((front.post, entry))
        }
        compactIfMostlyStale()
        return taken
    }

    /// The least recently touched posts that `matching` accepts, whatever their idle time, at
    /// most `limit`, looking at no more than `limit × 20` queue slots (posts of other slots stay
    /// in place). They leave the queue as with `takeIdle`.
    mutating func takeLeastRecent(limit: Int, matching: (Int64) -> Bool) -> [(post: Int64, entry: Entry)] {
        var taken: [(post: Int64, entry: Entry)] = []
        var index = head
        let end = min(queue.count, head + max(limit, 1) * 20)
        while index < end && taken.count < limit {
            let slot = queue[index]
            index += 1
            guard let entry = entries[slot.post], entry.sequence == slot.sequence, matching(slot.post) else { continue }
            // No queue slot matches this sequence: the entry is out of the queue.
            entries[slot.post]!.sequence = .max
            taken.append((slot.post, entry))
        }
        while head < queue.count, entries[queue[head].post]?.sequence != queue[head].sequence { head += 1 }
        compactIfMostlyStale()
        return taken
    }

    /// Puts posts taken by `takeIdle` back at the back of the queue, their last touch unchanged
    /// (they could not be evicted yet: something of them is pending).
    mutating func requeue(_ posts: some Sequence<Int64>) {
        for post in posts {
            guard entries[post] != nil else { continue }
            entries[post]!.sequence = nextSequence
            queue.append((post, nextSequence))
            nextSequence += 1
        }
        compactIfMostlyStale()
    }

    private mutating func touch(_ post: Int64, at now: ContinuousClock.Instant) {
        if entries[post] == nil {
            entries[post] = Entry(lastTouched: now, newestChange: nil, sequence: nextSequence)
        } else {
            entries[post]!.lastTouched = now
            entries[post]!.sequence = nextSequence
        }
        queue.append((post, nextSequence))
        nextSequence += 1
        compactIfMostlyStale()
    }

    /// Rebuilds the queue from the live slots once the stale ones outnumber them. Live slots
    /// keep their order, which is the order of their last touches.
    private mutating func compactIfMostlyStale() {
        guard queue.count >= 2 * entries.count + 1_024 else { return }
        queue = queue[head...].filter { entries[$0.post]?.sequence == $0.sequence }
        head = 0
    }
}
