import CounterWire
import Foundation
import NodeTestSupport
import Persistence
import PostgresDriver
import ShardRouter
import TestSupport
import Testing

@testable import CounterNode
@testable import NodeAPI
@testable import OperatorCommands

/// `counter-node flush | inspect | stats | reconcile | dead-letters` against a running node on the
/// test servers, through `NodeCommand.run` exactly as the executable calls it.
@Suite("Operator commands")
struct OperatorCommandTests {
    typealias Transcript = NodeCommandTests.Transcript

    static func run(_ arguments: [String], node: HTTPHarness?, token: String? = HTTPHarness.adminToken) async -> (NodeCommand.ExitStatus, String) {
        let transcript = Transcript()
        var environment: [String: String] = [:]
        if let node { environment["COUNTER_NODE_URL"] = "http://127.0.0.1:\(node.port)" }
        if let token { environment["COUNTER_ADMIN_TOKEN"] = token }
        let status = await NodeCommand.run(arguments: arguments, environment: environment, output: transcript.output)
        return (status, transcript.text)
    }

    @Test(
        "invalid arguments exit 2 and name the problem; nothing is sent",
        arguments: [
            (["inspect"], "inspect needs one post id"),
            (["inspect", "abc"], "not a positive 64-bit integer"),
            (["inspect", "5", "--user", "0"], "--user 0"),
            (["reconcile"], "exactly one of --post P or --all"),
            (["reconcile", "--post", "1", "--all"], "exactly one of --post P or --all"),
            (["dead-letters"], "dead-letters needs list"),
            (["dead-letters", "drop"], "at least one --id"),
            (["dead-letters", "replay", "--id", "nope"], "--id nope"),
            (["flush", "--timeout", "-1"], "--timeout -1"),
            (["stats", "--wait"], "unknown option --wait for stats"),
            (["stats", "--node", "ftp://x"], "must be a URL"),
            (["stats", "--node", "http://"], "must be a URL"),
            (["flush", "--timeout", "5"], "--timeout only applies with --wait"),
            (["flush", "--wait", "--timeout=0"], "--timeout 0"),
            (["inspect", "-5"], "not a positive 64-bit integer"),
            (["inspect", "5", "--user=x"], "--user x"),
            (["flsh", "--x"], "unknown subcommand \"flsh\""),
            (["inspect", "5", "--this-node"], "unknown option --this-node for inspect"),
            (["cluster", "status", "--this-node"], "unknown option --this-node for cluster"),
        ])
    func usageErrors(arguments: [String], message: String) async {
        let (status, text) = await Self.run(arguments, node: nil)
        #expect(status == .usage, "\(arguments)")
        #expect(text.contains(message), "\(arguments): \(text)")
    }

    @Test("no node at the address exits 3; a wrong admin token exits 4")
    func unreachableAndUnauthorized() async throws {
        let (down, downText) = await Self.run(["stats", "--node", "http://127.0.0.1:1"], node: nil)
        #expect(down == .unreachable)
        #expect(downText.contains("no node answered at http://127.0.0.1:1"))
        let http = try await HTTPHarness.start(posts: 1)
        let (refused, refusedText) = await Self.run(["stats"], node: http, token: "wrong-token-0123456789")
        #expect(refused == .unauthorized)
        #expect(refusedText.contains("refused the admin token"))
        #expect(await Self.run(["stats"], node: http, token: nil).0 == .unauthorized)
        await http.stop()
    }

