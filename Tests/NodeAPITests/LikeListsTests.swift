import CounterWire
import Foundation
import NodeTestSupport
import TestSupport
import Testing
import UserTokens

@testable import NodeAPI

@Suite("The lists: a post's likers and a user's likes, exact while changes wait for PostgreSQL")
struct LikeListsTests {
    static let secret = "like-lists-test-secret-0123456789abcdef"
    static let signer = TokenSigner(secret: secret)

    static func users() throws -> UserAccess {
        var configuration = UserAccessConfiguration()
        configuration.secret = secret
        configuration.writesPerSecond = 0
        return try UserAccess(configuration: configuration)
    }

    static func likers(_ http: HTTPHarness, _ post: Int64, limit: Int? = nil, cursor: String? = nil) async throws -> LikersPage {
        var query: [String] = []
        if let limit { query.append("limit=\(limit)") }
        if let cursor { query.append("cursor=\(cursor)") }
        let response = try await http.send("GET", "/v1/posts/\(post)/likers" + (query.isEmpty ? "" : "?" + query.joined(separator: "&")))
        #expect(response.status == 200, "\(response.text)")
        return try JSONDecoder().decode(LikersPage.self, from: Data(response.text.utf8))
    }

    static func userLikes(_ http: HTTPHarness, _ user: Int64, limit: Int? = nil, cursor: String? = nil) async throws -> UserLikesPage {
        var query: [String] = []
        if let limit { query.append("limit=\(limit)") }
        if let cursor { query.append("cursor=\(cursor)") }
        let response = try await http.send("GET", "/v1/users/\(user)/likes" + (query.isEmpty ? "" : "?" + query.joined(separator: "&")))
        #expect(response.status == 200, "\(response.text)")
        return try JSONDecoder().decode(UserLikesPage.self, from: Data(response.text.utf8))
    }

    /// Every page of the post's likers, following the cursors.
    static func allLikers(_ http: HTTPHarness, _ post: Int64, limit: Int) async throws -> [Liker] {
        var all: [Liker] = []
        var cursor: String?
        repeat {
            let page = try await likers(http, post, limit: limit, cursor: cursor)
            #expect(page.likers.count <= limit)
            all += page.likers
            cursor = page.nextCursor
        } while cursor != nil
        return all
    }

    @Test("likes still in the log are listed at once, newest first, and the same after the flush; unlikes vanish, a like again moves up")
    func pendingLikesListed() async throws {
        let http = try await HTTPHarness.start(writePath: { $0.flushOnlyWhenAsked() })
        let post = http.posts[0]
        // Users of their own: a user's list spans every post of the test database.
        let base = Int64.random(in: 1_000...1_000_000_000) * 1_000
        func u(_ n: Int64) -> Int64 { base + n }
        for user in (Int64(1)...5).map(u) {
            #expect(try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)").status == 200)
            try await Task.sleep(for: .milliseconds(3))
        }
        #expect(try await http.writePath.postgresMembers().isEmpty, "nothing is flushed yet")
        let first = try await Self.likers(http, post)
        #expect(first.likers.map(\.userID) == [5, 4, 3, 2, 1].map(u))
        #expect(first.likesCount == 5 && first.nextCursor == nil)
        let times = first.likers.map { LikeTime.milliseconds($0.likedAt)! }
        #expect(times == times.sorted(by: >))
        #expect(abs(Double(times[0]) / 1000 - Date().timeIntervalSince1970) < 60)

        try await http.writePath.service.flush()
        #expect(try await Self.likers(http, post) == first, "PostgreSQL's rows carry the times the log did")

        // An unlike and a like again, waiting: 2 is gone, 4 is newest.
        #expect(try await http.send("DELETE", "/v1/posts/\(post)/likes/\(u(2))").status == 200)
        #expect(try await http.send("DELETE", "/v1/posts/\(post)/likes/\(u(4))").status == 200)
        try await Task.sleep(for: .milliseconds(3))
        #expect(try await http.send("PUT", "/v1/posts/\(post)/likes/\(u(4))").status == 200)
        let after = try await Self.likers(http, post)
        #expect(after.likers.map(\.userID) == [4, 5, 3, 1].map(u))
        #expect(after.likesCount == 4)
        try await http.writePath.service.flush()
        #expect(try await Self.likers(http, post) == after, "the like again keeps its new time in PostgreSQL (the batch coalesced the unlike away)")
        let rows = try await http.writePath.pool.query("SELECT count(*) FROM likes WHERE post_id = $1", [.int64(post)])
        #expect(try rows.first!.int64(0) == 4)
        let count = try await http.writePath.pool.query("SELECT likes_count FROM posts WHERE id = $1", [.int64(post)])
        #expect(try count.first!.int64(0) == 4, "a like again of a row PostgreSQL kept moves no count")

        // The user's side: the same likes, newest first, across posts.
        #expect(try await http.send("PUT", "/v1/posts/\(http.posts[1])/likes/\(u(4))").status == 200)
        let four = try await Self.userLikes(http, u(4))
        #expect(four.likes.map(\.postID) == [http.posts[1], post])
        #expect(four.likes[1].likedAt == after.likers[0].likedAt)
        await http.stop()
    }

