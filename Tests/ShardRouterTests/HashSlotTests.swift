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
}
