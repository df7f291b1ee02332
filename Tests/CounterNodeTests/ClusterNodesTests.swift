import CounterWire
import Foundation
import Persistence
import ShardRouter
import TestSupport
import Testing

/// Three `counter-node serve` processes over one PostgreSQL and Redis, under load from a driver
/// that sends likes, unlikes and toggles to random nodes; afterwards PostgreSQL must hold exactly
/// the last acknowledged state of every pair, every count must equal its rows, and the audit
/// table must show no log entry applied twice. Runs on its own (scripts/test): it keeps both
/// cores busy.
@Suite("Several nodes", .serialized)
struct ClusterNodesTests {
    /// Posts whose slots `node` owns in `map`.
    static func posts(_ posts: [Int64], ownedBy node: String, in map: ClusterMapBody) -> [Int64] {
        guard let owner = map.nodes.first(where: { $0.id == node }) else { return [] }
        return posts.filter { post in
            let slot = Int(HashSlot(post: post).rawValue)
            return owner.slots.contains { $0[0] <= slot && slot <= $0[1] }
        }
    }

    static func startThree(_ harness: ClusterHarness, leaseMilliseconds: Int? = nil) async throws -> [ClusterHarness.Node] {
        var nodes: [ClusterHarness.Node] = []
        for id in ["a", "b", "c"] { nodes.append(try await harness.start(id, leaseMilliseconds: leaseMilliseconds)) }
        _ = try await harness.waitForMap(via: nodes[0]) { map in
            map.movesPending == 0 && map.nodes.filter(\.live).count == 3 && map.nodes.allSatisfy { $0.ownedSlots > 5_000 }
        }
        return nodes
    }

