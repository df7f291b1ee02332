/// How long this node may go on deciding for its slots, by its own clock: until the end of the
/// lease its last renewal got, counted from when that renewal was *sent* (the lease PostgreSQL
/// granted ran from later than that), less a margin for clocks that run at slightly different
/// rates. A renewal that hangs (a cut to PostgreSQL) extends nothing: the node stops deciding
/// before another node can take its slots, instead of relying on the fence alone. Also keeps
/// the renewals' round-trip times, as a histogram. Pure: the caller passes the times.
public struct LeaseValidity: Sendable, Equatable {
    /// The share of the lease the node decides for after a renewal was sent.
    public static let usableShare = 0.9
    /// Upper bounds of the renewal-time buckets, in seconds.
    public static let bucketBounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    public let lease: Duration
    /// Until when the node decides; `nil` before the first lease.
    public private(set) var validUntil: ContinuousClock.Instant?
    /// Renewal round trips per bucket of `bucketBounds` (the last counts the longer ones),
    /// their number and their sum in seconds.
    public private(set) var buckets = [Int](repeating: 0, count: bucketBounds.count + 1)
    public private(set) var count = 0
    public private(set) var sumSeconds = 0.0

    /// When a renewal found the lease had already run out (`NodeRegistry.Renewal`): the node
    /// decides again only once a round that began after it has read who owns its slots now.
    public private(set) var lapsedAt: ContinuousClock.Instant?

    public init(lease: Duration) {
        self.lease = lease
    }

    /// A renewal at `at` found the lease had run out: no deciding until a round has run since.
    public mutating func lapsed(at: ContinuousClock.Instant) {
        lapsedAt = lapsedAt ?? at
    }

    /// A membership round that began at `startedAt` ended: if it began after the lapse, the
    /// slots this node still serves are its own again.
    public mutating func roundCompleted(startedAt: ContinuousClock.Instant) {
        if let lapsedAt, startedAt > lapsedAt { self.lapsedAt = nil }
    }

    /// A lease was granted (registration or renewal) by a request sent at `sentAt` and
    /// answered at `answeredAt`.
    public mutating func granted(sentAt: ContinuousClock.Instant, answeredAt: ContinuousClock.Instant) {
        let until = sentAt + lease * Self.usableShare
        validUntil = max(validUntil ?? until, until)
        let seconds = (answeredAt - sentAt).inSecondsDouble
        buckets[Self.bucketBounds.firstIndex { seconds <= $0 } ?? Self.bucketBounds.count] += 1
        count += 1
        sumSeconds += seconds
    }

    /// Whether the node may decide at `now`.
    public func isValid(at now: ContinuousClock.Instant) -> Bool {
        lapsedAt == nil && (validUntil.map { now < $0 } ?? false)
    }
}

extension Duration {
    fileprivate var inSecondsDouble: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
