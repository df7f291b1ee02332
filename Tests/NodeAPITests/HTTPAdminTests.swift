import Foundation
import NodeTestSupport
import ShardRouter
import TestSupport
import Testing

@Suite("Admin API: reconcile and dead letters")
struct HTTPAdminTests {
    @Test("reconcile finds a drift planted in PostgreSQL and repairs it while writes continue", arguments: RedisTarget.allCases)
    func reconcileRepairsDrift(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(posts: 2, redis: redis)
        let post = http.posts[0]
        for user in 1...10 { _ = try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)") }
        _ = try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken)
        try await http.writePath.pool.query("UPDATE posts SET likes_count = likes_count + 5 WHERE id = $1", [.int64(post)])

        let report = try await http.send(
            "POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: #"{"post_ids":[\#(post),\#(http.posts[1])]}"#)
        #expect(report.status == 200)
        #expect(
            report.text
                == #"{"checked":2,"drifted":[{"post_id":\#(post),"likes_count":15,"likes_rows":10}],"redis_drifted":[],"redis_pending":0,"repaired":0,"redis_repaired":0,"next_after":null}"#
        )

        // Repair while likes keep arriving and flushing. The test holds the post's row, so the
        // repair, once it reaches the row, waits there; the likes are sent only then, and must
        // be acknowledged while it waits (their flush waits too); then the row is let go. A
        // repair that held up the writes, or did its work before or after them, fails this.
        let hold = try await PostRowHold.hold(post: post, postgresURL: TestEnvironment.postgresURL)
        let repairAnswered = Gate()
        let repairing = Task { () -> RawHTTPResponse? in
            let request = RawHTTPClient.request(
                "POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: #"{"post_ids":[\#(post)],"repair":true}"#)
            let response = try await RawHTTPClient.exchange(port: http.port, chunks: [request], responses: 1, timeout: .seconds(90)).first
            repairAnswered.open()
            return response
        }
        let repairWaits = try await hold.waitForWaiters(asking: http.writePath.pool) > 0
        #expect(repairWaits, "the repair never reached the post's row")
        var acknowledged = 0
        for user in 11...60 where repairWaits {
            do {
                if try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)").status == 200 { acknowledged += 1 }
            } catch {
                Issue.record("like by \(user) while the repair waits: \(error)")
                break
            }
        }
        #expect(acknowledged == 50, "likes acknowledged while the repair was under way: \(acknowledged) of 50")
        #expect(!repairAnswered.isOpen, "the repair ended while the test held the row")
        await hold.release()
        let repaired = try #require(try await repairing.value)
        #expect(repaired.text.contains(#""repaired":1"#), "\(repaired.text)")
        _ = try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken)
        let counts = try await http.writePath.postgresCounts()
        #expect(counts[post]?.count == 60 && counts[post]?.rows == 60)
        #expect(try await http.writePath.redisCount(post) == 60)
        await http.stop()
    }

    @Test("reconcile finds Redis likers that differ from the rows though the count agrees, and repair reloads them", arguments: RedisTarget.allCases)
    func reconcileMembershipDrift(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(posts: 1, redis: redis)
        let post = http.posts[0]
        for user in 1...3 { _ = try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)") }
        _ = try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken)
        // What a failover that lost a like and an unlike leaves: the same count, other members.
        let likers = http.writePath.layout.likers(ofPost: post)
        _ = try await http.writePath.redis.send(.srem(likers, [3]), slot: HashSlot(post: post))
        _ = try await http.writePath.redis.send(.sadd(likers, [4]), slot: HashSlot(post: post))
        #expect(try await http.writePath.redisCount(post) == 3)

        let found = try await http.send("POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: #"{"post_ids":[\#(post)]}"#)
        #expect(found.text.contains(#""redis_drifted":[{"post_id":\#(post),"redis_count":3,"likes_rows":3}]"#), "\(found.text)")
        let repaired = try await http.send("POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: #"{"post_ids":[\#(post)],"repair":true}"#)
        #expect(repaired.text.contains(#""redis_repaired":1"#), "\(repaired.text)")
        // The post is cold now: PostgreSQL answers its reads; the next write loads it again.
        #expect(try await http.send("GET", "/v1/posts/\(post)/likes/4").text.contains(#""is_liked":false"#))
        #expect(try await !http.writePath.isHot(post))
        _ = try await http.send("PUT", "/v1/posts/\(post)/likes/5")
        #expect(try await http.writePath.redisIsMember(post, 3))
        #expect(try await !http.writePath.redisIsMember(post, 4))
        await http.stop()
    }

    @Test("reconcile pages through all posts", arguments: RedisTarget.allCases)
    func reconcilePages(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(posts: 3, redis: redis)
        let first = http.posts[0] - 1
        let page = try await http.send("POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: #"{"after":\#(first),"limit":2}"#)
        #expect(page.text.contains(#""checked":2"#))
        #expect(page.text.contains(#""next_after":\#(http.posts[1])"#))
        let bad = try await http.send("POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: #"{"limit":0}"#)
        #expect(bad.status == 400)
        // An explicit null is not "absent": it must not turn a repair of some posts into one of all.
        // A whole number is one however it is written; a fraction is refused.
        let spelled = try await http.send("POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: #"{"after":\#(first).0,"limit":2e0}"#)
        #expect(spelled.text == page.text)
        for body in [#"{"post_ids":null,"repair":true}"#, #"{"limit":1.5}"#, #"{"post_ids":[1e-3]}"#, #"{"repair":null}"#] {
            let refused = try await http.send("POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: body)
            #expect(refused.status == 400, "\(body)")
            #expect(refused.text.contains("invalid_"), "\(body): \(refused.text)")
        }
        await http.stop()
    }

    @Test(
        "a trigger that raises for one user: exactly that user's changes become dead letters with SQLSTATE and message, the rest reaches PostgreSQL, the flusher goes on; once the trigger is dropped, replay applies them (a later change supersedes) and counts equal rows",
        arguments: RedisTarget.allCases)
    func poisonChange(redis: RedisTarget) async throws {
        // A database of its own: the trigger must not reach other tests.
        try await TestEnvironment.withUser666Refused { pool, url in
            let http = try await HTTPHarness.start(posts: 3, redis: redis, postgresURL: url, writePath: { $0.flushOnlyWhenAsked() })
            let posts = http.posts
            var expected: Set<Pair> = []
            for user in 1...30 {
                for post in posts {
                    #expect(try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)").status == 200)
                    expected.insert(Pair(user: Int64(user), post: post))
                }
                // User 666's likes go between the others', in the same batches and entries.
                if user == 10 {
                    for post in [posts[0], posts[2]] { #expect(try await http.send("PUT", "/v1/posts/\(post)/likes/666").status == 200) }
                    // Liked and unliked again: its last change (an unlike of no row) meets no trigger.
                    _ = try await http.send("PUT", "/v1/posts/\(posts[1])/likes/666")
                    _ = try await http.send("DELETE", "/v1/posts/\(posts[1])/likes/666")
                }
            }
            #expect(try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
            #expect(try await http.writePath.postgresMembers() == expected)
            for (_, state) in try await http.writePath.postgresCounts() { #expect(state.count == state.rows) }
            let letters = try await http.writePath.redis.send(
                .xrange(http.writePath.layout.deadLetters, count: 100),
                slot: http.writePath.layout.deadLettersSlot
            ).streamEntries()
            #expect(letters.count == 2)
            #expect(Set(letters.compactMap { $0.string("p") }) == [String(posts[0]), String(posts[2])])
            #expect(
                letters.allSatisfy {
                    $0.string("u") == "666" && $0.string("l") == "1" && $0.string("sqlstate") == "P0001"
                        && $0.string("message") == "user 666 is banned" && $0.string("reason") == "PostgreSQL refused the change"
                })
            // Logged at warn with the SQLSTATE, per shard flushed.
            let logged = http.writePath.log.lines(of: "dead_lettered").filter { $0.contains("level=warn") && $0.contains("sqlstate=P0001") }
            #expect(
                logged.compactMap { line in line.split(separator: " ").first { $0.hasPrefix("changes=") }.flatMap { Int($0.dropFirst(8)) } }
                    .reduce(0, +) == 2, "\(logged)")
            // The flusher never stopped: no retry, and what comes next is applied.
            #expect(http.writePath.log.lines(of: "flush_failed").isEmpty)
            _ = try await http.send("PUT", "/v1/posts/\(posts[0])/likes/31")
            expected.insert(Pair(user: 31, post: posts[0]))
            #expect(try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
            #expect(try await http.writePath.postgresMembers() == expected)
            // The user still sees the likes (Redis kept them); one is taken back before the replay.
            #expect(try await http.send("GET", "/v1/posts/\(posts[0])/likes/666").text.contains(#""is_liked":true"#))
            _ = try await http.send("DELETE", "/v1/posts/\(posts[2])/likes/666")

            try await pool.query("DROP TRIGGER refuse_banned ON likes")
            let replayed = try await http.send("POST", "/admin/dead-letters/replay", token: HTTPHarness.adminToken)
            #expect(replayed.status == 200)
            let byPost = Dictionary(uniqueKeysWithValues: letters.map { ($0.string("p")!, $0.id.description) })
            #expect(replayed.text.contains(#""replayed":["\#(byPost[String(posts[0])]!)"]"#), "\(replayed.text)")
            #expect(replayed.text.contains(#""superseded":["\#(byPost[String(posts[2])]!)"]"#), "\(replayed.text)")
            #expect(replayed.text.contains(#""failed":[]"#))
            #expect(try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
            expected.insert(Pair(user: 666, post: posts[0]))
            #expect(try await http.writePath.postgresMembers() == expected)
            for (_, state) in try await http.writePath.postgresCounts() { #expect(state.count == state.rows) }
            #expect(try await http.send("GET", "/admin/dead-letters", token: HTTPHarness.adminToken).text == #"{"dead_letters":[]}"#)
            #expect(try await http.send("GET", "/v1/posts/\(posts[0])/likes/666").text.contains(#""likes_count":32"#))
            await http.stop()
        }
    }

    @Test("dead letters: listed with the reason, replayed once the cause is fixed, then gone", arguments: RedisTarget.allCases)
    func deadLetterReplay(redis: RedisTarget) async throws {
        // Nothing flushes until asked, so the like is still pending when its post is deleted.
        let http = try await HTTPHarness.start(
            posts: 2, redis: redis,
            writePath: {
                $0.flushOnlyWhenAsked()
                $0.events = true
            })
        let post = http.posts[1]
        func events() async throws -> [String] {
            try await http.writePath.pool.query(
                "SELECT user_id, liked, (extract(epoch FROM liked_at) * 1000)::bigint FROM counter_like_events WHERE post_id = $1 ORDER BY id",
                [.int64(post)]
            ).map { "\(try $0.int64(0))/\(try $0.bool(1))/\(try $0.int64(2))" }
        }
        let beforeLike = Int64(Date().timeIntervalSince1970 * 1000)
        _ = try await http.send("PUT", "/v1/posts/\(post)/likes/42")
        let afterLike = Int64(Date().timeIntervalSince1970 * 1000)
        try await http.writePath.pool.query("DELETE FROM posts WHERE id = $1", [.int64(post)])
        _ = try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken)

        let listed = try await http.send("GET", "/admin/dead-letters?count=10", token: HTTPHarness.adminToken)
        #expect(listed.status == 200)
        #expect(listed.text.contains(#""p":"\#(post)""#) && listed.text.contains(#""reason":"post does not exist in posts""#))
        #expect(listed.text.contains(#""u":"42""#))
        // The letter keeps when the like was acknowledged (`t`, Unix milliseconds).
        let acknowledged = try #require(listed.text.firstMatch(of: /"t":"([0-9]+)"/).flatMap { Int64($0.1) }, "\(listed.text)")
        #expect(acknowledged >= beforeLike - 1 && acknowledged <= afterLike + 1, "\(acknowledged) not in \(beforeLike)...\(afterLike)")
        #expect(try await events().isEmpty, "a dead-lettered change is no event")

        // Replaying while the post is still missing fails and keeps the letter.
        let early = try await http.send("POST", "/admin/dead-letters/replay", token: HTTPHarness.adminToken)
        #expect(early.text.contains(#""replayed":[]"#))
        #expect(early.text.contains("does not exist"))

        try await http.writePath.pool.query("INSERT INTO posts (id) VALUES ($1)", [.int64(post)])
        try await Task.sleep(for: .milliseconds(20))
        let replayed = try await http.send("POST", "/admin/dead-letters/replay", token: HTTPHarness.adminToken)
        #expect(replayed.status == 200)
        #expect(replayed.text.contains(#""failed":[]"#))
        _ = try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken)
        #expect(try await http.writePath.postgresMembers([post]) == [Pair(user: 42, post: post)])
        // Replayed later, the like keeps its first acknowledgement's time in PostgreSQL.
        let rows = try await http.writePath.pool.query(
            "SELECT (extract(epoch FROM created_at) * 1000)::bigint FROM likes WHERE post_id = $1 AND user_id = 42", [.int64(post)])
        #expect(try rows.first?.int64(0) == acknowledged)
        // Its event comes with the replay's flush, once, with the first acknowledgement's time.
        #expect(try await events() == ["42/true/\(acknowledged)"])
        #expect(try await http.send("GET", "/admin/dead-letters", token: HTTPHarness.adminToken).text == #"{"dead_letters":[]}"#)

        let badDrop = try await http.send("POST", "/admin/dead-letters/drop", token: HTTPHarness.adminToken, body: #"{"ids":["nope"]}"#)
        #expect(badDrop.status == 400)
        let numberDrop = try await http.send("POST", "/admin/dead-letters/drop", token: HTTPHarness.adminToken, body: #"{"ids":[1]}"#)
        #expect(numberDrop.status == 400 && numberDrop.text.contains("invalid_id"), "\(numberDrop.text)")
        // The document's pattern, exactly: 1 to 19 digits a part (a 20-digit part that would fit
        // a 64-bit integer is refused too); an empty list or no list is refused by drop.
        for body in [#"{"ids":["10000000000000000000-0"]}"#, #"{"ids":["1-10000000000000000000"]}"#, #"{"ids":["-1"]}"#, #"{"ids":[]}"#, "{}"] {
            let refused = try await http.send("POST", "/admin/dead-letters/drop", token: HTTPHarness.adminToken, body: body)
            #expect(refused.status == 400, "\(body): \(refused.text)")
        }
        let longest = try await http.send(
            "POST", "/admin/dead-letters/drop", token: HTTPHarness.adminToken, body: #"{"ids":["9999999999999999999-9999999999999999999"]}"#)
        #expect(longest.status == 200, "\(longest.text)")
        // "ids":null is refused, not read as "replay them all".
        let nullReplay = try await http.send("POST", "/admin/dead-letters/replay", token: HTTPHarness.adminToken, body: #"{"ids":null}"#)
        #expect(nullReplay.status == 400 && nullReplay.text.contains("invalid_body"), "\(nullReplay.text)")
        await http.stop()
    }
}
