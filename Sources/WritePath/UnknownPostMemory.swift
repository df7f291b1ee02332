/// The posts a shard found missing from PostgreSQL, remembered for a while so that operations on
/// them are refused without asking PostgreSQL again in every batch.
///
/// Bounded: a client that sends endless distinct missing ids cannot make it grow past `capacity`.
/// When it is full, expired entries go first, then the oldest. Entries are kept in the order
/// they were remembered; every one lives `lifetime`, so that order is also the order in which
/// they expire, and the front of the queue is always the first to go.
///
/// Pure: the caller passes the time, which must never go back (`ContinuousClock` does not).
struct UnknownPostMemory {
    /// Most posts remembered at once.
    let capacity: Int
    /// How long a post is remembered.
    let lifetime: Duration

    private struct Entry {
        var until: ContinuousClock.Instant
        /// Which queue slot is this entry's: an earlier slot of the same post is stale.
        var sequence: UInt64
    }

    private var entries: [Int64: Entry] = [:]
    /// Posts in the order they were remembered, from `head` on. A post remembered again, or
    /// forgotten, leaves a stale slot behind (its sequence no longer matches), skipped when it
    /// reaches the front and dropped when the queue is compacted.
    private var queue: [(post: Int64, sequence: UInt64)] = []
    private var head = 0
    private var nextSequence: UInt64 = 0

    /// - Parameters:
    ///   - capacity: most posts remembered at once (at least 1).
    ///   - lifetime: how long each is remembered.
    init(capacity: Int = 10_000, lifetime: Duration) {
        precondition(capacity >= 1, "an unknown-post memory needs room for at least one post")
        self.capacity = capacity
        self.lifetime = lifetime
    }

    /// Posts remembered (expired ones not yet dropped included).
    var count: Int { entries.count }

    /// Whether nothing is remembered (then no post needs looking up).
    var isEmpty: Bool { entries.isEmpty }

    /// Queue slots held, stale ones included; never more than about twice `capacity`.
    var queuedSlots: Int { queue.count - head }

    /// Whether `post` is remembered as missing at `now`.
    func isUnknown(_ post: Int64, at now: ContinuousClock.Instant) -> Bool {
        guard let entry = entries[post] else { return false }
        return entry.until > now
    }

    /// Remembers `posts` as missing until `now + lifetime` (a post remembered already starts
    /// its lifetime again).
    mutating func remember(_ posts: some Sequence<Int64>, at now: ContinuousClock.Instant) {
        let until = now + lifetime
        for post in posts {
            if entries[post] == nil {
                dropExpired(at: now)
                if entries.count >= capacity { dropOldest() }
            }
            entries[post] = Entry(until: until, sequence: nextSequence)
            queue.append((post, nextSequence))
            nextSequence += 1
            compactIfMostlyStale()
        }
    }

    /// Drops the entries expired at `now` (and, with them, the stale queue slots before them),
    /// so that a memory whose posts have all expired is empty again. Costs one look at the
    /// queue's front when nothing expired.
    mutating func dropExpired(at now: ContinuousClock.Instant) {
        while head < queue.count {
            let front = queue[head]
            if let entry = entries[front.post], entry.sequence == front.sequence {
                guard entry.until <= now else { break }
                entries[front.post] = nil
            }
            head += 1
        }
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        }
    }

    /// Stops remembering `posts`, so the next touch asks PostgreSQL again (an operator restored
    /// them).
    mutating func remove(_ posts: some Sequence<Int64>) {
        for post in posts { entries[post] = nil }
    }

    // MARK: - Queue upkeep

    /// Drops the oldest live entry (and the stale slots before it).
    private mutating func dropOldest() {
        while head < queue.count {
            let front = queue[head]
            head += 1
            if entries[front.post]?.sequence == front.sequence {
                entries[front.post] = nil
                return
            }
        }
    }

    /// Keeps the queue within about twice `capacity`: once the slots passed or gone stale
    /// outnumber the live ones, the queue is rebuilt from the live entries only. Amortised,
    /// that is constant work per `remember`.
    private mutating func compactIfMostlyStale() {
        guard queue.count >= 2 * capacity + 16 else { return }
        queue = queue[head...].filter { entries[$0.post]?.sequence == $0.sequence }
        head = 0
    }
}