    @Test("inspect says pending before a flush and agree after flush --wait; stats shows the backlog", arguments: RedisTarget.allCases)
    func inspectAndFlush(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(
            posts: 1, redis: redis,
            writePath: {
                $0.flushOnlyWhenAsked()
            })
        let post = http.posts[0]
        for user in 1...5 { _ = try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)") }

        // By default the cluster's view: a row per node (a node that is the only writer is a
        // cluster of one) and the cluster's total.
        let (cluster, clusterText) = await Self.run(["stats"], node: http)
        #expect(cluster == .success, "\(clusterText)")
        for name in ["this node", "cluster"] {
            let row = clusterText.split(separator: "\n").first { $0.hasPrefix(name) }
            #expect(row?.dropFirst(name.count).split(separator: " ").first == "5", "\(clusterText)")
        }
        // --this-node: per shard, the Redis nodes, the memory.
        let (stats, statsText) = await Self.run(["stats", "--this-node"], node: http)
        #expect(stats == .success)
        let totalRow = statsText.split(separator: "\n").first { $0.hasPrefix("total") }
        #expect(totalRow?.split(separator: " ").dropFirst().first == "5", "\(statsText)")
        #expect(statsText.contains("memory in use"))
        // The Redis nodes: one row per node; the cluster's three masters split the slots.
        #expect(statsText.contains(redis == .cluster ? "redis (cluster)" : "redis (single)"), "\(statsText)")
        let nodeRows = statsText.split(separator: "\n").filter { $0.hasPrefix("127.0.0.1:") }
        #expect(nodeRows.compactMap { Int($0.split(separator: " ")[1]) }.reduce(0, +) == 16_384, "\(statsText)")

        let (pending, pendingText) = await Self.run(["inspect", String(post), "--user", "3"], node: http)
        #expect(pending == .success)
        #expect(pendingText.contains("verdict: pending"), "\(pendingText)")
        #expect(pendingText.contains("pending changes in the write-behind log: 5"))
        #expect(pendingText.contains("user 3 likes"))

        let (flushed, flushedText) = await Self.run(["flush", "--wait", "--timeout", "30"], node: http)
        #expect(flushed == .success)
        #expect(flushedText.contains("flushed: PostgreSQL has every change the cluster's 1 node(s) acknowledged"), "\(flushedText)")

        let (agree, agreeText) = await Self.run(["inspect", String(post), "--user", "3"], node: http)
        #expect(agree == .success)
        #expect(agreeText.contains("verdict: in agreement"), "\(agreeText)")
        let (_, json) = await Self.run(["inspect", String(post), "--json"], node: http)
        let parsed = try WireDecoder.decode(PostInspection.self, from: Array(json.utf8))
        #expect(parsed.verdict == "agree")
        #expect(parsed.postgres.likesRows == 5)

        let (started, startedText) = await Self.run(["flush"], node: http)
        #expect(started == .success && startedText.contains("flush started"))
        await http.stop()
    }

    @Test("flush --wait gives up at its --timeout (status 6) while the node's flush is blocked, and succeeds once it is not")
    func flushTimeout() async throws {
        let http = try await HTTPHarness.start(posts: 1, writePath: { $0.flushOnlyWhenAsked() })
        let post = http.posts[0]
        _ = try await http.send("PUT", "/v1/posts/\(post)/likes/1")
        // Another session holds the post's row: the flush transaction waits for it.
        let blocker = PostgresConnection(configuration: PostgresConfiguration(url: TestEnvironment.postgresURL))
        try await blocker.connect()
        try await blocker.query("BEGIN")
        try await blocker.query("SELECT id FROM posts WHERE id = $1 FOR UPDATE", [.int64(post)])
        let started = ContinuousClock.now
        let (status, text) = await Self.run(["flush", "--wait", "--timeout=1"], node: http)
        let elapsed = ContinuousClock.now - started
        #expect(status == .timedOut, "\(text)")
        #expect(text.contains("did not finish within 1 s"))
        // The blocker is held until after: a flush waiting for it would never return here.
        #expect(elapsed < .seconds(20), "returned after \(elapsed), not at its timeout")
        try await blocker.query("ROLLBACK")
        await blocker.close()
        let (done, doneText) = await Self.run(["flush", "--wait", "--timeout", "30"], node: http)
        #expect(done == .success, "\(doneText)")
        #expect(try await http.writePath.postgresCounts()[post]?.rows == 1)
        await http.stop()
    }

