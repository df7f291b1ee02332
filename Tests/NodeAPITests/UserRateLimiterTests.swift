import Synchronization
import Testing

@testable import NodeAPI

@Suite("Per-user write limits (token buckets)")
struct UserRateLimiterTests {
    final class FakeClock: Sendable {
        let nanoseconds = Atomic<UInt64>(1_000_000_000)
        func advance(milliseconds: UInt64) { nanoseconds.add(milliseconds * 1_000_000, ordering: .relaxed) }
        var read: @Sendable () -> UInt64 { { self.nanoseconds.load(ordering: .relaxed) } }
    }

    @Test("a burst, then the steady rate; the wait is said in whole seconds, at least one")
    func burstThenRate() {
        let clock = FakeClock()
        let limiter = UserRateLimiter(writesPerSecond: 2, burst: 3, trackedUsers: 1_000, clock: clock.read)
        #expect((0..<3).map { _ in limiter.admit(1) } == [nil, nil, nil])
        #expect(limiter.admit(1) == 1)
        clock.advance(milliseconds: 400)
        #expect(limiter.admit(1) == 1, "0.8 of a token after 400 ms")
        clock.advance(milliseconds: 100)
        #expect(limiter.admit(1) == nil)
        #expect(limiter.admit(1) == 1)
        // Another user has a bucket of their own.
        #expect(limiter.admit(2) == nil)
        // A long pause refills up to the burst, not beyond.
        clock.advance(milliseconds: 60_000)
        #expect((0..<4).map { _ in limiter.admit(1) } == [nil, nil, nil, 1])
        #expect(limiter.limitedCount == 4)
    }

    @Test("a slow rate says a longer wait")
    func slowRate() {
        let clock = FakeClock()
        let limiter = UserRateLimiter(writesPerSecond: 0.25, burst: 1, trackedUsers: 100, clock: clock.read)
        #expect(limiter.admit(9) == nil)
        #expect(limiter.admit(9) == 4)
    }

    @Test("memory is bounded: a flood of distinct users keeps at most the configured buckets")
    func bounded() {
        let clock = FakeClock()
        let limiter = UserRateLimiter(writesPerSecond: 1, burst: 2, trackedUsers: 1_600, clock: clock.read)
        for user in Int64(1_000)..<Int64(101_000) {
            _ = limiter.admit(user)
            if user % 1_000 == 0 { clock.advance(milliseconds: 1) }
            #expect(limiter.trackedUsers <= 1_600 + 16)
        }
        #expect(limiter.trackedUsers <= 1_616)
    }
}
