import Testing

@testable import ShardRouter

@Suite("Slot to shard map")
struct ShardMapTests {
    @Test("shards split the slots into contiguous ranges that cover each slot once", arguments: [1, 2, 3, 7, 8, 64, 1000, 16_384])
    func partition(shardCount: Int) throws {
        let map = try ShardMap(shardCount: shardCount)
        var next = 0
        for shard in 0..<shardCount {
            let range = map.slots(ofShard: shard)
            #expect(range.lowerBound == next)
            #expect(!range.isEmpty)
            for slot in [range.lowerBound, range.upperBound - 1] {
                #expect(map.shard(for: HashSlot(rawValue: UInt16(slot))!) == shard)
            }
            next = range.upperBound
        }
        #expect(next == HashSlot.count)
    }

    @Test("every slot maps to the shard whose range holds it", arguments: [3, 5])
    func everySlot(shardCount: Int) throws {
        let map = try ShardMap(shardCount: shardCount)
        for number in 0..<HashSlot.count {
            let shard = map.shard(for: HashSlot(rawValue: UInt16(number))!)
            #expect(map.slots(ofShard: shard).contains(number))
        }
    }

    @Test("shard sizes differ by at most one slot")
    func balance() throws {
        let map = try ShardMap(shardCount: 6)
        let sizes = (0..<6).map { map.slots(ofShard: $0).count }
        #expect(sizes.max()! - sizes.min()! <= 1)
    }

    @Test("a post always lands on the same shard")
    func stable() throws {
        let map = try ShardMap(shardCount: 8)
        #expect(map.shard(forPost: 123) == 5970 * 8 / 16_384)
        #expect(map.shard(forPost: 123) == (try ShardMap(shardCount: 8)).shard(forPost: 123))
    }

    @Test("invalid shard counts are refused with a reason", arguments: [0, -1, 16_385])
    func invalid(shardCount: Int) {
        #expect(throws: ShardRouterError.self) { try ShardMap(shardCount: shardCount) }
    }
}
