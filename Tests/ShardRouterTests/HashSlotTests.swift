import Persistence
import Testing

@testable import ShardRouter

@Suite("Hash slots and hash tags")
struct HashSlotTests {
    @Test("CRC-16/XMODEM matches its published check value")
    func crcCheckValue() {
        #expect(CRC16.checksum(Array("123456789".utf8)) == 0x31C3)
    }

    @Test(
        "slots agree with Redis Cluster's CLUSTER KEYSLOT",
        arguments: [
            ("foo", 12182), ("bar", 5061), ("hello", 866), ("123", 5970),
        ])
    func slotsMatchRedisCluster(key: String, slot: Int) {
        #expect(HashSlot(key: Array(key.utf8)).rawValue == UInt16(slot))
    }

    @Test("a post's slot is the slot of its decimal id, and stays the same")
    func postSlot() {
        #expect(HashSlot(post: 123) == HashSlot(key: Array("123".utf8)))
        #expect(HashSlot(post: 123).rawValue == 5970)
        #expect(HashSlot(post: Int64.max) == HashSlot(key: Array(String(Int64.max).utf8)))
        for post: Int64 in [0, 1, 9, 10, 99, 100, 123_456_789, -1, -42, Int64.min, Int64.max - 1] {
            #expect(HashSlot(post: post) == HashSlot(key: Array(String(post).utf8)), "post \(post)")
        }
    }

    @Test("every slot has a short hash tag that maps back to it")
    func hashTags() {
        var seen = Set<String>()
        for number in 0..<HashSlot.count {
            let slot = HashSlot(rawValue: UInt16(number))!
            let tag = slot.hashTag
            #expect(tag.utf8.count <= 4)
            #expect(HashSlot(key: Array(tag.utf8)) == slot)
            seen.insert(tag)
        }
        #expect(seen.count == HashSlot.count)
    }

    @Test("slot numbers at or above 16,384 are refused")
    func slotBounds() {
        #expect(HashSlot(rawValue: 16_383) != nil)
        #expect(HashSlot(rawValue: 16_384) == nil)
    }

    @Test("a post's Redis keys carry the tag of the post's slot")
    func keyLayout() {
        let layout = RedisKeyLayout()
        for post: Int64 in [1, 42, 9_007_199_254_740_993] {
            let key = layout.likers(ofPost: post)
            let tag = key.split(separator: "{")[1].split(separator: "}")[0]
            #expect(HashSlot(key: Array(tag.utf8)) == HashSlot(post: post))
            #expect(key.hasSuffix(":\(post)"))
        }
        let slot = HashSlot(rawValue: 77)!
        #expect(layout.changeLog(of: slot) == "cs:{\(slot.hashTag)}:log")
    }

    @Test("keys are spelled exactly: prefix, the slot's tag in braces, the kind, the post")
    func keySpelling() {
        for layout in [RedisKeyLayout(), RedisKeyLayout(prefix: "bench-longer-prefix:é")] {
            let prefix = layout.prefix
            for post: Int64 in [0, 7, 42, 1_000_000, 9_007_199_254_740_993, Int64.max, -3, Int64.min] {
                let tag = HashSlot(post: post).hashTag
                #expect(layout.likers(ofPost: post) == "\(prefix):{\(tag)}:likers:\(post)")
                #expect(layout.hydratedMarker(ofPost: post) == "\(prefix):{\(tag)}:hydrated:\(post)")
                #expect(layout.warmMembers(ofPost: post) == "\(prefix):{\(tag)}:warm:\(post)")
                #expect(layout.reactions(ofPost: post) == "\(prefix):{\(tag)}:reactions:\(post)")
                #expect(layout.reactionCounts(ofPost: post) == "\(prefix):{\(tag)}:reaction_counts:\(post)")
                #expect(layout.loadingLikers(ofPost: post, attempt: 9) == "\(prefix):{\(tag)}:likers:\(post):loading:9")
            }
            for number: UInt16 in [0, 1, 16_383] {
                let slot = HashSlot(rawValue: number)!
                #expect(layout.changeLog(of: slot) == "\(prefix):{\(slot.hashTag)}:log")
                #expect(layout.epoch(of: slot) == "\(prefix):{\(slot.hashTag)}:epoch")
            }
        }
    }
}
