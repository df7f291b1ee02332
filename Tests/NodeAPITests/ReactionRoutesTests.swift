import CounterCore
import CounterWire
import Foundation
import NodeHTTP
import NodeTestSupport
import RedisDriver
import ShardRouter
import TestSupport
import Testing
import UserTokens
import WritePath

@testable import NodeAPI

/// The reaction routes through dispatch (`InProcessAPI`), on the real write path: every answer
/// the post's summary, exact; bad kinds refused with nothing changed; the user-token forms; a
/// deployment of likes only answering its one kind.
@Suite("The reaction routes")
struct ReactionRoutesTests {
    static let six = ["like", "love", "haha", "wow", "sad", "angry"].map { ReactionKind($0)! }

    static func text(_ response: HTTPResponse) -> String { String(decoding: response.body, as: UTF8.self) }

    @Test(
        "PUT, DELETE and toggle answer the summary after the change, largest count first; GET ?user reads it; the hand-written answer is WireEncoder's"
    )
    func writesAndReads() async throws {
        let api = try await InProcessAPI.start(
            posts: 1, users: try APIDispatchTests.users(), postgresURL: try await TestEnvironment.reactionsDatabase()
        ) { configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .one)
        }
        let post = api.posts[0]
        var answer = await api.send("PUT", "/v1/posts/\(post)/reactions/love/users/7")
        #expect(answer.status == 200)
        #expect(Self.text(answer) == #"{"post_id":\#(post),"user_id":7,"reactions":{"love":1},"total":1,"mine":["love"]}"#)
        answer = await api.send("PUT", "/v1/posts/\(post)/reactions/love/users/7")
        #expect(Self.text(answer) == #"{"post_id":\#(post),"user_id":7,"reactions":{"love":1},"total":1,"mine":["love"]}"#, "idempotent")
        _ = await api.send("POST", "/v1/posts/\(post)/reactions/haha/users/8/toggle")
        _ = await api.send("POST", "/v1/posts/\(post)/reactions/haha/users/9/toggle")
        // One per user: 7's like replaces its love, in one step.
        answer = await api.send("POST", "/v1/posts/\(post)/reactions/like/users/7/toggle")
        #expect(Self.text(answer) == #"{"post_id":\#(post),"user_id":7,"reactions":{"haha":2,"like":1},"total":3,"mine":["like"]}"#)
        let status = try WireDecoder.decode(ReactionStatus.self, from: answer.body)
        #expect(try WireEncoder.encode(status) == answer.body, "the hot answer is byte for byte the wire type's")
        // The like routes see the same like.
        #expect(Self.text(await api.send("GET", "/v1/posts/\(post)/likes/7")).contains(#""is_liked":true,"likes_count":1"#))
        answer = await api.send("DELETE", "/v1/posts/\(post)/reactions/haha/users/8")
        #expect(Self.text(answer) == #"{"post_id":\#(post),"user_id":8,"reactions":{"haha":1,"like":1},"total":2,"mine":[]}"#)
        // The summary: with a user, and without (counts alone).
        #expect(
            Self.text(await api.send("GET", "/v1/posts/\(post)/reactions?user=9"))
                == #"{"post_id":\#(post),"user_id":9,"reactions":{"haha":1,"like":1},"total":2,"mine":["haha"]}"#)
        #expect(
            Self.text(await api.send("GET", "/v1/posts/\(post)/reactions"))
                == #"{"post_id":\#(post),"user_id":null,"reactions":{"haha":1,"like":1},"total":2,"mine":[]}"#)
        // An end user's token: its own user, on the routes without /users/{user}.
        let token = TokenSigner(secret: APIDispatchTests.secret).token(user: 42)
        answer = await api.send("PUT", "/v1/posts/\(post)/reactions/wow", token: token)
        #expect(Self.text(answer) == #"{"post_id":\#(post),"user_id":42,"reactions":{"haha":1,"like":1,"wow":1},"total":3,"mine":["wow"]}"#)
        #expect(await api.send("POST", "/v1/posts/\(post)/reactions/wow/toggle", token: token).status == 200)
        #expect(Self.text(await api.send("GET", "/v1/posts/\(post)/reactions", token: token)).contains(#""user_id":42"#))
        #expect(await api.send("GET", "/v1/posts/\(post)/reactions?user=7", token: token).status == 403)
        #expect(await api.send("PUT", "/v1/posts/\(post)/reactions/wow/users/42", token: token).status == 401, "the backend's route")
        await api.stop()
    }

    @Test(
        "bad kinds are refused 400 and change nothing: a name of no kind (invalid_id), a kind the deployment does not list (unknown_kind); a kind past an open set's cap is 409 too_many_kinds"
    )
    func refusals() async throws {
        let api = try await InProcessAPI.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase()) { configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .many)
        }
        let post = api.posts[0]
        for (path, code) in [
            ("/v1/posts/\(post)/reactions/Love/users/7", "invalid_id"), ("/v1/posts/\(post)/reactions/lo-ve/users/7", "invalid_id"),
            ("/v1/posts/\(post)/reactions/\(String(repeating: "a", count: 33))/users/7", "invalid_id"),
            ("/v1/posts/\(post)/reactions/tada/users/7", "unknown_kind"),
        ] {
            let answer = await api.send("PUT", path)
            #expect(answer.status == 400 && Self.text(answer).contains(#""code":"\#(code)""#), "\(path): \(Self.text(answer))")
        }
        #expect(await api.send("GET", "/v1/posts/\(post)/reactions?user=x").status == 400)
        #expect(await api.send("GET", "/v1/posts/\(post)/reactions?who=7").status == 400)
        #expect(Self.text(await api.send("GET", "/v1/posts/\(post)/reactions")).contains(#""total":0"#), "nothing changed")
        await api.stop()

        let open = try await InProcessAPI.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase()) { configuration in
            configuration.reactions = ReactionModel(kinds: .open, perUser: .many, kindsPerPost: 2)
        }
        let openPost = open.posts[0]
        #expect(await open.send("PUT", "/v1/posts/\(openPost)/reactions/party_parrot/users/1").status == 200)
        #expect(await open.send("PUT", "/v1/posts/\(openPost)/reactions/tada/users/2").status == 200)
        let refused = await open.send("PUT", "/v1/posts/\(openPost)/reactions/rocket/users/3")
        #expect(refused.status == 409 && Self.text(refused).contains(#""code":"too_many_kinds""#))
        #expect(Self.text(await open.send("GET", "/v1/posts/\(openPost)/reactions")).contains(#""total":2"#))
        await open.stop()
    }

    @Test("with likes only, the reaction routes answer the one kind like, and refuse any other")
    func likesOnly() async throws {
        let api = try await InProcessAPI.start(posts: 1)
        let post = api.posts[0]
        let answer = await api.send("POST", "/v1/posts/\(post)/reactions/like/users/7/toggle")
        #expect(Self.text(answer) == #"{"post_id":\#(post),"user_id":7,"reactions":{"like":1},"total":1,"mine":["like"]}"#)
        #expect(Self.text(await api.send("GET", "/v1/posts/\(post)/likes/7")).contains(#""is_liked":true"#))
        let refused = await api.send("PUT", "/v1/posts/\(post)/reactions/love/users/7")
        #expect(refused.status == 400 && Self.text(refused).contains(#""code":"unknown_kind""#))
        await api.stop()
    }

    @Test("a feed page with include reactions gives each post its top kinds, the total and the viewer's kinds; without it, the page is as it was")
    func feedIncludesReactions() async throws {
        let api = try await InProcessAPI.start(posts: 2, postgresURL: try await TestEnvironment.reactionsDatabase()) { configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .many, summaryKinds: 2)
        }
        let (post, other) = (api.posts[0], api.posts[1])
        for (user, kind) in [(1, "love"), (2, "love"), (3, "haha"), (4, "wow"), (4, "love"), (7, "wow")] {
            #expect(await api.send("PUT", "/v1/posts/\(post)/reactions/\(kind)/users/\(user)").status == 200)
        }
        let page = await api.send("POST", "/v1/posts/query", body: #"{"post_ids":[\#(post),\#(other)],"user_id":4,"include":["reactions"]}"#)
        #expect(page.status == 200)
        #expect(
            Self.text(page)
                == #"{"posts":[{"post_id":\#(post),"likes_count":0,"is_liked":false,"reactions":{"love":3,"wow":2},"total":6,"mine":["love","wow"]},{"post_id":\#(other),"likes_count":0,"is_liked":false,"reactions":{},"total":0,"mine":[]}]}"#
        )
        let decoded = try WireDecoder.decode(FeedPage.self, from: page.body)
        #expect(try WireEncoder.encode(decoded) == page.body)
        let plain = await api.send("POST", "/v1/posts/query", body: #"{"post_ids":[\#(post)],"user_id":4}"#)
        #expect(Self.text(plain) == #"{"posts":[{"post_id":\#(post),"likes_count":0,"is_liked":false}]}"#)
        let refused = await api.send("POST", "/v1/posts/query", body: #"{"post_ids":[\#(post)],"include":["emoji"]}"#)
        #expect(refused.status == 400)
        await api.stop()
    }

    @Test("with reactions, every event names its kind, and a switch of kinds with one per user is one event naming the kind it replaced")
    func eventsCarryKinds() async throws {
        let api = try await InProcessAPI.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase()) { configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .one)
            configuration.events = true
        }
        let post = api.posts[0]
        let before = try WireDecoder.decode(EventsPage.self, from: await api.send("GET", "/v1/events?limit=1", token: HTTPHarness.adminToken).body)
        #expect(await api.send("PUT", "/v1/posts/\(post)/likes/7").status == 200)
        #expect(await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        #expect(await api.send("PUT", "/v1/posts/\(post)/reactions/love/users/7").status == 200)
        #expect(await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        #expect(await api.send("DELETE", "/v1/posts/\(post)/reactions/love/users/7").status == 200)
        #expect(await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        // Other tests share the database and its events: every page after `before` is read, and
        // this post's events taken from them, as objects and as the bytes answered.
        var events: [ChangeEvent] = []
        var texts: [String] = []
        var after = before.newestID
        while true {
            let answer = await api.send("GET", "/v1/events?after=\(after)&limit=1000", token: HTTPHarness.adminToken)
            let page = try WireDecoder.decode(EventsPage.self, from: answer.body)
            events += page.events.filter { $0.postID == post }
            texts.append(Self.text(answer))
            if page.events.isEmpty { break }
            after = page.nextAfter
        }
        #expect(events.map { "\($0.liked) \($0.kind ?? "-") \($0.replacedKind ?? "-")" } == ["true like -", "true love like", "false love -"])
        let ours = texts.joined().components(separatedBy: "{\"id\":").filter { $0.contains("\"post_id\":\(post),") }
        #expect(ours.contains { $0.contains(#""kind":"love","replaced_kind":"like""#) })
        #expect(ours.contains { $0.contains(#""kind":"like","replaced_kind":null"#) })
        await api.stop()
    }

    @Test(
        "who reacted with a kind: newest first, pages by cursor, exact before and after the flush; a cursor of another kind is refused; like is the likers"
    )
    func reactorsList() async throws {
        let api = try await InProcessAPI.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase()) { configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .one)
        }
        let post = api.posts[0]
        for user in 1...5 { #expect(await api.send("PUT", "/v1/posts/\(post)/reactions/love/users/\(user)").status == 200) }
        #expect(await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        // After the flush: 6 and 7 love it, 2 switches to haha, 3 takes its love back — all pending.
        for user in [6, 7] { #expect(await api.send("PUT", "/v1/posts/\(post)/reactions/love/users/\(user)").status == 200) }
        #expect(await api.send("PUT", "/v1/posts/\(post)/reactions/haha/users/2").status == 200)
        #expect(await api.send("DELETE", "/v1/posts/\(post)/reactions/love/users/3").status == 200)
        func users(_ kind: String) async throws -> (count: Int64, users: [Int64]) {
            var listed: [Int64] = []
            var cursor: String?
            var count: Int64 = -1
            repeat {
                let query = cursor.map { "?limit=2&cursor=\($0)" } ?? "?limit=2"
                let answer = await api.send("GET", "/v1/posts/\(post)/reactions/\(kind)/users\(query)")
                #expect(answer.status == 200, "\(Self.text(answer))")
                let page = try WireDecoder.decode(ReactorsPage.self, from: answer.body)
                #expect(page.users.count <= 2 && page.kind == kind)
                listed += page.users.map(\.userID)
                count = page.count
                cursor = page.nextCursor
            } while cursor != nil
            return (count, listed)
        }
        let loves = try await users("love")
        #expect(loves.count == 5 && loves.users.count == 5, "\(loves)")
        // Newest first (users of one millisecond by id): the pending loves, then the flushed ones.
        #expect(Set(loves.users.prefix(2)) == [6, 7] && Set(loves.users.suffix(3)) == [1, 4, 5], "\(loves)")
        #expect(try await users("haha") == (1, [2]))
        #expect(await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        #expect(try await users("love").users.sorted() == [1, 4, 5, 6, 7])
        // Like's holders are its likers.
        #expect(await api.send("PUT", "/v1/posts/\(post)/likes/9").status == 200)
        #expect(try await users("like") == (1, [9]))
        // A cursor of the love list is refused on the haha list; an unlisted kind is 400.
        let first = try WireDecoder.decode(ReactorsPage.self, from: await api.send("GET", "/v1/posts/\(post)/reactions/love/users?limit=1").body)
        let cursor = try #require(first.nextCursor)
        let foreign = await api.send("GET", "/v1/posts/\(post)/reactions/haha/users?cursor=\(cursor)")
        #expect(foreign.status == 400 && Self.text(foreign).contains("invalid_cursor"))
        let unknown = await api.send("GET", "/v1/posts/\(post)/reactions/tada/users")
        #expect(unknown.status == 400 && Self.text(unknown).contains("unknown_kind"))
        await api.stop()
    }

    @Test(
        "a reaction dead-lettered (its post was gone) keeps its kind: replayed once the post is back, it is a reaction row of that kind, not a like")
    func deadLetterKeepsKind() async throws {
        let api = try await InProcessAPI.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase()) { configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .one)
            configuration.flushOnlyWhenAsked()
        }
        let post = api.posts[0]
        let pool = api.writePath.pool
        #expect(await api.send("PUT", "/v1/posts/\(post)/reactions/love/users/42").status == 200)
        try await pool.query("DELETE FROM posts WHERE id = $1", [.int64(post)])
        _ = await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken)
        let listed = await api.send("GET", "/admin/dead-letters?count=100", token: HTTPHarness.adminToken)
        #expect(Self.text(listed).contains(#""k":"love""#) && Self.text(listed).contains(#""p":"\#(post)""#), "\(Self.text(listed))")
        try await pool.query("INSERT INTO posts (id) VALUES ($1)", [.int64(post)])
        let replayed = await api.send("POST", "/admin/dead-letters/replay", token: HTTPHarness.adminToken)
        #expect(replayed.status == 200 && Self.text(replayed).contains(#""failed":[]"#), "\(Self.text(replayed))")
        #expect(await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        let rows = try await pool.query(
            "SELECT 'like' FROM likes WHERE post_id = $1 UNION ALL SELECT kind FROM reactions WHERE post_id = $1", [.int64(post)])
        #expect(rows.map { $0.string(0) } == ["love"])
        #expect(Self.text(await api.send("GET", "/v1/posts/\(post)/reactions?user=42")).contains(#""mine":["love"]"#))
        await api.stop()
    }

    @Test(
        "a switch of kinds PostgreSQL refuses (a trigger) becomes a dead letter of each half; replayed once the trigger is gone, the rows are the switch's: the new kind alone"
    )
    func refusedSwitchReplayedWhole() async throws {
        let api = try await InProcessAPI.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase()) { configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .one)
            configuration.flushOnlyWhenAsked()
        }
        let post = api.posts[0]
        let pool = api.writePath.pool
        let user: Int64 = 5_000_000 + Int64.random(in: 0..<1_000_000)
        #expect(await api.send("PUT", "/v1/posts/\(post)/reactions/love/users/\(user)").status == 200)
        #expect(await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        let function = "refuse_\(user)"
        try await pool.query(
            """
            CREATE FUNCTION \(function)() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF COALESCE(NEW.user_id, OLD.user_id) = \(user) THEN RAISE EXCEPTION 'user \(user) refused'; END IF;
                RETURN COALESCE(NEW, OLD);
            END $$
            """)
        for table in ["likes", "reactions"] {
            try await pool.query("CREATE TRIGGER \(function) BEFORE INSERT OR DELETE ON \(table) FOR EACH ROW EXECUTE FUNCTION \(function)()")
        }
        let switched = await api.send("PUT", "/v1/posts/\(post)/reactions/haha/users/\(user)")
        #expect(Self.text(switched).contains(#""mine":["haha"]"#))
        _ = await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken)
        let listed = Self.text(await api.send("GET", "/admin/dead-letters?count=1000", token: HTTPHarness.adminToken))
        let mine = listed.components(separatedBy: #""u":"\#(user)""#).count - 1
        #expect(mine == 2, "both halves of the switch are letters: \(listed)")
        for table in ["likes", "reactions"] { try await pool.query("DROP TRIGGER \(function) ON \(table)") }
        try await pool.query("DROP FUNCTION \(function)()")
        let replayed = await api.send("POST", "/admin/dead-letters/replay", token: HTTPHarness.adminToken)
        #expect(replayed.status == 200 && Self.text(replayed).contains(#""failed":[]"#), "\(Self.text(replayed))")
        #expect(await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        let rows = try await pool.query(
            "SELECT 'like' FROM likes WHERE post_id = $1 AND user_id = $2 UNION ALL SELECT kind FROM reactions WHERE post_id = $1 AND user_id = $2",
            [.int64(post), .int64(user)])
        #expect(rows.map { $0.string(0) } == ["haha"])
        let tallies = try await ReactionTallies.of([post], in: pool)
        #expect(tallies.values.allSatisfy { $0.rows == $0.count }, "\(tallies)")
        await api.stop()
    }

    @Test(
        "reconcile checks each kind: reaction_counts against the rows, Redis's count of each kind against them; repair sets the counts and reloads Redis; a second look finds nothing"
    )
    func reconcilePerKind() async throws {
        let api = try await InProcessAPI.start(posts: 2, postgresURL: try await TestEnvironment.reactionsDatabase()) { configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .many)
        }
        let (post, other) = (api.posts[0], api.posts[1])
        for user in 1...4 { #expect(await api.send("PUT", "/v1/posts/\(post)/reactions/love/users/\(user)").status == 200) }
        for user in 1...2 { #expect(await api.send("PUT", "/v1/posts/\(post)/reactions/haha/users/\(user)").status == 200) }
        #expect(await api.send("PUT", "/v1/posts/\(other)/reactions/wow/users/9").status == 200)
        #expect(await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        let body = #"{"post_ids":[\#(post),\#(other)]}"#
        let clean = await api.send("POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: body)
        #expect(
            Self.text(clean).hasSuffix(#""next_after":null,"kinds_drifted":[],"redis_kinds_drifted":[]}"#)
                && Self.text(clean).contains(#""redis_pending":0"#),
            "\(Self.text(clean))")
        // PostgreSQL's count of love drifts up, its count of sad appears from nowhere; Redis loses a haha.
        let pool = api.writePath.pool
        try await pool.query("UPDATE reaction_counts SET count = count + 3 WHERE post_id = $1 AND kind = 'love'", [.int64(post)])
        try await pool.query("INSERT INTO reaction_counts (post_id, kind, count) VALUES ($1, 'sad', 2)", [.int64(other)])
        _ = try await api.writePath.redis.send(
            RedisCommand("HINCRBY", api.writePath.layout.reactionCounts(ofPost: post), "haha", -1), slot: HashSlot(post: post))
        let found = try WireDecoder.decode(
            ReconcileReport.self, from: await api.send("POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: body).body)
        #expect(
            found.kindsDrifted
                == [.init(postID: post, kind: "love", count: 7, rows: 4), .init(postID: other, kind: "sad", count: 2, rows: 0)])
        #expect(found.redisKindsDrifted == [.init(postID: post, kind: "haha", redisCount: 1, rows: 2)])
        #expect(found.drifted.isEmpty && found.redisDrifted.isEmpty && found.kindsRepaired == nil)
        let repairBody = #"{"post_ids":[\#(post),\#(other)],"repair":true}"#
        let repaired = try WireDecoder.decode(
            ReconcileReport.self, from: await api.send("POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: repairBody).body)
        #expect(repaired.kindsRepaired == 2 && repaired.redisRepaired == 1, "\(repaired)")
        let after = try WireDecoder.decode(
            ReconcileReport.self, from: await api.send("POST", "/admin/reconcile", token: HTTPHarness.adminToken, body: body).body)
        #expect(after.kindsDrifted == [] && after.redisKindsDrifted == [], "\(after)")
        let counts = try await pool.query(
            "SELECT post_id, kind, count FROM reaction_counts WHERE post_id = ANY($1::bigint[]) AND count > 0 ORDER BY 1, 2",
            [.int64Array([post, other])])
        #expect(
            counts.map { "\($0.string(0) ?? "") \($0.string(1) ?? "") \($0.string(2) ?? "")" } == [
                "\(post) haha 2", "\(post) love 4", "\(other) wow 1",
            ])
        // The reloaded post answers from its rows again.
        #expect(
            Self.text(await api.send("GET", "/v1/posts/\(post)/reactions?user=1"))
                == #"{"post_id":\#(post),"user_id":1,"reactions":{"love":4,"haha":2},"total":6,"mine":["haha","love"]}"#)
        await api.stop()
    }

    @Test(
        "a user's reactions of every kind: newest first, each (post, kind) once, exact while changes wait and the same after the flush; the caller's own with a user's token; a cursor of another list is refused"
    )
    func userReactionsList() async throws {
        let api = try await InProcessAPI.start(
            posts: 3, users: try APIDispatchTests.users(), postgresURL: try await TestEnvironment.reactionsDatabase()
        ) { configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .many)
        }
        let (a, b, c) = (api.posts[0], api.posts[1], api.posts[2])
        let user: Int64 = 700 + Int64.random(in: 0..<1_000_000) * 1000
        #expect(await api.send("PUT", "/v1/posts/\(a)/likes/\(user)").status == 200)
        #expect(await api.send("PUT", "/v1/posts/\(a)/reactions/love/users/\(user)").status == 200)
        #expect(await api.send("PUT", "/v1/posts/\(c)/reactions/sad/users/\(user)").status == 200)
        #expect(await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        // Waiting for PostgreSQL: a's love taken back, b's haha and wow, c's sad taken back and given again.
        #expect(await api.send("DELETE", "/v1/posts/\(a)/reactions/love/users/\(user)").status == 200)
        #expect(await api.send("PUT", "/v1/posts/\(b)/reactions/haha/users/\(user)").status == 200)
        #expect(await api.send("PUT", "/v1/posts/\(b)/reactions/wow/users/\(user)").status == 200)
        #expect(await api.send("DELETE", "/v1/posts/\(c)/reactions/sad/users/\(user)").status == 200)
        #expect(await api.send("PUT", "/v1/posts/\(c)/reactions/sad/users/\(user)").status == 200)
        func list(_ path: String, token: String? = HTTPHarness.apiToken) async throws -> [UserReaction] {
            var listed: [UserReaction] = []
            var cursor: String?
            repeat {
                let answer = await api.send("GET", path + (cursor.map { "?limit=1&cursor=\($0)" } ?? "?limit=1"), token: token)
                #expect(answer.status == 200, "\(Self.text(answer))")
                let page = try WireDecoder.decode(UserReactionsPage.self, from: answer.body)
                #expect(page.reactions.count <= 1)
                listed += page.reactions
                cursor = page.nextCursor
            } while cursor != nil
            return listed
        }
        let pending = try await list("/v1/users/\(user)/reactions")
        #expect(Set(pending.map { "\($0.postID) \($0.kind)" }) == ["\(a) like", "\(b) haha", "\(b) wow", "\(c) sad"], "\(pending)")
        #expect(pending.count == 4)
        #expect(zip(pending, pending.dropFirst()).allSatisfy { $0.reactedAt >= $1.reactedAt }, "newest first: \(pending)")
        #expect(pending.last.map { "\($0.postID) \($0.kind)" } == "\(a) like", "the oldest, flushed before the rest")
        #expect(await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        #expect(try await list("/v1/users/\(user)/reactions") == pending, "the same list once PostgreSQL has it all")
        // An end user's own, and no one else's.
        let token = TokenSigner(secret: APIDispatchTests.secret).token(user: user)
        #expect(try await list("/v1/me/reactions", token: token) == pending)
        #expect(await api.send("GET", "/v1/users/\(user + 1)/reactions", token: token).status == 403)
        // A cursor of the user's likes is not one of its reactions, and the other way round.
        #expect(await api.send("PUT", "/v1/posts/\(b)/likes/\(user)").status == 200)
        let likes = try WireDecoder.decode(UserLikesPage.self, from: await api.send("GET", "/v1/users/\(user)/likes?limit=1").body)
        let foreign = await api.send("GET", "/v1/users/\(user)/reactions?cursor=\(try #require(likes.nextCursor))")
        #expect(foreign.status == 400 && Self.text(foreign).contains("invalid_cursor"), "\(Self.text(foreign))")
        let first = try WireDecoder.decode(UserReactionsPage.self, from: await api.send("GET", "/v1/users/\(user)/reactions?limit=1").body)
        let back = await api.send("GET", "/v1/users/\(user)/likes?cursor=\(try #require(first.nextCursor))")
        #expect(back.status == 400 && Self.text(back).contains("invalid_cursor"))
        await api.stop()
    }
}
