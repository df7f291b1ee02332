import TestSupport
import Testing

@testable import WritePath

@Suite("Memory of unknown posts (pure)")
struct UnknownPostMemoryTests {
    /// One reading of the clock; every other time is an offset from it, so nothing sleeps.
    static let start = ContinuousClock.now

    static func at(_ seconds: Double) -> ContinuousClock.Instant { start + .seconds(seconds) }

    @Test("a post is unknown for its lifetime, then asked about again; expired posts are dropped")
    func expiry() {
        var memory = UnknownPostMemory(capacity: 10, lifetime: .seconds(5))
        #expect(memory.isEmpty)
        memory.remember([7, 8], at: Self.at(0))
        memory.remember([9], at: Self.at(1))
        #expect(memory.isUnknown(7, at: Self.at(0)))
        #expect(memory.isUnknown(8, at: Self.at(4.999)))
        #expect(!memory.isUnknown(10, at: Self.at(1)))
        #expect(!memory.isUnknown(7, at: Self.at(5)))
        memory.dropExpired(at: Self.at(5.5))
        #expect(memory.count == 1)
        #expect(memory.isUnknown(9, at: Self.at(5.5)))
        memory.dropExpired(at: Self.at(6))
        #expect(memory.isEmpty)
        #expect(memory.queuedSlots == 0)
    }

    @Test("remembering a post again starts its lifetime again")
    func rememberAgain() {
        var memory = UnknownPostMemory(capacity: 10, lifetime: .seconds(5))
        memory.remember([7], at: Self.at(0))
        memory.remember([7], at: Self.at(4))
        #expect(memory.count == 1)
        #expect(memory.isUnknown(7, at: Self.at(8)))
        #expect(!memory.isUnknown(7, at: Self.at(9)))
    }

    @Test("a recheck removes the memory at once")
    func recheckRemoves() {
        var memory = UnknownPostMemory(capacity: 10, lifetime: .seconds(5))
        memory.remember([7, 8, 9], at: Self.at(0))
        memory.remove([8, 42])
        #expect(!memory.isUnknown(8, at: Self.at(1)))
        #expect(memory.isUnknown(7, at: Self.at(1)))
        #expect(memory.isUnknown(9, at: Self.at(1)))
        #expect(memory.count == 2)
    }

    @Test("when full, expired posts go first, then the oldest")
    func eviction() {
        var memory = UnknownPostMemory(capacity: 3, lifetime: .seconds(5))
        memory.remember([1], at: Self.at(0))
        memory.remember([2], at: Self.at(1))
        memory.remember([3], at: Self.at(2))
        // At 5.5 post 1 has expired: it makes room, the others stay.
        memory.remember([4], at: Self.at(5.5))
        #expect(memory.count == 3)
        #expect([2, 3, 4].allSatisfy { memory.isUnknown($0, at: Self.at(5.5)) })
        // Nothing expired: the oldest (2) goes.
        memory.remember([5], at: Self.at(5.6))
        #expect(memory.count == 3)
        #expect(!memory.isUnknown(2, at: Self.at(5.6)))
        #expect([3, 4, 5].allSatisfy { memory.isUnknown($0, at: Self.at(5.6)) })
        // A post remembered again is young again: 3 is renewed, so 4 is now the oldest.
        memory.remember([3], at: Self.at(5.7))
        memory.remember([6], at: Self.at(5.8))
        #expect(!memory.isUnknown(4, at: Self.at(5.8)))
        #expect([3, 5, 6].allSatisfy { memory.isUnknown($0, at: Self.at(5.8)) })
    }

    @Test("capacity is never exceeded, and its bookkeeping stays bounded, under many random ids", arguments: [1, 2, 3] as [UInt64])
    func boundedUnderRandomIDs(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let capacity = 100
        var memory = UnknownPostMemory(capacity: capacity, lifetime: .seconds(5))
        // A reference: until when (milliseconds) each post was last remembered, ignoring the capacity.
        var remembered: [Int64: Int] = [:]
        var now = 0
        for _ in 0..<50_000 {
            now += Int(random.next() % 100) // 0–99 ms per step
            let instant = Self.start + .milliseconds(now)
            // Mostly new ids (a client sending garbage), sometimes one seen before, sometimes a recheck.
            let post = Int64(random.next() % 4 == 0 ? random.next() % 150 : 1_000 + random.next() % 1_000_000)
            switch random.next() % 10 {
            case 0:
                memory.remove([post])
                remembered[post] = nil
            case 1:
                // Never claims a post it was not told of, or told of too long ago.
                if memory.isUnknown(post, at: instant) { #expect(remembered[post].map { $0 > now } == true) }
            case 2:
                memory.dropExpired(at: instant)
                // Expired posts are all at the front: none is left behind.
                remembered = remembered.filter { $0.value > now }
                #expect(memory.count <= remembered.count)
            default:
                memory.remember([post], at: instant)
                remembered[post] = now + 5_000
                // What was just remembered is known.
                #expect(memory.isUnknown(post, at: instant))
            }
            #expect(memory.count <= capacity)
            #expect(memory.queuedSlots <= 2 * capacity + 16)
        }
    }
}
