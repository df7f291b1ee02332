import RedisDriver
import ShardRouter
import Testing

@Suite("A failover in the slot map: a replica promoted in its master's place, not a slot migrated (pure)")
struct ClusterFailoverMapTests {
    static func node(_ port: Int) -> RedisReply {
        .array([.bulkString(Array("127.0.0.1".utf8)), .integer(Int64(port)), .bulkString(Array("id\(port)".utf8))])
    }

    /// `CLUSTER SLOTS` with three masters, each with its replica.
    static func map(_ ranges: [(ClosedRange<Int>, master: Int, replica: Int?)]) throws -> ClusterSlotMap {
        let reply = RedisReply.array(
            ranges.map { range, master, replica in
                .array([.integer(Int64(range.lowerBound)), .integer(Int64(range.upperBound)), node(master)] + (replica.map { [node($0)] } ?? []))
            })
        return try ClusterSlotMap(clusterSlots: reply, askedHost: "127.0.0.1")
    }

    @Test("the slots a replica took over from its master are promoted; those migrated to another master, or unchanged, are not")
    func promotedSlots() throws {
        let before = try Self.map([(0...5460, 7001, 7004), (5461...10922, 7002, 7005), (10923...16383, 7003, 7006)])
        // 7001 dies: 7004 serves its slots. Slots 6000-6099 migrated from 7002 to 7003 meanwhile.
        let after = try Self.map([
            (0...5460, 7004, nil), (5461...5999, 7002, 7005), (6000...6099, 7003, 7006), (6100...10922, 7002, 7005),
            (10923...16383, 7003, 7006),
        ])
        let promoted = before.promotedSlots(in: after)
        #expect(promoted.count == 5461 && promoted.first == 0 && promoted.last == 5460)
        #expect(before.promotedSlots(in: before).isEmpty)
        let endpoint = { (port: Int) in RedisEndpoint(host: "127.0.0.1", port: port) }
        #expect(before.isPromotion(of: HashSlot(rawValue: 17)!, to: endpoint(7004)), "a MOVED to the master's replica")
        #expect(!before.isPromotion(of: HashSlot(rawValue: 17)!, to: endpoint(7002)), "a MOVED to another master: a migration")
        #expect(!before.isPromotion(of: HashSlot(rawValue: 6000)!, to: endpoint(7006)), "another master's replica")
    }
}
