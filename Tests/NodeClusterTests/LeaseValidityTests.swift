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
}