    // With the default lease (2 s): the time a client waits is the lease, a round (250 ms), the
    // claim and the drain of the slots' logs.
    @Test("kill -9 of one node under load: its slots answer again within 5 s; nothing lost, phantom or applied twice")
    func killNineUnderLoad() async throws {
        try await ClusterHarness.with("kill9") { harness in
            let posts = try await TestEnvironment.createPosts(60, in: harness.pool)
            let nodes = try await Self.startThree(harness)
            let load = HTTPPairLoad(posts: posts)
            load.setNodes(nodes.map(\.url))
            let driver = Task { await load.run(workers: 12) }
            try await Task.sleep(for: .seconds(2))

            let map = try await harness.map(via: nodes[0])
            let victims = Self.posts(posts, ownedBy: "b", in: map)
            #expect(!victims.isEmpty)
            load.setNodes([nodes[0].url, nodes[2].url])
            nodes[1].process.kill(SIGKILL)
            let killed = ContinuousClock.now
            // Probes: one like per post of b's slots, through node a, until each is answered.
            var answered: Set<Int64> = []
            while answered.count < victims.count && ContinuousClock.now - killed < .seconds(20) {
                for post in victims where !answered.contains(post) {
                    if await load.send("PUT", Pair(user: 9_000_000, post: post), via: nodes[0].url) { answered.insert(post) }
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            let takeover = ContinuousClock.now - killed
            print("cluster-test: kill -9 of b: its \(victims.count) posts answered again after \(takeover)")
            #expect(answered.count == victims.count)
            #expect(takeover < .seconds(5), "slots of a killed node answer again within 5 s (took \(takeover))")
            try await Task.sleep(for: .seconds(2))
            load.stop()
            await driver.value
            try await load.settle()
            try await harness.flush([nodes[0], nodes[2]])
            print("cluster-test: kill -9: \(load.acknowledged) acknowledged, \(load.failed) failed \(load.statuses)")
            try await harness.verify(load)
            let after = try await harness.map(via: nodes[0])
            #expect(after.nodes.first { $0.id == "b" }?.live == false)
            #expect(after.nodes.first { $0.id == "b" }?.ownedSlots == 0)
            let takeoversOfA = try await harness.metrics(of: nodes[0])["counter_takeovers_total"] ?? 0
            let takeoversOfC = try await harness.metrics(of: nodes[2])["counter_takeovers_total"] ?? 0
            let takeovers = takeoversOfA + takeoversOfC
            #expect(takeovers >= 3, "a and c each took over at start and after the kill")
        }
    }

    @Test("an owner paused (SIGSTOP) for twice its lease under load: its late writes are fenced, it rejoins, nothing lost or phantom")
    func pauseLongerThanLease() async throws {
        try await ClusterHarness.with("pause") { harness in
            let posts = try await TestEnvironment.createPosts(60, in: harness.pool)
            let nodes = try await Self.startThree(harness, leaseMilliseconds: 1_500)
            let load = HTTPPairLoad(posts: posts)
            load.setNodes(nodes.map(\.url))
            let driver = Task { await load.run(workers: 12) }
            try await Task.sleep(for: .seconds(1))

            nodes[1].process.kill(SIGSTOP)
            let paused = ContinuousClock.now
            try await Task.sleep(for: .milliseconds(3_000))
            _ = try await harness.waitForMap(via: nodes[0], timeout: .seconds(10)) { map in
                map.nodes.first { $0.id == "b" }?.ownedSlots == 0 && map.movesPending == 0
            }
            print("cluster-test: pause: b's slots served by a and c \(ContinuousClock.now - paused) after SIGSTOP")
            nodes[1].process.kill(SIGCONT)
            // b wakes with requests and flushes it had started under its old epochs: they are refused.
            let rejoined = try await harness.waitForMap(via: nodes[0]) { map in
                map.movesPending == 0 && (map.nodes.first { $0.id == "b" }?.ownedSlots ?? 0) > 5_000
            }
            #expect(rejoined.nodes.first { $0.id == "b" }?.live == true)
            try await Task.sleep(for: .seconds(1))
            load.stop()
            await driver.value
            try await load.settle()
            try await harness.flush(nodes)
            let fenced = try await harness.metrics(of: nodes[1])["counter_fenced_writes_total"] ?? 0
            print("cluster-test: pause: b's fenced writes \(fenced); \(load.acknowledged) acknowledged, \(load.failed) failed \(load.statuses)")
            #expect(fenced > 0, "b's writes under its old epochs were refused")
            try await harness.verify(load)
        }
    }

    @Test("kill -9 and an immediate restart under the same id: a new incarnation, every slot under a new epoch")
    func restartSameID() async throws {
        try await ClusterHarness.with("restart") { harness in
            let posts = try await TestEnvironment.createPosts(30, in: harness.pool)
            let a = try await harness.start("a")
            let load = HTTPPairLoad(posts: posts)
            load.setNodes([a.url])
            for (index, post) in posts.enumerated() { await load.send("PUT", Pair(user: Int64(index + 1), post: post)) }
            let before = try await harness.map(via: a)
            a.process.kill(SIGKILL)
            let again = try await harness.start("a")
            load.setNodes([again.url])
            let after = try await harness.map(via: again)
            let old = try #require(before.nodes.first { $0.id == "a" })
            let new = try #require(after.nodes.first { $0.id == "a" })
            #expect(new.incarnation > old.incarnation)
            #expect(new.ownedSlots == HashSlot.count)
            #expect(new.lowestEpoch > old.highestEpoch, "every slot changed epoch: the old incarnation's writes are refused")
            for (index, post) in posts.enumerated() { await load.send("toggle", Pair(user: Int64(index + 1), post: post)) }
            try await load.settle()
            try await harness.flush([again])
            try await harness.verify(load)
        }
    }

    @Test("a second node started with a node id a live node holds refuses to start, and says why")
    func duplicateID() async throws {
        try await ClusterHarness.with("duplicate") { harness in
            let first = try await harness.start("x")
            let refused = await #expect(throws: HarnessError.self) { _ = try await harness.start("x", collectingErrors: true) }
            #expect(refused?.description.contains("node id \"x\" is held by a running node") == true, "\(String(describing: refused))")
            let map = try await harness.map(via: first)
            #expect(map.nodes.map(\.id) == ["x"])
            #expect(map.nodes[0].ownedSlots == HashSlot.count)
        }
    }
}