    @Test("reconcile finds drift planted in PostgreSQL, repairs it while writes continue, and then finds none", arguments: RedisTarget.allCases)
    func reconcileRepairs(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(posts: 3, redis: redis)
        let post = http.posts[0]
        for user in 1...10 { _ = try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)") }
        #expect(await Self.run(["flush", "--wait"], node: http).0 == .success)
        try await http.writePath.pool.query("UPDATE posts SET likes_count = likes_count - 4 WHERE id = $1", [.int64(post)])

        let (found, foundText) = await Self.run(["reconcile", "--post", String(post)], node: http)
        #expect(found == .driftFound)
        #expect(foundText.contains("1 with likes_count ≠ likes rows"), "\(foundText)")
        #expect(foundText.contains("--repair"))
        let (inspected, inspectText) = await Self.run(["inspect", String(post)], node: http)
        #expect(inspected == .driftFound)
        #expect(inspectText.contains("DRIFT"))

        // --all pages through every post of the (shared) test database with progress and finds
        // this one among them. Read-only: other tests' posts are theirs to repair.
        let (everything, everythingJSON) = await Self.run(["reconcile", "--all", "--json"], node: http)
        #expect(everything == .driftFound)
        let pages = try WireDecoder.decode(
            [ClusterReconcileReport].self, from: Array(everythingJSON.split(separator: "\n").last.map(String.init)!.utf8))
        #expect(!pages.isEmpty && pages.allSatisfy { $0.complete && $0.uncheckedPosts.isEmpty })
        #expect(pages.flatMap(\.report.drifted).contains { $0.postID == post && $0.likesCount == 6 })
        #expect(everythingJSON.contains("reconcile: ")) // progress on standard error
        let (own, ownJSON) = await Self.run(["reconcile", "--post", String(post), "--json", "--this-node"], node: http)
        #expect(own == .driftFound)
        let ownPages = try WireDecoder.decode([ReconcileReport].self, from: Array(ownJSON.split(separator: "\n").last.map(String.init)!.utf8))
        #expect(ownPages.flatMap(\.drifted) == [ReconcileReport.Drift(postID: post, likesCount: 6, likesRows: 10)])

        // The repair while writes continue: the test holds the post's row, so the repair, once
        // it reaches the row, waits there; the likes are sent only then and must be acknowledged
        // while it waits (their flush waits too); then the row is let go. A repair that held up
        // the writes, or did its work before or after them, fails this.
        let hold = try await PostRowHold.hold(post: post, postgresURL: TestEnvironment.postgresURL)
        let repairEnded = Gate()
        let repairing = Task { () -> (succeeded: Bool, text: String) in
            let (status, text) = await Self.run(["reconcile", "--post", String(post), "--repair"], node: http)
            repairEnded.open()
            return (status == .success, text)
        }
        let repairWaits = try await hold.waitForWaiters(asking: http.writePath.pool) > 0
        #expect(repairWaits, "the repair never reached the post's row")
        var acknowledged = 0
        for user in 11...80 where repairWaits {
            do {
                if try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)").status == 200 { acknowledged += 1 }
            } catch {
                Issue.record("like by \(user) while the repair waits: \(error)")
                break
            }
        }
        #expect(acknowledged == 70, "likes acknowledged while the repair was under way: \(acknowledged) of 70")
        #expect(!repairEnded.isOpen, "the repair ended while the test held the row")
        await hold.release()
        let (repaired, repairedText) = await repairing.value
        #expect(repaired, "\(repairedText)")
        #expect(repairedText.contains("repaired 1 post(s)"))

