import NodeCluster
import Testing

@Suite("The lease as the node's own clock counts it (pure)")
struct LeaseValidityTests {
    @Test("a node decides until 90 % of the lease after its last renewal was sent, however late the answer came; a hanging renewal extends nothing")
    func validity() {
        let start = ContinuousClock.now
        var lease = LeaseValidity(lease: .seconds(3))
        #expect(!lease.isValid(at: start), "no lease before the first grant")
        lease.granted(sentAt: start, answeredAt: start + .milliseconds(4))
        #expect(lease.isValid(at: start + .milliseconds(2_699)))
        #expect(!lease.isValid(at: start + .milliseconds(2_700)), "2.7 s after the renewal was sent")
        // A renewal sent at 1 s answered at 2.5 s still counts from when it was sent.
        lease.granted(sentAt: start + .seconds(1), answeredAt: start + .milliseconds(2_500))
        #expect(lease.isValid(at: start + .milliseconds(3_699)) && !lease.isValid(at: start + .milliseconds(3_700)))
        // An older renewal answered late moves nothing back.
        lease.granted(sentAt: start + .milliseconds(500), answeredAt: start + .seconds(3))
        #expect(lease.isValid(at: start + .milliseconds(3_699)))
        #expect(lease.count == 3 && lease.buckets.reduce(0, +) == 3)
        #expect(lease.buckets[LeaseValidity.bucketBounds.firstIndex(of: 0.005)!] == 1, "4 ms")
        #expect(lease.buckets[LeaseValidity.bucketBounds.firstIndex(of: 2.5)!] == 2, "1.5 s and 2.5 s")
        #expect(abs(lease.sumSeconds - 4.004) < 1e-9)
    }

    @Test("a renewal that found the lease run out grants time but no deciding until a round that began after it has ended")
    func lapse() {
        let start = ContinuousClock.now
        var lease = LeaseValidity(lease: .seconds(3))
        lease.granted(sentAt: start, answeredAt: start + .milliseconds(5))
        lease.lapsed(at: start)
        #expect(!lease.isValid(at: start + .seconds(1)))
        lease.roundCompleted(startedAt: start - .milliseconds(1))
        #expect(!lease.isValid(at: start + .seconds(1)), "a round begun before the lapse does not count")
        lease.roundCompleted(startedAt: start + .milliseconds(10))
        #expect(lease.isValid(at: start + .seconds(1)))
        #expect(!lease.isValid(at: start + .seconds(3)), "and still only within the lease")
    }

    @Test(
        "failed renewals are an outage: counted and timed from the first failure to the next grant; slots move again only a whole lease after it (or after a lapse)"
    )
    func outages() {
        let start = ContinuousClock.now
        var lease = LeaseValidity(lease: .seconds(3))
        lease.granted(sentAt: start, answeredAt: start + .milliseconds(2))
        #expect(lease.mayMoveSlots(at: start + .milliseconds(3)), "a registered node moves slots at once")
        let first = lease.failed(sentAt: start + .seconds(1))
        let second = lease.failed(sentAt: start + .milliseconds(1_100))
        #expect(first, "the first failure begins the outage")
        #expect(!second, "later ones belong to it")
        #expect(lease.unreachableSince == start + .seconds(1))
        #expect(!lease.mayMoveSlots(at: start + .seconds(2)), "no moves while renewals fail")
        #expect(lease.isValid(at: start + .milliseconds(2_699)), "the lease still lets it decide")
        let outage = lease.granted(sentAt: start + .milliseconds(2_400), answeredAt: start + .milliseconds(2_500))
        #expect(outage == .milliseconds(1_500))
        #expect(lease.unreachableSince == nil && lease.outages == 1 && abs(lease.lastOutageSeconds - 1.5) < 1e-9)
        #expect(lease.isValid(at: start + .milliseconds(5_099)), "the grant extends the lease as any")
        #expect(!lease.mayMoveSlots(at: start + .milliseconds(5_499)), "a whole lease after it got through")
        #expect(lease.mayMoveSlots(at: start + .milliseconds(5_500)))
        let none = lease.granted(sentAt: start + .seconds(6), answeredAt: start + .seconds(6))
        #expect(none == nil, "no outage")
        // A renewal that found the lease run out (PostgreSQL away longer than the lease) holds
        // moves back a lease from it, as failures do.
        lease.lapsed(at: start + .seconds(7))
        #expect(!lease.mayMoveSlots(at: start + .milliseconds(9_999)) && lease.mayMoveSlots(at: start + .seconds(10)))
        #expect(lease.outages == 1 && abs(lease.outageSecondsTotal - 1.5) < 1e-9)
    }
}