    @Test("pages under concurrent writes and flushes: no duplicate, no gap; their union is the membership at the end, in order")
    func paginationUnderWrites() async throws {
        var generator = SeededGenerator(seed: 26)
        let http = try await HTTPHarness.start(posts: 2, writePath: { $0.flushOnlyWhenAsked() })
        let post = http.posts[0]
        // 300 likers in PostgreSQL, several in the same microsecond (ties go by user id).
        try await http.writePath.pool.query(
            """
            INSERT INTO likes (user_id, post_id, created_at, updated_at)
            SELECT u, $1, now() - (u / 3) * interval '1 second', now() FROM generate_series(1, 300) u
            """, [.int64(post)])
        try await http.writePath.pool.query("UPDATE posts SET likes_count = 300 WHERE id = $1", [.int64(post)])
        // 100 more through the node, some flushed, some waiting.
        for user in Int64(301)...400 {
            #expect(try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)").status == 200)
            if user % 37 == 0 { try await http.writePath.service.flush() }
        }
        let pagesStarted = Date().timeIntervalSince1970 * 1000
        var listed: [Liker] = []
        var cursor: String?
        var removed: Set<Int64> = []
        var relisted: Set<Int64> = []
        var newcomers: Int64 = 1_000
        repeat {
            let limit = Int.random(in: 1...100, using: &generator)
            let page = try await Self.likers(http, post, limit: limit, cursor: cursor)
            listed += page.likers
            cursor = page.nextCursor
            // Between pages: new likers (above every cursor), unlikes and likes again of users
            // not listed yet (their old place is below the cursor), and flushes.
            let seen = Set(listed.map(\.userID))
            for _ in 0..<Int.random(in: 0...6, using: &generator) {
                switch Int.random(in: 0..<4, using: &generator) {
                case 0:
                    newcomers += 1
                    #expect(try await http.send("PUT", "/v1/posts/\(post)/likes/\(newcomers)").status == 200)
                case 1, 2:
                    let user = Int64.random(in: 1...400, using: &generator)
                    guard !seen.contains(user), !removed.contains(user) else { continue }
                    #expect(try await http.send("DELETE", "/v1/posts/\(post)/likes/\(user)").status == 200)
                    if Bool.random(using: &generator) {
                        #expect(try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)").status == 200)
                        relisted.insert(user)
                    } else {
                        removed.insert(user)
                    }
                default:
                    try await http.writePath.service.flush()
                }
            }
        } while cursor != nil
        let ids = listed.map(\.userID)
        #expect(Set(ids).count == ids.count, "no user twice")
        // The membership at the end, in order, of the likes older than the first page.
        try await http.writePath.service.flush()
        let end = try await Self.allLikers(http, post, limit: 100)
        let expected = end.filter { Double(LikeTime.milliseconds($0.likedAt)!) < pagesStarted }
        #expect(ids == expected.map(\.userID), "listed \(ids.count), expected \(expected.count)")
        #expect(Set(ids).isDisjoint(with: removed.union(relisted)))
        #expect(end.count == 400 - removed.count + Int(newcomers - 1_000))
        let count = try await Self.likers(http, post, limit: 1).likesCount
        #expect(count == Int64(end.count))
        // The same list as PostgreSQL alone has it, now that nothing waits.
        let rows = try await http.writePath.pool.query(
            "SELECT user_id FROM likes WHERE post_id = $1 ORDER BY created_at DESC, user_id", [.int64(post)])
        #expect(try rows.map { try $0.int64(0) } == end.map(\.userID))
        await http.stop()
    }

