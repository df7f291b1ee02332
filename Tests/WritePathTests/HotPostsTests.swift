import RedisDriver
import TestSupport
import Testing

@testable import WritePath

@Suite("Hot posts: least recently touched first, for eviction (pure)")
struct HotPostsTests {
    static let start = ContinuousClock.now

    static func at(_ seconds: Double) -> ContinuousClock.Instant { start + .seconds(seconds) }

    @Test("idle posts come out least recently touched first, only those touched before the cutoff, at most the limit")
    func leastRecentlyTouchedFirst() {
        var hot = HotPosts()
        hot.touched([1, 2, 3], at: Self.at(0))
        hot.touched([4], at: Self.at(1))
        hot.touched([1], at: Self.at(2)) // 1 moves to the back
        #expect(hot.count == 4)
        #expect(hot.takeIdle(touchedBefore: Self.at(1.5), limit: 2).map(\.post) == [2, 3])
        #expect(hot.takeIdle(touchedBefore: Self.at(1.5), limit: 10).map(\.post) == [4])
        #expect(hot.takeIdle(touchedBefore: Self.at(1.5), limit: 10).isEmpty) // 1 was touched at 2
        hot.forget([2, 3])
        hot.requeue([4]) // could not go: back in the queue, its last touch unchanged
        #expect(hot.takeIdle(touchedBefore: Self.at(3), limit: 10).map(\.post) == [1, 4])
        #expect(hot.entry(of: 4)?.lastTouched == Self.at(1))
    }

    @Test("a change records the newest log entry of the post, never an older one")
    func newestChange() {
        var hot = HotPosts()
        let older = StreamEntryID(milliseconds: 10, sequence: 0)
        let newer = StreamEntryID(milliseconds: 11, sequence: 3)
        hot.changed(7, in: newer, at: Self.at(0))
        hot.changed(7, in: older, at: Self.at(1))
        #expect(hot.entry(of: 7)?.newestChange == newer)
        #expect(hot.entry(of: 7)?.lastTouched == Self.at(1))
        hot.touched([8], at: Self.at(1))
        #expect(hot.entry(of: 8)?.newestChange == nil)
    }

    @Test("a million touches of a few posts keep the queue bounded")
    func boundedQueue() {
        var hot = HotPosts()
        for round in 0..<100_000 { hot.touched([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], at: Self.at(Double(round) / 1_000)) }
        #expect(hot.count == 10)
        #expect(hot.queuedSlots <= 2 * 10 + 1_024)
        #expect(hot.takeIdle(touchedBefore: Self.at(1_000), limit: 100).map(\.post) == Array(1...10))
    }
}

extension HotPostsTests {
    @Test("under a memory target, the least recently touched posts of the slots asked go first, idle or not; others keep their place")
    func leastRecentOfSomeSlots() {
        var hot = HotPosts()
        hot.touched([1, 2, 3, 4, 5], at: Self.at(0))
        let taken = hot.takeLeastRecent(limit: 2) { $0 % 2 == 1 }
        #expect(taken.map(\.post) == [1, 3])
        hot.forget(taken.map(\.post))
        // 2 kept its place at the front: it is still the least recently touched.
        #expect(hot.takeIdle(touchedBefore: Self.at(1), limit: 10).map(\.post) == [2, 4, 5])
        hot.touched([6], at: Self.at(2))
        hot.discovered([6, 7], at: Self.at(3)) // 6 is known: its last touch stays
        #expect(hot.entry(of: 6)?.lastTouched == Self.at(2) && hot.entry(of: 7)?.lastTouched == Self.at(3))
    }
}
