import ShardRouter
import Synchronization
import Testing

@testable import RedisDriver

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

    @Test(
        "a master all of whose slots went at once to an endpoint that served none, the master serving none now, failed over, though the map did not name that replica; a partial move, or a move to a master that served slots, is a migration"
    )
    func unnamedReplicaPromoted() throws {
        // The map was read before 7004 was listed as 7001's replica.
        let before = try Self.map([(0...5460, 7001, nil), (5461...10922, 7002, 7005), (10923...16383, 7003, 7006)])
        let failedOver = try Self.map([(0...5460, 7004, nil), (5461...10922, 7002, 7005), (10923...16383, 7003, 7006)])
        let promoted = before.promotedSlots(in: failedOver)
        #expect(promoted.count == 5461 && promoted.first == 0 && promoted.last == 5460)
        // 7001 keeps some of its slots: a resharding under way.
        let partial = try Self.map([(0...99, 7004, nil), (100...5460, 7001, nil), (5461...10922, 7002, 7005), (10923...16383, 7003, 7006)])
        #expect(before.promotedSlots(in: partial).isEmpty)
        // All of 7001's slots to 7002, which served slots before: a migration.
        let merged = try Self.map([(0...10922, 7002, 7005), (10923...16383, 7003, 7006)])
        #expect(before.promotedSlots(in: merged).isEmpty)
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

/// The failover is told before the map sends anything to the promoted replica: whatever the
/// handler tells (a shard's inbox) hears of it before any reply read there, so nothing the
/// replica lacks is taken for what the dead master held.
@Suite("A failover is told before the map routes to the promoted replica (pure)")
struct FailoverToldFirstTests {
    typealias Maps = ClusterFailoverMapTests

    static let before: [(ClosedRange<Int>, master: Int, replica: Int?)] = [
        (0...5460, 7001, 7004), (5461...10922, 7002, 7005), (10923...16383, 7003, 7006),
    ]

    /// Calls `change` on a topology holding `before`; returns the master of slot 17 as the
    /// failover handler saw it (each call), the slots it was told, and the master after.
    static func observe(_ change: (RedisTopology) throws -> Void) throws -> (seen: [Int], told: [UInt16], after: Int?) {
        let topology = RedisTopology(configuration: try RedisConfiguration(url: "redis-cluster://127.0.0.1:7001"))
        topology.install(try Maps.map(before))
        let seen = Mutex<(ports: [Int], slots: [UInt16])>(([], []))
        topology.onFailover { [topology] slots in
            let port = topology.map.master(of: HashSlot(rawValue: 17)!)?.port ?? -1
            seen.withLock {
                $0.ports.append(port)
                $0.slots += slots
            }
        }
        try change(topology)
        let (ports, slots) = seen.withLock { $0 }
        return (ports, slots, topology.map.master(of: HashSlot(rawValue: 17)!)?.port)
    }

    @Test("a map read again that promotes a replica: the handler is called while the map still names the dead master")
    func refreshedMap() throws {
        let (seen, told, after) = try Self.observe { topology in
            topology.install(try Maps.map([(0...5460, 7004, nil), (5461...10922, 7002, 7005), (10923...16383, 7003, 7006)]))
        }
        #expect(seen == [7001], "the handler ran once, before the map changed")
        #expect(told.count == 5461 && told.contains(17))
        #expect(after == 7004)
    }

    @Test("a replica a map read in between left out (flagged as failing) and then promoted is still a failover, by a map read again or a MOVED")
    func replicaLeftOutThenPromoted() throws {
        // While 7004 is paused, CLUSTER SLOTS lists 7001's slots with no replica.
        let leftOut: [(ClosedRange<Int>, master: Int, replica: Int?)] = [
            (0...5460, 7001, nil), (5461...10922, 7002, 7005), (10923...16383, 7003, 7006),
        ]
        let (seen, told, after) = try Self.observe { topology in
            topology.install(try Maps.map(leftOut))
            topology.install(try Maps.map([(0...5460, 7004, nil), (5461...10922, 7002, 7005), (10923...16383, 7003, 7006)]))
        }
        #expect(seen == [7001] && told.count == 5461, "the promotion was seen: \(told.count) slots told")
        #expect(after == 7004)
        let (movedSeen, movedTold, _) = try Self.observe { topology in
            topology.install(try Maps.map(leftOut))
            topology.noteMoved(HashSlot(rawValue: 17)!, to: RedisEndpoint(host: "127.0.0.1", port: 7004))
        }
        #expect(movedSeen == [7001] && movedTold == [17])
        // A replica named again elsewhere is that master's now.
        var map = try Maps.map(leftOut)
        map.rememberReplicas(of: try Maps.map(Self.before))
        var moved = try Maps.map([(0...5460, 7001, nil), (5461...10922, 7002, 7004), (10923...16383, 7003, 7006)])
        moved.rememberReplicas(of: map)
        #expect(moved.isPromotion(of: HashSlot(rawValue: 6000)!, to: RedisEndpoint(host: "127.0.0.1", port: 7004)))
        #expect(!moved.isPromotion(of: HashSlot(rawValue: 17)!, to: RedisEndpoint(host: "127.0.0.1", port: 7004)))
    }

    @Test("a MOVED to the master's replica: the handler is called while the map still names the dead master")
    func movedToTheReplica() throws {
        let (seen, told, after) = try Self.observe { topology in
            topology.noteMoved(HashSlot(rawValue: 17)!, to: RedisEndpoint(host: "127.0.0.1", port: 7004))
        }
        #expect(seen == [7001] && told == [17])
        #expect(after == 7004)
    }

    @Test("a MOVED to another master (a migration) is no failover")
    func movedElsewhere() throws {
        let (seen, _, after) = try Self.observe { topology in
            topology.noteMoved(HashSlot(rawValue: 17)!, to: RedisEndpoint(host: "127.0.0.1", port: 7002))
        }
        #expect(seen.isEmpty)
        #expect(after == 7002)
    }
}