    @Test("bad input: limit, cursor, ids, arguments; a user token lists its own likes only")
    func badInput() async throws {
        let http = try await HTTPHarness.start(users: try Self.users())
        let post = http.posts[0]
        let seven = Int64.random(in: 1_000...1_000_000_000) * 1_000 + 7
        let eight = seven + 1
        #expect(try await http.send("PUT", "/v1/posts/\(post)/likes/\(seven)").status == 200)
        for limit in ["0", "101", "-1", "abc", "1.5", "+5", ""] {
            let response = try await http.send("GET", "/v1/posts/\(post)/likers?limit=\(limit)")
            #expect(response.status == 400 && response.text.contains(#""code":"invalid_argument""#), "limit \(limit): \(response.text)")
        }
        #expect(try await http.send("GET", "/v1/posts/\(post)/likers?limit=100").status == 200)
        #expect(try await http.send("GET", "/v1/posts/\(post)/likers?limit=1").status == 200)
        let unknown = try await http.send("GET", "/v1/posts/\(post)/likers?limt=5")
        #expect(unknown.status == 400 && unknown.text.contains("invalid_argument"))
        for cursor in ["", "x", "bm90IGEgY3Vyc29y", "%41", String(repeating: "A", count: 200)] {
            let response = try await http.send("GET", "/v1/posts/\(post)/likers?cursor=\(cursor)")
            #expect(response.status == 400 && response.text.contains(#""code":"invalid_cursor""#), "cursor \(cursor): \(response.text)")
        }
        // A cursor of another post's list, and of a user's list.
        #expect(try await http.send("PUT", "/v1/posts/\(http.posts[1])/likes/\(seven)").status == 200)
        #expect(try await http.send("PUT", "/v1/posts/\(http.posts[1])/likes/\(eight)").status == 200)
        let other = try await Self.likers(http, http.posts[1], limit: 1)
        let foreign = try await http.send("GET", "/v1/posts/\(post)/likers?cursor=\(other.nextCursor!)")
        #expect(foreign.status == 400 && foreign.text.contains("invalid_cursor") && foreign.text.contains("another list"))
        let mine = try await Self.userLikes(http, seven, limit: 1)
        #expect(try await http.send("GET", "/v1/posts/\(post)/likers?cursor=\(mine.nextCursor!)").status == 400)
        #expect(try await http.send("GET", "/v1/users/\(eight)/likes?cursor=\(mine.nextCursor!)").status == 400)
        #expect(try await http.send("GET", "/v1/users/\(seven)/likes?cursor=\(mine.nextCursor!)").status == 200)

        #expect(try await http.send("GET", "/v1/posts/abc/likers").text.contains("invalid_id"))
        #expect(try await http.send("GET", "/v1/users/0/likes").text.contains("invalid_id"))
        let missing = try await http.send("GET", "/v1/posts/999999999/likers")
        #expect(missing.status == 404 && missing.text.contains("post_not_found"))
        #expect(try await http.send("POST", "/v1/posts/\(post)/likers").status == 405)
        #expect(try await http.send("GET", "/v1/posts/\(post)/likers", token: nil).status == 401)

        // End users: a post's likers, their own likes (both routes), never another's.
        let token = Self.signer.token(user: seven)
        #expect(try await http.send("GET", "/v1/posts/\(post)/likers", token: token).status == 200)
        let me = try await http.send("GET", "/v1/me/likes", token: token)
        #expect(me.status == 200 && me.text.hasPrefix(#"{"user_id":\#(seven),"likes":[{"post_id":\#(http.posts[1])"#), "\(me.text)")
        #expect(try await http.send("GET", "/v1/users/\(seven)/likes", token: token).text == me.text)
        let forbidden = try await http.send("GET", "/v1/users/\(eight)/likes", token: token)
        #expect(forbidden.status == 403 && forbidden.text.contains("forbidden"))
        #expect(try await http.send("GET", "/v1/me/likes").status == 401, "the API token is not a user")
        let nobody = try await http.send("GET", "/v1/users/\(eight + 100)/likes")
        #expect(nobody.text == #"{"user_id":\#(eight + 100),"likes":[],"next_cursor":null}"#)
        await http.stop()
    }
}