        #expect(await Self.run(["flush", "--wait"], node: http).0 == .success)
        let counts = try await http.writePath.postgresCounts()
        #expect(counts[post]?.count == 80 && counts[post]?.rows == 80)
        #expect(try await http.writePath.redisCount(post) == 80)
        let (clean, cleanText) = await Self.run(["reconcile", "--post", String(post)], node: http)
        #expect(clean == .success, "\(cleanText)")
        #expect(cleanText.contains("0 with likes_count ≠ likes rows"))
        #expect(cleanText.contains("Redis: 0 post(s) differ"))
        await http.stop()
    }

    @Test(
        "reconcile reports a Redis count that differs from PostgreSQL with nothing pending; --repair has Redis load the post from PostgreSQL again",
        arguments: RedisTarget.allCases)
    func reconcileRedisDrift(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(posts: 1, redis: redis)
        let post = http.posts[0]
        for user in 1...3 { _ = try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)") }
        #expect(await Self.run(["flush", "--wait"], node: http).0 == .success)
        let layout = RedisKeyLayout(prefix: http.writePath.service.configuration.keyPrefix)
        _ = try await http.writePath.redis.send(.sadd(layout.likers(ofPost: post), [Int64(999)]), slot: HashSlot(post: post))
        let (status, text) = await Self.run(["reconcile", "--post", String(post)], node: http)
        #expect(status == .driftFound)
        #expect(text.contains("Redis: 1 post(s) differ"), "\(text)")
        #expect(try await http.writePath.redisCount(post) == 4, "reporting must not change anything")

        let (repaired, repairedText) = await Self.run(["reconcile", "--post", String(post), "--repair"], node: http)
        #expect(repaired == .success, "\(repairedText)")
        #expect(repairedText.contains("Redis: 1 of 1 post(s) reset"), "\(repairedText)")
        // The post is cold now: PostgreSQL answers its reads, without the planted member.
        #expect(try await http.send("GET", "/v1/posts/\(post)/likes/999").text.contains(#""is_liked":false,"likes_count":3"#))
        #expect(try await !http.writePath.isHot(post))
        #expect(try await http.writePath.redisCount(post) == 0)
        // The next write loads it from PostgreSQL: the planted member is gone, the rest is there.
        _ = try await http.send("PUT", "/v1/posts/\(post)/likes/4")
        #expect(try await http.writePath.redisCount(post) == 4)
        #expect(try await http.writePath.redisIsMember(post, 2))
        #expect(try await !http.writePath.redisIsMember(post, 999))
        #expect(await Self.run(["flush", "--wait"], node: http).0 == .success)
        #expect(try await http.writePath.postgresCounts()[post].map { [$0.count, $0.rows] } == [4, 4])
        let (clean, cleanText) = await Self.run(["reconcile", "--post", String(post)], node: http)
        #expect(clean == .success, "\(cleanText)")
        await http.stop()
    }

    @Test("dead-letters list shows the reason; replay applies the change once the post exists again; drop removes", arguments: RedisTarget.allCases)
    func deadLetters(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(
            posts: 2, redis: redis,
            writePath: {
                $0.flushOnlyWhenAsked()
            })
        let post = http.posts[1]
        _ = try await http.send("PUT", "/v1/posts/\(post)/likes/42")
        _ = try await http.send("PUT", "/v1/posts/\(post)/likes/43")
        try await http.writePath.pool.query("DELETE FROM posts WHERE id = $1", [.int64(post)])
        #expect(await Self.run(["flush", "--wait"], node: http).0 == .success)

        let (listed, listText) = await Self.run(["dead-letters", "list"], node: http)
        #expect(listed == .success)
        #expect(listText.contains("2 dead letter(s)") && listText.contains("post does not exist in posts"), "\(listText)")
        let (_, json) = await Self.run(["dead-letters", "list", "--json"], node: http)
        let letters = try WireDecoder.decode(DeadLetterList.self, from: Array(json.utf8)).deadLetters
        let byUser = Dictionary(uniqueKeysWithValues: letters.compactMap { letter in letter.fields["u"].map { ($0, letter.id) } })
        let (early, earlyText) = await Self.run(["dead-letters", "replay", "--id", byUser["42"]!], node: http)
        #expect(early == .failure)
        #expect(earlyText.contains("not replayed"))

        try await http.writePath.pool.query("INSERT INTO posts (id) VALUES ($1)", [.int64(post)])
        let (replayed, replayText) = await Self.run(["dead-letters", "replay", "--id", byUser["42"]!], node: http)
        #expect(replayed == .success, "\(replayText)")
        #expect(replayText.contains("replayed 1 change(s)"))
        let (dropped, dropText) = await Self.run(["dead-letters", "drop", "--id", byUser["43"]!], node: http)
        #expect(dropped == .success && dropText.contains("dropped 1"))
        #expect(await Self.run(["flush", "--wait"], node: http).0 == .success)
        #expect(try await http.writePath.postgresMembers([post]) == [Pair(user: 42, post: post)])
        #expect(await Self.run(["dead-letters", "list"], node: http).1.contains("no dead letters"))
        await http.stop()
    }

    @Test(
        "reconcile's report names each kind that drifted, in PostgreSQL and in Redis, and what --repair did; with likes only it says nothing of kinds"
    )
    func reconcileReportsKinds() {
        var totals = OperatorReport.ReconcileTotals()
        totals.add(ReconcileReport())
        #expect(!OperatorReport.reconcile(totals, repair: false).contains("reactions"))
        var report = ReconcileReport()
        report.checked = 2
        report.kindsDrifted = [.init(postID: 5, kind: "love", count: 7, rows: 4)]
        report.redisKindsDrifted = [.init(postID: 6, kind: "haha", redisCount: 1, rows: 2)]
        totals.add(report)
        #expect(totals.hasUnrepairedDrift(repair: false) && totals.redisDriftedPosts == 1)
        let text = OperatorReport.reconcile(totals, repair: false)
        #expect(text.contains("reactions: 1 kind(s) of posts with reaction_counts ≠ reactions rows") && text.contains("love"), "\(text)")
        #expect(text.contains("Redis: 1 kind(s) of posts differ") && text.contains("haha") && text.contains("run again with --repair"), "\(text)")
        var repaired = ReconcileReport()
        repaired.kindsRepaired = 1
        repaired.redisRepaired = 1
        totals.add(repaired)
        #expect(!totals.hasUnrepairedDrift(repair: true))
        #expect(
            OperatorReport.reconcile(totals, repair: true).contains("repaired 1 post(s): each kind's reaction_counts now equals its reactions rows"))
    }
}
