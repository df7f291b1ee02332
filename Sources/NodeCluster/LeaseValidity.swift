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

    /// Since when renewals fail (PostgreSQL out of reach: failing over, restarting, cut off);
    /// `nil` while the last one got through.
    public private(set) var unreachableSince: ContinuousClock.Instant?
    /// When the first renewal got through after failed ones or a lapse: the other nodes may
    /// have been unable to renew just as long, so their leases, run out by PostgreSQL's clock,
    /// say nothing of whether they live. `nil`: no renewal failed since the registration.
    public private(set) var reachableAgainAt: ContinuousClock.Instant?
    /// Times renewals began to fail and got through again (PostgreSQL outages as this node saw
    /// them), and how long they lasted: the last and all together, in seconds.
    public private(set) var outages = 0
    public private(set) var lastOutageSeconds = 0.0
    public private(set) var outageSecondsTotal = 0.0

    public init(lease: Duration) {
        self.lease = lease
    }

    /// A renewal at `at` found the lease had run out: no deciding until a round has run since.
    public mutating func lapsed(at: ContinuousClock.Instant) {
        lapsedAt = lapsedAt ?? at
        reachableAgainAt = max(reachableAgainAt ?? at, at)
    }

    /// A membership round that began at `startedAt` ended: if it began after the lapse, the
    /// slots this node still serves are its own again.
    public mutating func roundCompleted(startedAt: ContinuousClock.Instant) {
        if let lapsedAt, startedAt > lapsedAt { self.lapsedAt = nil }
    }

    /// A renewal sent at `sentAt` failed (no answer from PostgreSQL). Returns whether it is the
    /// first of an outage.
    @discardableResult
    public mutating func failed(sentAt: ContinuousClock.Instant) -> Bool {
        guard unreachableSince == nil else { return false }
        unreachableSince = sentAt
        return true
    }

    /// Whether this node may take slots from other nodes, or hand its own over, at `now`: only
    /// once its renewals have got through for a whole lease since they last failed (or lapsed).
    /// After PostgreSQL was away — a failover — every node's lease may have run out by
    /// PostgreSQL's clock; the first node back must not take the others' slots before they
    /// had a lease's time to renew, nor move slots toward a target that leaves them out.
    public func mayMoveSlots(at now: ContinuousClock.Instant) -> Bool {
        guard unreachableSince == nil else { return false }
        guard let reachableAgainAt else { return true }
        return now - reachableAgainAt >= lease
    }

    /// A lease was granted (registration or renewal) by a request sent at `sentAt` and
    /// answered at `answeredAt`.
    /// - Returns: how long renewals had failed before this one, when they had.
    @discardableResult
    public mutating func granted(sentAt: ContinuousClock.Instant, answeredAt: ContinuousClock.Instant) -> Duration? {
        var outage: Duration?
        if let since = unreachableSince {
            let length = answeredAt - since
            outage = length
            unreachableSince = nil
            reachableAgainAt = answeredAt
            outages += 1
            lastOutageSeconds = length.inSecondsDouble
            outageSecondsTotal += lastOutageSeconds
        }
        let until = sentAt + lease * Self.usableShare
        validUntil = max(validUntil ?? until, until)
        let seconds = (answeredAt - sentAt).inSecondsDouble
        buckets[Self.bucketBounds.firstIndex { seconds <= $0 } ?? Self.bucketBounds.count] += 1
        count += 1
        sumSeconds += seconds
        return outage
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