extension LikeListsTests {
    @Test(
        "a feed page with include recent_likers: each post's newest likers, exact as its likers page, in the one request; without it the same bytes as before"
    )
    func feedPreview() async throws {
        let http = try await HTTPHarness.start(posts: 4, writePath: { $0.flushOnlyWhenAsked() })
        let base = Int64.random(in: 1_000...1_000_000_000) * 1_000
        let posts = http.posts
        // Post 0: five likers, two of them flushed, one unlike waiting; post 1: one liker; post 2: none.
        for user in (base + 1)...(base + 5) {
            #expect(try await http.send("PUT", "/v1/posts/\(posts[0])/likes/\(user)").status == 200)
            if user == base + 2 { try await http.writePath.service.flush() }
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(try await http.send("DELETE", "/v1/posts/\(posts[0])/likes/\(base + 5)").status == 200)
        #expect(try await http.send("PUT", "/v1/posts/\(posts[1])/likes/\(base + 9)").status == 200)
        let ids = posts.prefix(3).map(String.init).joined(separator: ",")
        let response = try await http.send(
            "POST", "/v1/posts/query",
            body: #"{"post_ids":[\#(ids),999999999999],"user_id":\#(base + 1),"include":["recent_likers"]}"#)
        #expect(response.status == 200, "\(response.text)")
        let page = try JSONDecoder().decode(FeedPage.self, from: Data(response.text.utf8))
        #expect(page.posts.map(\.postID) == Array(posts.prefix(3)), "a post that does not exist is left out")
        #expect(page.posts[0].recentLikers?.map(\.userID) == [base + 4, base + 3, base + 2])
        #expect(page.posts[0].isLiked && page.posts[0].likesCount == 4)
        #expect(page.posts[1].recentLikers?.map(\.userID) == [base + 9])
        #expect(page.posts[2].recentLikers == [])
        let likers = try await Self.likers(http, posts[0], limit: 3)
        #expect(page.posts[0].recentLikers == likers.likers)
        // Without include: the plain answer, no recent_likers member.
        let plain = try await http.send("POST", "/v1/posts/query", body: #"{"post_ids":[\#(posts[1])],"user_id":\#(base + 9)}"#)
        #expect(plain.text == #"{"posts":[{"post_id":\#(posts[1]),"likes_count":1,"is_liked":true}]}"#)
        let bad = try await http.send("POST", "/v1/posts/query", body: #"{"post_ids":[\#(posts[1])],"include":["everything"]}"#)
        #expect(bad.status == 400 && bad.text.contains("invalid_body") && bad.text.contains("recent_likers"))
        await http.stop()
    }
}
