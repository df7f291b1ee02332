import Testing

@testable import WritePath

@Suite("Dead-letter pins: posts with refused changes stay in Redis (pure)")
struct DeadLetterPinsTests {
    static let start = ContinuousClock.now

    static func at(_ seconds: Double) -> ContinuousClock.Instant { start + .seconds(seconds) }

    @Test("until a read of the stream that began after the shard gained its slots, every post is held; then only the posts read")
    func heldUntilRead() {
        var pins = DeadLetterPins(now: Self.at(0))
        #expect(pins.holds(1) && pins.holds(2))
        pins.read([1], startedAt: Self.at(1))
        #expect(pins.holds(1))
        #expect(!pins.holds(2))
        // A slot gained: what other processes wrote for it is known from the next read only.
        pins.slotGained(at: Self.at(2))
        #expect(pins.holds(2))
        pins.read([], startedAt: Self.at(1.5)) // began before the gain: older than the read taken
        #expect(pins.holds(2))
        pins.read([], startedAt: Self.at(3))
        #expect(!pins.holds(1) && !pins.holds(2))
    }

    @Test("the flusher's pins last through a read that began before them, and end with the first read after them that does not find them")
    func flusherPins() {
        var pins = DeadLetterPins(now: Self.at(0))
        pins.read([], startedAt: Self.at(1))
        pins.lettersWritten(of: [7], at: Self.at(2))
        #expect(pins.holds(7))
        pins.read([], startedAt: Self.at(1.5)) // ignored: older than the read taken
        #expect(pins.holds(7))
        pins.read([], startedAt: Self.at(2)) // began as the letter was written: may have missed it
        #expect(pins.holds(7))
        pins.read([7], startedAt: Self.at(3)) // found: still pinned
        #expect(pins.holds(7))
        pins.read([], startedAt: Self.at(4)) // replayed or dropped
        #expect(!pins.holds(7))
        #expect(pins.posts.isEmpty)
    }
}
