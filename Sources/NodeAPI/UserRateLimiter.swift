import Synchronization

/// One user's token bucket: `burst` writes at once, refilled at `rate` per second. Pure: the
/// time (in nanoseconds on a monotonic clock) is given.
struct TokenBucket: Equatable {
    private(set) var tokens: Double
    private(set) var updatedNanoseconds: UInt64

    init(burst: Int, now: UInt64) {
        tokens = Double(burst)
        updatedNanoseconds = now
    }

    /// Takes one token if there is one; otherwise says how long until there is (and takes nothing).
    mutating func take(now: UInt64, rate: Double, burst: Int) -> Duration? {
        refill(now: now, rate: rate, burst: burst)
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        return .nanoseconds(Int64(((1 - tokens) / rate * 1e9).rounded(.up)))
    }

    /// Whether the bucket would be full at `now` — it then holds nothing a fresh one would not.
    func isFull(now: UInt64, rate: Double, burst: Int) -> Bool {
        var copy = self
        copy.refill(now: now, rate: rate, burst: burst)
        return copy.tokens >= Double(burst)
    }

    private mutating func refill(now: UInt64, rate: Double, burst: Int) {
        guard now > updatedNanoseconds else { return }
        tokens = min(Double(burst), tokens + Double(now - updatedNanoseconds) / 1e9 * rate)
        updatedNanoseconds = now
    }
}

/// Per-user write limits: a token bucket per user (`TokenBucket`), in 16 shards behind their
/// own locks. Memory is bounded: at most `trackedUsers` buckets; when a shard is full, the
/// buckets that have refilled completely are dropped (forgetting them changes nothing), and if
/// that is not enough, the quarter touched longest ago (those users get a fresh burst).
public final class UserRateLimiter: Sendable {
    public let writesPerSecond: Double
    public let burst: Int
    private let perShard: Int
    private final class Shard: Sendable {
        let buckets = Mutex<[Int64: TokenBucket]>([:])
    }
    private let shards: [Shard]
    private let limited = Atomic<Int>(0)
    private let clock: @Sendable () -> UInt64

    /// - Parameters:
    ///   - writesPerSecond: the steady rate each user may write at (greater than 0).
    ///   - burst: writes a user may make at once after a pause.
    ///   - trackedUsers: buckets kept at most.
    ///   - clock: monotonic nanoseconds (for tests).
    public init(
        writesPerSecond: Double, burst: Int, trackedUsers: Int,
        clock: (@Sendable () -> UInt64)? = nil
    ) {
        precondition(writesPerSecond > 0 && burst >= 1)
        self.writesPerSecond = writesPerSecond
        self.burst = burst
        self.perShard = max(4, trackedUsers / 16)
        self.shards = (0..<16).map { _ in Shard() }
        self.clock = clock ?? { MonotonicNanoseconds.now() }
    }

    /// Takes one write from `user`'s bucket.
    /// - Returns: `nil` when the write may go ahead, else the seconds until it may (at least 1,
    ///   for `Retry-After`).
    public func admit(_ user: Int64) -> Int? {
        let now = clock()
        let wait = shards[Int(UInt64(bitPattern: user) % 16)].buckets.withLock { buckets -> Duration? in
            if buckets[user] == nil {
                if buckets.count >= perShard { Self.makeRoom(in: &buckets, now: now, rate: writesPerSecond, burst: burst) }
                buckets[user] = TokenBucket(burst: burst, now: now)
            }
            return buckets[user]!.take(now: now, rate: writesPerSecond, burst: burst)
        }
        guard let wait else { return nil }
        limited.add(1, ordering: .relaxed)
        let seconds = Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18
        return max(1, Int(seconds.rounded(.up)))
    }

    /// Writes refused so far.
    public var limitedCount: Int { limited.load(ordering: .relaxed) }

    /// Users with a bucket now.
    public var trackedUsers: Int { shards.reduce(0) { $0 + $1.buckets.withLock { $0.count } } }

    private static func makeRoom(in buckets: inout [Int64: TokenBucket], now: UInt64, rate: Double, burst: Int) {
        let limit = buckets.count
        buckets = buckets.filter { !$0.value.isFull(now: now, rate: rate, burst: burst) }
        guard buckets.count >= limit * 3 / 4 else { return }
        let oldest = buckets.sorted { $0.value.updatedNanoseconds < $1.value.updatedNanoseconds }.prefix(max(1, limit / 4))
        for (user, _) in oldest { buckets[user] = nil }
    }
}

/// Nanoseconds on the continuous clock since the process first asked.
enum MonotonicNanoseconds {
    static func now() -> UInt64 {
        let start = origin // set on first use: before reading the time
        let elapsed = ContinuousClock.now - start
        return UInt64(elapsed.components.seconds) * 1_000_000_000 + UInt64(elapsed.components.attoseconds / 1_000_000_000)
    }

    private static let origin = ContinuousClock.now
}
