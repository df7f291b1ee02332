import BenchKit
import CounterClient
import CounterWire
import Foundation
import NodeTestSupport
import ShardRouter
import TestSupport
import Testing
import UserTokens

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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

    /// Takeovers `nodes` made so far, by their metrics.
    static func takeovers(_ harness: ClusterHarness, _ nodes: [ClusterHarness.Node]) async throws -> Double {
        var total = 0.0
        for node in nodes { total += try await harness.metrics(of: node)["counter_takeovers_total"] ?? 0 }
        return total
    }

    /// - Parameter collecting: ids of the nodes whose log the test reads (`ChildProcess.output`).
    static func startThree(
        _ harness: ClusterHarness, leaseMilliseconds: Int? = nil, extra: [String] = [],
        collecting: Set<String> = []
    ) async throws -> [ClusterHarness.Node] {
        var nodes: [ClusterHarness.Node] = []
        for id in ["a", "b", "c"] {
            nodes.append(try await harness.start(id, leaseMilliseconds: leaseMilliseconds, extra: extra, collectingErrors: collecting.contains(id)))
        }
        _ = try await harness.waitForMap(via: nodes[0]) { map in
            map.movesPending == 0 && map.nodes.filter(\.live).count == 3 && map.nodes.allSatisfy { $0.ownedSlots > 5_000 }
        }
        // The map settles when the last slots change owner; each new owner serves them once it
        // has drained their logs, which its readiness says (up to 30 s).
        for node in nodes {
            var ready = false
            for _ in 0..<300 where !ready {
                let answer = try? await RawHTTPClient.exchange(port: node.port, chunks: [RawHTTPClient.request("GET", "/readyz")], responses: 1)
                ready = answer?.first?.status == 200
                if !ready { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(ready, "node \(node.id) is not ready")
        }
        return nodes
    }

    // With the default lease (3 s, renewed every second): the time a client waits is what was
    // left of the lease, a round (250 ms), the claim and the drain of the slots' logs. That time
    // is printed, not asserted: on a busy machine it measures the machine (the lease's arithmetic
    // is LeaseValidityTests', on a clock the test moves).
    @Test(
        "kill -9 of one node under load: once its lease runs out its slots are taken over and answer again, while the load goes on; nothing lost, phantom or applied twice"
    )
    func killNineUnderLoad() async throws {
        try await ClusterHarness.with("kill9") { harness in
            let posts = try await TestEnvironment.createPosts(60, in: harness.pool)
            let nodes = try await Self.startThree(harness)
            let load = HTTPPairLoad(posts: posts)
            load.setNodes(nodes.map(\.url))
            let driver = Task { await load.run(workers: 6) }
            try await load.waitForAcknowledged(200)

            let map = try await harness.map(via: nodes[0])
            let victims = Self.posts(posts, ownedBy: "b", in: map)
            #expect(!victims.isEmpty)
            load.setNodes([nodes[0].url, nodes[2].url])
            let takeoversBefore = try await Self.takeovers(harness, [nodes[0], nodes[2]])
            nodes[1].process.kill(SIGKILL)
            let killed = ContinuousClock.now
            print("cluster-test: kill -9 of b at \(Date())")
            // Probes: one like per post of b's slots, through node a, until each is answered.
            var answered: Set<Int64> = []
            while answered.count < victims.count && ContinuousClock.now - killed < .seconds(60) {
                for post in victims where !answered.contains(post) {
                    if await load.probe(Pair(user: 9_000_000, post: post), port: nodes[0].port) { answered.insert(post) }
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            let takeover = ContinuousClock.now - killed
            print("cluster-test: kill -9: the last probe answered at \(Date())")
            print("cluster-test: kill -9 of b: its \(victims.count) posts answered again after \(takeover)")
            #expect(answered.count == victims.count, "\(victims.count - answered.count) of b's posts not answered \(takeover) after the kill")
            // The load goes on through a and c.
            try await load.waitForAcknowledged(200, since: load.acknowledged)
            load.stop()
            await driver.value
            try await load.settle()
            try await harness.flush([nodes[0], nodes[2]])
            print("cluster-test: kill -9: \(load.acknowledged) acknowledged, \(load.failed) failed \(load.statuses)")
            try await harness.verify(load)
            let after = try await harness.map(via: nodes[0])
            #expect(after.nodes.first { $0.id == "b" }?.live == false)
            #expect(after.nodes.first { $0.id == "b" }?.ownedSlots == 0)
            let takeoversAfter = try await Self.takeovers(harness, [nodes[0], nodes[2]])
            #expect(takeoversAfter > takeoversBefore, "the killed node's slots were taken over (not handed off)")
        }
    }

    @Test(
        "an owner paused (SIGSTOP) under load until its lease ran out and its slots were taken over: woken, it learns its lease ran out and decides nothing until a round has read who owns its slots (what it had in flight is fenced); it rejoins, nothing lost or phantom"
    )
    func pauseLongerThanLease() async throws {
        try await ClusterHarness.with("pause") { harness in
            let posts = try await TestEnvironment.createPosts(60, in: harness.pool)
            // The default lease (3 s): renewals were seen seconds late on a loaded CI machine, and
            // a shorter lease then takes the live nodes' slots too (safely, but the map churns).
            let nodes = try await Self.startThree(harness, collecting: ["b"])
            let load = HTTPPairLoad(posts: posts)
            load.setNodes(nodes.map(\.url))
            let driver = Task { await load.run(workers: 6) }
            try await load.waitForAcknowledged(100)

            nodes[1].process.kill(SIGSTOP)
            let paused = ContinuousClock.now
            // Paused until a and c own its slots: its lease ran out (by PostgreSQL's clock) first.
            _ = try await harness.waitForMap(via: nodes[0], timeout: .seconds(60)) { map in
                map.nodes.first { $0.id == "b" }?.ownedSlots == 0 && map.movesPending == 0
            }
            print("cluster-test: pause: b's slots served by a and c \(ContinuousClock.now - paused) after SIGSTOP")
            nodes[1].process.kill(SIGCONT)
            // b wakes with requests and flushes it had started under its old epochs: they are refused.
            let rejoined = try await harness.waitForMap(via: nodes[0]) { map in
                map.movesPending == 0 && (map.nodes.first { $0.id == "b" }?.ownedSlots ?? 0) > 5_000
            }
            #expect(rejoined.nodes.first { $0.id == "b" }?.live == true)
            try await load.waitForAcknowledged(100, since: load.acknowledged)
            load.stop()
            await driver.value
            try await load.settle()
            try await harness.flush(nodes)
            let fenced = try await harness.metrics(of: nodes[1])["counter_fenced_writes_total"] ?? 0
            print("cluster-test: pause: b's fenced writes \(fenced); \(load.acknowledged) acknowledged, \(load.failed) failed \(load.statuses)")
            // Its first renewal found the lease run out (PostgreSQL's clock): no deciding until a
            // round — so its queued operations were refused, not written and fenced (before, the
            // renewal alone let it decide again, and only the fence stopped its writes).
            let lapse = nodes[1].process.output.first { $0.contains("event=lease_renewed_after_lapse") }
            #expect(lapse != nil, "b: \(nodes[1].process.lastLines)")
            try await harness.verify(load)
        }
    }

    @Test(
        "with reactions, one per user: kill -9 of one node of three under a load of random kinds; after the takeover each pair's rows are its last answer, no user ever shows two kinds, each kind's count equals its rows, nothing applied twice"
    )
    func killNineUnderReactionLoad() async throws {
        let kinds = ["like", "love", "haha", "wow"]
        try await ClusterHarness.with("kill9-reactions", postgresURL: try await TestEnvironment.onePerUserReactionsDatabase()) { harness in
            let posts = try await TestEnvironment.createPosts(30, in: harness.pool)
            let nodes = try await Self.startThree(harness, extra: ["--reactions", kinds.joined(separator: ","), "--reactions-per-user", "one"])
            let load = HTTPReactionLoad(posts: posts, kinds: kinds, onePerUser: true)
            load.setNodes(nodes.map(\.url))
            let driver = Task { await load.run(workers: 6) }
            try await load.waitForAcknowledged(300)
            load.setNodes([nodes[0].url, nodes[2].url])
            nodes[1].process.kill(SIGKILL)
            #expect(try await nodes[1].process.waitForExit() == 128 + SIGKILL)
            // Served again through a and c once b's slots are taken over: more answers.
            _ = try await harness.waitForMap(via: nodes[0], timeout: .seconds(60)) { map in
                map.nodes.first { $0.id == "b" }?.ownedSlots == 0 && map.movesPending == 0
            }
            try await load.waitForAcknowledged(300, since: load.acknowledged)
            load.stop()
            await driver.value
            try await load.settle(via: nodes[0].url)
            try await harness.flush([nodes[0], nodes[2]])
            print("cluster-test: kill -9 under reactions: \(load.acknowledged) acknowledged, \(load.failed) failed")
            try await load.verify(pool: harness.pool)
            let audited = try await harness.pool.query("SELECT count(*) FROM \(harness.audit.name)")
            #expect(try audited.first?.int64(0) ?? 0 > 0, "the flushes recorded what they applied (an entry applied twice fails its flush)")
        }
    }

    @Test("1→2→3 nodes joining, one leaving with SIGTERM and coming back (its slots A→B→A), all under load: nothing lost, phantom or applied twice")
    func movesUnderLoad() async throws {
        try await ClusterHarness.with("moves") { harness in
            let posts = try await TestEnvironment.createPosts(60, in: harness.pool)
            // 1,024 slots a step (the default is 256), to keep the test short.
            let moving = ["--max-moving-slots", "1024"]
            let a = try await harness.start("a", extra: moving)
            let load = HTTPPairLoad(posts: posts)
            load.setNodes([a.url])
            let driver = Task { await load.run(workers: 6) }
            try await load.waitForAcknowledged(100)

            func settled(_ count: Int) async throws -> ClusterMapBody {
                try await harness.waitForMap(via: a, timeout: .seconds(60)) { map in
                    map.movesPending == 0 && map.nodes.filter(\.live).count == count
                        && map.nodes.filter(\.live).allSatisfy { $0.ownedSlots >= HashSlot.count / count - 1 }
                }
            }
            let b = try await harness.start("b", extra: moving)
            load.setNodes([a.url, b.url])
            _ = try await settled(2)
            let c = try await harness.start("c", extra: moving)
            load.setNodes([a.url, b.url, c.url])
            let three = try await settled(3)
            let bSlots = try #require(three.nodes.first { $0.id == "b" }?.slots)

            // b leaves in good order: its slots go to a and c while the load goes on.
            load.setNodes([a.url, c.url])
            b.process.kill(SIGTERM)
            #expect(try await b.process.waitForExit() == 0)
            _ = try await settled(2)
            // b comes back: the same slots move back to it, under new epochs.
            let back = try await harness.start("b", extra: moving)
            load.setNodes([a.url, back.url, c.url])
            let again = try await settled(3)
            #expect(again.nodes.first { $0.id == "b" }?.slots == bSlots, "the target is the same for the same nodes")
            #expect(
                (again.nodes.first { $0.id == "b" }?.lowestEpoch ?? 0) > (three.nodes.map(\.highestEpoch).max() ?? 0),
                "slots that came back to b carry epochs newer than any before")
            try await load.waitForAcknowledged(100, since: load.acknowledged)
            load.stop()
            await driver.value
            try await load.settle()
            try await harness.flush([a, back, c])
            print("cluster-test: moves: \(load.acknowledged) acknowledged, \(load.failed) failed \(load.statuses)")
            try await harness.verify(load)
            let handedOff = try await harness.metrics(of: a)["counter_handed_off_slots_total"] ?? 0
            #expect(handedOff >= Double(HashSlot.count / 2), "a handed slots to b and c")
        }
    }

    @Test(
        "PostgreSQL away longer than the lease (every node's lease runs out by its clock), then back: no node takes another's slots, each keeps its range under its epochs, and the load before and after is all there"
    )
    func postgresOutageMovesNoSlots() async throws {
        try await PrivateServers.with { servers in
            try await ClusterHarness.with("pg-outage", postgresURL: servers.postgresURL) { harness in
                let posts = try await TestEnvironment.createPosts(30, in: harness.pool)
                let nodes = try await Self.startThree(harness, leaseMilliseconds: 2_000, collecting: ["a", "b", "c"])
                let before = try await harness.map(via: nodes[0])
                let load = HTTPPairLoad(posts: posts)
                load.setNodes(nodes.map(\.url))
                for (index, post) in posts.enumerated() { await load.send("PUT", Pair(user: Int64(index + 1), post: post)) }
                // The first node took every unowned slot when it started: a takeover of its own.
                let takeoversBefore = try await Self.takeovers(harness, nodes)
                try await servers.run("stop", only: "postgres")
                for node in nodes {
                    let lapsed = try await node.process.waitForOutput(timeout: .seconds(60)) { $0.contains { $0.contains("event=lease_lapsed") } }
                    #expect(lapsed, "node \(node.id): \(node.process.lastLines)")
                }
                try await servers.run("start", only: "postgres")
                for node in nodes {
                    let back = try await node.process.waitForOutput(timeout: .seconds(60)) { $0.contains { $0.contains("event=postgres_reachable") } }
                    #expect(back, "node \(node.id): \(node.process.lastLines)")
                }
                // A lease after their renewals got through again, every node moves slots again
                // (it logs slot_moves_resumed): by then each has renewed, so nobody is taken for
                // dead.
                for node in nodes {
                    let resumed = try await node.process.waitForOutput(timeout: .seconds(60)) {
                        $0.contains { $0.contains("event=slot_moves_resumed") }
                    }
                    #expect(resumed, "node \(node.id): \(node.process.lastLines)")
                    // The outage's end is in its metrics too (a count that only grows: a renewal
                    // failing later on a loaded machine may hold moves again, rightly).
                    #expect(try await harness.metrics(of: node)["counter_postgres_outages_total"] ?? 0 >= 1)
                }
                let after = try await harness.waitForMap(via: nodes[0]) { map in map.nodes.filter(\.live).count == 3 && map.movesPending == 0 }
                #expect(try await Self.takeovers(harness, nodes) == takeoversBefore, "a node took another's slots after the outage")
                for node in before.nodes {
                    let now = try #require(after.nodes.first { $0.id == node.id })
                    #expect(
                        now.slots == node.slots && now.lowestEpoch == node.lowestEpoch && now.highestEpoch == node.highestEpoch,
                        "\(node.id): \(node) → \(now)")
                }
                for (index, post) in posts.enumerated() { await load.send("toggle", Pair(user: Int64(index + 1), post: post)) }
                try await load.settle()
                try await harness.flush(nodes)
                try await harness.verify(load)
            }
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

    @Test("cluster status shows the nodes and their ranges; cluster drain moves a node's slots away under load, and --undo back")
    func operatorDrain() async throws {
        try await ClusterHarness.with("drain") { harness in
            let posts = try await TestEnvironment.createPosts(30, in: harness.pool)
            let a = try await harness.start("a", extra: ["--max-moving-slots", "2048"])
            let b = try await harness.start("b", extra: ["--max-moving-slots", "2048"])
            _ = try await harness.waitForMap(via: a) { $0.movesPending == 0 && $0.nodes.allSatisfy { $0.ownedSlots == HashSlot.count / 2 } }
            let load = HTTPPairLoad(posts: posts)
            load.setNodes([a.url, b.url])
            let driver = Task { await load.run(workers: 4) }

            func command(_ arguments: [String]) async throws -> (status: Int32, output: [String]) {
                let process = try ChildProcess(
                    [ChildProcess.builtProduct("counter-node")] + arguments + ["--node", a.url],
                    mergingStandardError: true)
                let status = try await process.waitForExit()
                return (status, process.output)
            }
            let status = try await command(["cluster", "status"])
            #expect(status.status == 0)
            #expect(status.output.contains { $0.hasPrefix("a ") && $0.contains("0-8191") }, "\(status.output)")
            #expect(status.output.contains { $0.hasPrefix("b ") && $0.contains("8192-16383") }, "\(status.output)")
            #expect(status.output.contains { $0.contains("no moves pending") })

            let drained = try await command(["cluster", "drain", "b"])
            #expect(drained.status == 0)
            #expect(drained.output.contains { $0.contains("node b is draining") }, "\(drained.output)")
            _ = try await harness.waitForMap(via: a) { map in
                map.nodes.first { $0.id == "b" }.map { $0.draining && $0.ownedSlots == 0 } ?? false
            }
            let undone = try await command(["cluster", "drain", "b", "--undo"])
            #expect(undone.status == 0)
            _ = try await harness.waitForMap(via: a) { map in
                map.movesPending == 0 && map.nodes.first { $0.id == "b" }?.ownedSlots == HashSlot.count / 2
            }
            let unknown = try await command(["cluster", "drain", "nobody"])
            #expect(unknown.status != 0)
            #expect(unknown.output.contains { $0.contains("no node \"nobody\"") }, "\(unknown.output)")
            let usage = try await command(["cluster", "drain"])
            #expect(usage.status == 2)

            load.stop()
            await driver.value
            try await load.settle()
            try await harness.flush([a, b])
            try await harness.verify(load)
        }
    }

    @Test(
        "operator commands act on the whole cluster through any node: flush --wait leaves nothing any node acknowledged out of PostgreSQL; stats, reconcile and dead-letter replay span the nodes; a dead node makes them answer incomplete (status 7) and name it"
    )
    func clusterWideOperations() async throws {
        try await ClusterHarness.with("operations") { harness in
            let posts = try await TestEnvironment.createPosts(60, in: harness.pool)
            // Nothing flushes on its own: whatever a node acknowledged waits in its logs until asked.
            // A 15 s lease: once c is killed, the two commands that must find it silent but still
            // owning its slots (each a process started and run) have at least 14 s, not 2.
            let nodes = try await Self.startThree(
                harness, leaseMilliseconds: 15_000,
                extra: ["--flush-interval", "1h", "--flush-max-age", "1h"])
            func command(_ arguments: [String], via node: ClusterHarness.Node? = nil) async throws -> (status: Int32, output: [String]) {
                let process = try ChildProcess(
                    [ChildProcess.builtProduct("counter-node")] + arguments + ["--node", (node ?? nodes[0]).url],
                    mergingStandardError: true)
                let status = try await process.waitForExit()
                return (status, process.output)
            }
            let load = HTTPPairLoad(posts: posts)
            load.setNodes(nodes.map(\.url))
            let driver = Task { await load.run(workers: 6) }
            try await load.waitForAcknowledged(200)
            load.stop()
            await driver.value
            try await load.settle()

            // Flushing through a flushes b's and c's backlogs too.
            let flushed = try await command(["flush", "--wait", "--timeout", "60"])
            #expect(flushed.status == 0, "\(flushed.output)")
            #expect(
                flushed.output.contains { $0.contains("flushed: PostgreSQL has every change the cluster's 3 node(s) acknowledged") },
                "\(flushed.output)")
            try await harness.verify(load)
            print("cluster-test: operations: \(load.acknowledged) acknowledged on 3 nodes, in PostgreSQL after one flush through a")

            let stats = try await command(["stats"])
            #expect(stats.status == 0, "\(stats.output)")
            for name in ["a ", "b ", "c ", "cluster "] { #expect(stats.output.contains { $0.hasPrefix(name) }, "\(name): \(stats.output)") }

            // Drift planted on one of c's posts is found and repaired through a.
            let map = try await harness.map(via: nodes[0])
            let ofB = Self.posts(posts, ownedBy: "b", in: map)
            let ofC = Self.posts(posts, ownedBy: "c", in: map)
            try await harness.pool.query("UPDATE posts SET likes_count = likes_count + 3 WHERE id = $1", [.int64(ofC[0])])
            let found = try await command(["reconcile", "--post", String(ofC[0])])
            #expect(found.status == 5 && found.output.contains { $0.contains("1 with likes_count ≠ likes rows") }, "\(found.output)")
            let repaired = try await command(["reconcile", "--post", String(ofC[0]), "--repair"])
            #expect(repaired.status == 0, "\(repaired.output)")
            #expect(try await command(["reconcile", "--post", String(ofC[0])]).status == 0)

            // Dead letters of b's and c's posts (the posts deleted before their flush) are replayed
            // by their owners once the posts are back; a alone cannot replay them.
            let lettered = [ofB[0], ofC[1]]
            for post in lettered {
                _ = try await CounterServiceClient(configuration: .init(baseURL: URL(string: nodes[0].url)!)).like(post: post, user: 777_777)
            }
            try await harness.pool.query("DELETE FROM posts WHERE id = ANY($1::bigint[])", [.int64Array(lettered)])
            #expect(try await command(["flush", "--wait"]).status == 0)
            try await harness.pool.query("INSERT INTO posts (id) SELECT unnest($1::bigint[])", [.int64Array(lettered)])
            let alone = try await command(["dead-letters", "replay", "--this-node"])
            #expect(alone.status == 1, "a does not own their slots: \(alone.output)")
            let replayed = try await command(["dead-letters", "replay"])
            #expect(replayed.status == 0, "\(replayed.output)")
            #expect(replayed.output.contains { $0.contains("replayed 2 change(s)") }, "\(replayed.output)")
            #expect(try await command(["flush", "--wait"]).status == 0)
            let rows = try await harness.pool.query(
                "SELECT post_id FROM likes WHERE user_id = 777777 AND post_id = ANY($1::bigint[])", [.int64Array(lettered)])
            #expect(rows.count == 2, "the replayed likes are in PostgreSQL")

            // c acknowledges likes, then dies: until its lease runs out, the cluster's answers leave
            // it out and say so; once its slots are taken over (and its logs drained), the flush
            // is whole again and has c's likes.
            let throughC = CounterServiceClient(configuration: .init(baseURL: URL(string: nodes[2].url)!))
            for post in ofC.prefix(5) { #expect(try await throughC.like(post: post, user: 888_888).isLiked) }
            nodes[2].process.kill(SIGKILL)
            let partial = try await command(["stats"])
            #expect(partial.status == 7, "\(partial.output)")
            #expect(partial.output.contains { $0.contains("node c") && $0.contains("did not answer") }, "\(partial.output)")
            let partialFlush = try await command(["flush", "--wait"])
            #expect(partialFlush.status == 7 && partialFlush.output.contains { $0.contains("NOT flushed everywhere") }, "\(partialFlush.output)")
            _ = try await harness.waitForMap(via: nodes[0], timeout: .seconds(90)) { map in
                map.movesPending == 0 && map.nodes.first { $0.id == "c" }.map { !$0.live && $0.ownedSlots == 0 } ?? false
            }
            var whole: (status: Int32, output: [String]) = (-1, [])
            for _ in 0..<50 where whole.status != 0 {
                whole = try await command(["flush", "--wait"])
                if whole.status != 0 { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(whole.status == 0, "\(whole.output)")
            let ofDead = try await harness.pool.query(
                "SELECT count(*) FROM likes WHERE user_id = 888888 AND post_id = ANY($1::bigint[])",
                [.int64Array(Array(ofC.prefix(5)))])
            #expect(try ofDead.first?.int64(0) == 5, "the likes c acknowledged before it died")
        }
    }

    @Test(
        "a slot-aware CounterClient sends each post's calls straight to its owner (nothing forwarded); a plain one is forwarded, as a user's calls are"
    )
    func slotAwareClient() async throws {
        try await ClusterHarness.with("slotaware") { harness in
            let posts = try await TestEnvironment.createPosts(40, in: harness.pool)
            let secret = "several-nodes-user-secret-0123456789"
            let nodes = try await Self.startThree(harness, extra: ["--user-token-secret", secret, "--user-write-burst", "100"])
            func forwarded() async throws -> Double {
                var total = 0.0
                for node in nodes { total += try await harness.metrics(of: node)["counter_forwarded_requests_total"] ?? 0 }
                return total
            }
            var configuration = CounterServiceClient.Configuration(baseURL: URL(string: nodes[0].url)!)
            configuration.slotAware = true
            let aware = CounterServiceClient(configuration: configuration)
            let before = try await forwarded()
            for post in posts { #expect(try await aware.like(post: post, user: 5).isLiked) }
            for post in posts { #expect(try await aware.toggle(post: post, user: 5).isLiked == false) }
            #expect(try await forwarded() == before, "every call went to its owner")

            let plain = CounterServiceClient(configuration: .init(baseURL: URL(string: nodes[0].url)!))
            for post in posts { #expect(try await plain.like(post: post, user: 6).isLiked) }
            #expect(try await forwarded() > before, "posts of b's and c's slots were forwarded by a")
            // An end user through node a: the owners verify the token and act for its user.
            let signer = TokenSigner(secret: secret)
            let user = CounterServiceClient(configuration: .init(baseURL: URL(string: nodes[0].url)!) { _ in signer.token(user: 8) })
            let forwardedBefore = try await forwarded()
            for post in posts { #expect(try await user.toggle(post: post).isLiked) }
            #expect(try await user.feed(posts: posts).allSatisfy(\.isLiked))
            #expect(try await forwarded() > forwardedBefore)
            // A logged-out viewer's page through node a (no user_id): each owner answers its posts'
            // counts (users 6 and 8 like each post; 5 liked and unliked), liked by nobody.
            var anonymous = URLRequest(url: URL(string: nodes[0].url + "/v1/posts/query")!)
            anonymous.httpMethod = "POST"
            anonymous.httpBody = Data(#"{"post_ids":[\#(posts.map(String.init).joined(separator: ","))]}"#.utf8)
            let (body, _) = try await URLSession.shared.data(for: anonymous)
            let page = try JSONDecoder().decode(FeedPage.self, from: body)
            #expect(page.posts.map(\.postID) == posts)
            #expect(page.posts.allSatisfy { !$0.isLiked && $0.likesCount == 2 }, "\(String(decoding: body, as: UTF8.self).prefix(300))")
            try await harness.flush(nodes)
            let rows = try await harness.pool.query(
                "SELECT user_id, count(*) FROM likes WHERE post_id = ANY($1::bigint[]) GROUP BY user_id",
                [.int64Array(posts)])
            let counts = Dictionary(uniqueKeysWithValues: try rows.map { (try $0.int64(0), try $0.int64(1)) })
            #expect(counts == [6: Int64(posts.count), 8: Int64(posts.count)])
        }
    }

    @Test(
        "the lists through any node: a post's likers from its owner, a user's likes from every node's pending changes, the same before and after the flush"
    )
    func listsAcrossNodes() async throws {
        try await ClusterHarness.with("lists") { harness in
            let posts = try await TestEnvironment.createPosts(30, in: harness.pool)
            // Nothing flushes on its own: every change waits in some node's log.
            let nodes = try await Self.startThree(harness, extra: ["--flush-interval", "1h", "--flush-max-age", "1h"])
            let user = Int64.random(in: 1_000...1_000_000_000) * 1_000
            let client = CounterServiceClient(configuration: .init(baseURL: URL(string: nodes[0].url)!))
            for post in posts {
                #expect(try await client.like(post: post, user: user).isLiked)
                #expect(try await client.like(post: post, user: user + 1).isLiked)
                try await Task.sleep(for: .milliseconds(2))
            }
            #expect(try await client.unlike(post: posts[3], user: user).isLiked == false)
            #expect(try await harness.pool.query("SELECT 1 FROM likes WHERE post_id = ANY($1::bigint[])", [.int64Array(posts)]).isEmpty)
            func get(_ node: ClusterHarness.Node, _ path: String) async throws -> String {
                let answer = try await RawHTTPClient.exchange(port: node.port, chunks: [RawHTTPClient.request("GET", path)], responses: 1)
                #expect(answer.first?.status == 200, "\(path): \(answer.first?.text ?? "")")
                return answer.first?.text ?? ""
            }
            let expected = posts.filter { $0 != posts[3] }.reversed().map { $0 }
            var answers: [String] = []
            for node in nodes {
                let text = try await get(node, "/v1/users/\(user)/likes?limit=100")
                let page = try JSONDecoder().decode(UserLikesPage.self, from: Data(text.utf8))
                #expect(page.likes.map(\.postID) == expected, "through \(node.id)")
                answers.append(text)
            }
            #expect(Set(answers).count == 1, "every node answers the same list")
            let map = try await harness.map(via: nodes[0])
            // (Not posts[3]: its first liker unliked it.)
            let elsewhere = Self.posts(posts.filter { $0 != posts[3] }, ownedBy: "b", in: map).first!
            let likers = try JSONDecoder().decode(LikersPage.self, from: Data(try await get(nodes[0], "/v1/posts/\(elsewhere)/likers").utf8))
            #expect(Set(likers.likers.map(\.userID)) == [user, user + 1] && likers.likesCount == 2)
            // A feed page through node a with every post's newest likers: each owner answers its own.
            let feed = try await RawHTTPClient.exchange(
                port: nodes[0].port,
                chunks: [
                    RawHTTPClient.request(
                        "POST", "/v1/posts/query",
                        body: #"{"post_ids":[\#(posts.map(String.init).joined(separator: ","))],"include":["recent_likers"]}"#)
                ], responses: 1)
            let entries = try JSONDecoder().decode(FeedPage.self, from: Data((feed.first?.text ?? "").utf8)).posts
            #expect(entries.map(\.postID) == posts)
            for entry in entries {
                // (Both likes may share a millisecond: then the smaller id comes first.)
                #expect(
                    Set(entry.recentLikers?.map(\.userID) ?? []) == (entry.postID == posts[3] ? [user + 1] : [user + 1, user]), "post \(entry.postID)"
                )
            }
            try await harness.flush(nodes)
            #expect(try await get(nodes[2], "/v1/users/\(user)/likes?limit=100") == answers[0], "PostgreSQL keeps the times the lists showed")
            let flushed = try JSONDecoder().decode(LikersPage.self, from: Data(try await get(nodes[1], "/v1/posts/\(elsewhere)/likers").utf8))
            #expect(flushed == likers)

            // b dies with a user's likes only in its logs: until its slots are taken over and
            // drained, a list through a says it cannot answer (503); then it lists them all —
            // never a list that leaves them out.
            let late = user + 7
            let bsPosts = Self.posts(posts, ownedBy: "b", in: map)
            let direct = CounterServiceClient(configuration: .init(baseURL: URL(string: nodes[1].url)!))
            for post in bsPosts {
                #expect(try await direct.like(post: post, user: late).isLiked)
                try await Task.sleep(for: .milliseconds(2))
            }
            nodes[1].process.kill(SIGKILL)
            let killed = ContinuousClock.now
            var statuses: [Int: Int] = [:]
            var listed: [Int64]?
            while listed == nil && ContinuousClock.now - killed < .seconds(30) {
                let answer = try await RawHTTPClient.exchange(
                    port: nodes[0].port, chunks: [RawHTTPClient.request("GET", "/v1/users/\(late)/likes?limit=100")],
                    responses: 1)
                let status = answer.first?.status ?? 0
                statuses[status, default: 0] += 1
                if status == 200 {
                    listed = try JSONDecoder().decode(UserLikesPage.self, from: Data((answer.first?.text ?? "").utf8)).likes.map(\.postID)
                } else {
                    #expect(status == 503, "while b's slots change owner: \(answer.first?.text ?? "")")
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            print("cluster-test: lists after kill -9 of b: answers \(statuses), listed after \(ContinuousClock.now - killed)")
            #expect(listed == bsPosts.reversed(), "every like b acknowledged, newest first")
        }
    }

    @Test(
        "the bench's load generator: slot-aware, every request goes to its post's owner; spread, the nodes forward; PostgreSQL agrees with every answer"
    )
    func slotAwareLoad() async throws {
        try await ClusterHarness.with("benchroutes") { harness in
            let posts = try await TestEnvironment.createPosts(30, in: harness.pool)
            let nodes = try await Self.startThree(harness)
            func forwarded() async throws -> Double {
                var total = 0.0
                for node in nodes { total += try await harness.metrics(of: node)["counter_forwarded_requests_total"] ?? 0 }
                return total
            }
            let routes = try SlotAwareRoutes(map: try await harness.map(via: nodes[0]))
            #expect(Set(routes.endpoints.map(\.port)) == Set(nodes.map(\.port)))
            var expectations: [CorrectnessCheck.Pair: CorrectnessCheck.Expectation] = [:]
            for (index, routing) in [ScenarioWorkload.Routing.slotAware(routes), .spread(count: 3)].enumerated() {
                var options = LoadOptions()
                options.endpoints = routes.endpoints
                options.connections = 12
                options.duration = .seconds(2)
                options.warmup = .zero
                var workload = ScenarioWorkload(
                    scenario: .zipf, operation: .toggle, posts: posts, zipfExponent: 0.5, readRatio: 0,
                    token: nil, userBase: Int64(index + 1) * 1_000_000_000)
                workload.routing = routing
                let before = try await forwarded()
                let result = await LoadGenerator(options: options, workload: workload).run { _, _, _, _ in }
                #expect(result.successes > 100, "\(result.statuses) \(result.errors)")
                #expect(result.failures == 0, "\(result.statuses) \(result.errors)")
                let forwardedNow = try await forwarded() - before
                if index == 0 {
                    #expect(forwardedNow == 0, "slot-aware: every request went to its owner")
                } else {
                    // Two thirds of a spread load lands on a node that does not own the post.
                    #expect(forwardedNow > Double(result.successes) / 3, "\(forwardedNow) of \(result.successes) forwarded")
                }
                expectations.merge(result.expectations) { $1 }
            }
            try await harness.flush(nodes)
            let rows = try await harness.pool.query("SELECT user_id, post_id FROM likes WHERE post_id = ANY($1::bigint[])", [.int64Array(posts)])
            let members = Set(try rows.map { CorrectnessCheck.Pair(user: try $0.int64(0), post: try $0.int64(1)) })
            let countRows = try await harness.pool.query(
                """
                SELECT p.id, p.likes_count, (SELECT count(*) FROM likes l WHERE l.post_id = p.id) FROM posts p WHERE p.id = ANY($1::bigint[])
                """, [.int64Array(posts)])
            var counts: [Int64: (likesCount: Int64, rows: Int64)] = [:]
            for row in countRows { counts[try row.int64(0)] = (try row.int64(1), try row.int64(2)) }
            let report = CorrectnessCheck.run(expected: expectations, baseline: [], members: members, counts: counts)
            #expect(report.passed, "lost \(report.lost.count), phantom \(report.phantom.count), drift \(report.drift.count)")
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
