import CounterCore
import CounterWire
import Foundation
import NodeTestSupport
import TestSupport
import Testing
import UserTokens

@testable import NodeAPI

@Suite("End users calling the node with their own tokens")
struct UserRoutesTests {
    static let secret = "user-routes-test-secret-0123456789abcdef"
    static let signer = TokenSigner(secret: secret)

    static func users(_ configure: (inout UserAccessConfiguration) -> Void = { _ in }) throws -> UserAccess {
        var configuration = UserAccessConfiguration()
        configuration.secret = secret
        configuration.writesPerSecond = 0
        configure(&configuration)
        return try UserAccess(configuration: configuration)
    }

    static func like(_ post: Int64, _ user: Int64, _ liked: Bool, _ count: Int) -> String {
        #"{"post_id":\#(post),"user_id":\#(user),"is_liked":\#(liked),"likes_count":\#(count)}"#
    }

    @Test("a user's token acts on that user's likes only: the user routes, the feed without user_id, and nothing else")
    func ownLikesOnly() async throws {
        let http = try await HTTPHarness.start(users: try Self.users())
        let post = http.posts[0]
        let seven = Self.signer.token(user: 7)
        #expect(try await http.send("PUT", "/v1/posts/\(post)/like", token: seven).text == Self.like(post, 7, true, 1))
        #expect(try await http.send("GET", "/v1/posts/\(post)/like", token: seven).text == Self.like(post, 7, true, 1))
        #expect(try await http.send("POST", "/v1/posts/\(post)/like/toggle", token: seven).text == Self.like(post, 7, false, 0))
        #expect(try await http.send("POST", "/v1/posts/\(post)/like/toggle", token: seven).text == Self.like(post, 7, true, 1))
        #expect(try await http.send("DELETE", "/v1/posts/\(post)/like", token: seven).text == Self.like(post, 7, false, 0))
        #expect(try await http.send("PUT", "/v1/posts/\(post)/like", token: seven).status == 200)

        // Another user's like, the service routes and the admin routes stay out of reach.
        let other = try await http.send("PUT", "/v1/posts/\(post)/likes/8", token: seven)
        #expect(other.status == 401 && other.text.contains(#""code":"unauthorized""#))
        #expect(try await http.send("POST", "/v1/posts/\(post)/likes/8/toggle", token: seven).status == 401)
        #expect(try await http.send("GET", "/admin/stats", token: seven).status == 401)
        #expect(try await http.send("POST", "/admin/flush", token: seven).status == 401)
        #expect(try await http.send("GET", "/v1/posts/\(post)/likes/8").text == Self.like(post, 8, false, 1))
        // The service token is not a user's token.
        let service = try await http.send("PUT", "/v1/posts/\(post)/like")
        #expect(service.status == 401 && service.text.contains("token_malformed"), "\(service.text)")
        #expect(try await http.send("PUT", "/v1/posts/\(post)/like", token: nil).status == 401)

        // The feed: the token's user, with or without user_id; never another's.
        let feed = try await http.send("POST", "/v1/posts/query", token: seven, body: #"{"post_ids":[\#(post),\#(http.posts[1])]}"#)
        #expect(
            feed.text
                == #"{"posts":[{"post_id":\#(post),"likes_count":1,"is_liked":true},{"post_id":\#(http.posts[1]),"likes_count":0,"is_liked":false}]}"#
        )
        let named = try await http.send("POST", "/v1/posts/query", token: seven, body: #"{"post_ids":[\#(post)],"user_id":7}"#)
        #expect(named.text == #"{"posts":[{"post_id":\#(post),"likes_count":1,"is_liked":true}]}"#)
        let spoofed = try await http.send("POST", "/v1/posts/query", token: seven, body: #"{"post_ids":[\#(post)],"user_id":8}"#)
        #expect(spoofed.status == 403 && spoofed.text.contains(#""code":"forbidden""#))
        // Spelled with Foundation's decoder's path too (whitespace and order the fast reader takes; an escape it does not).
        let escaped = try await http.send("POST", "/v1/posts/query", token: seven, body: #"{"user_id":8, "post_\u0069ds":[\#(post)]}"#)
        #expect(escaped.status == 403)
        // "user_id":null is left out (the client library sent it so): still the token's user.
        let null = try await http.send("POST", "/v1/posts/query", token: seven, body: #"{"post_ids":[\#(post)],"user_id":null}"#)
        #expect(null.text == named.text)
        // The service token without user_id: a logged-out viewer's page, not user 7's.
        #expect(
            try await http.send("POST", "/v1/posts/query", body: #"{"post_ids":[\#(post)]}"#).text
                == #"{"posts":[{"post_id":\#(post),"likes_count":1,"is_liked":false}]}"#)
        // Bad ids on a user route are named to the user.
        let bad = try await http.send("PUT", "/v1/posts/abc/like", token: seven)
        #expect(bad.status == 400 && bad.text.contains("invalid_id"))
        #expect(try await http.send("PATCH", "/v1/posts/\(post)/like", token: seven).status == 405)

        try await http.writePath.service.flush()
        let rows = try await http.writePath.pool.query("SELECT user_id FROM likes WHERE post_id = $1 ORDER BY user_id", [.int64(post)])
        #expect(try rows.map { try $0.int64(0) } == [7])
        let metrics = try await http.send("GET", "/metrics")
        #expect(metrics.text.contains(#"counter_http_requests_total{route="/v1/posts/{post}/like",status="200"}"#))
        #expect(metrics.text.contains(#"counter_user_token_refusals_total{code="token_malformed"} 1"#), "\(metrics.text)")
        await http.stop()
    }

    @Test("every kind of bad token is answered 401 with its code, and changes nothing")
    func refusedTokens() async throws {
        let rsa = TokenSigner(generating: .rs256, keyID: "rsa-1")
        let users = try Self.users {
            $0.keySetLocation = "(given below)"
            $0.rules = ClaimRules(issuer: "https://id.example", audience: "likes", leewaySeconds: 5)
        }
        users.verifier.replaceKeys(try JSONWebKeySet.parse(TokenSigner.keySet([rsa])).keys)
        let http = try await HTTPHarness.start(users: users)
        let post = http.posts[0]
        let valid: [String: Any] = ["iss": "https://id.example", "aud": "likes"]
        let now = Date().timeIntervalSince1970
        let noneHeader = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8))
        let goodClaims = rsa.token(user: 3, extra: valid).split(separator: ".")
        let cases: [(String, String)] = [
            (rsa.token(user: 3, lifetime: -60, extra: valid), "token_expired"),
            (rsa.token(claims: valid.merging(["sub": "3", "exp": now + 600, "nbf": now + 300]) { $1 }), "token_not_yet_valid"),
            (TokenSigner(generating: .rs256, keyID: "rsa-1").token(user: 3, extra: valid), "token_signature"),
            (rsa.token(user: 3, extra: ["iss": "https://id.example", "aud": "other"]), "token_audience"),
            (rsa.token(user: 3, extra: ["iss": "https://other.example", "aud": "likes"]), "token_issuer"),
            ("\(noneHeader).\(goodClaims[1]).", "token_algorithm"),
            (TokenSigner(secret: rsa.publicPEM).token(user: 3, extra: valid), "token_signature"),
            ("\(goodClaims[0]).!!!.\(goodClaims[2])", "token_malformed"),
            ("\(goodClaims[0]).\(Base64URL.encode(Array("{not json".utf8))).\(goodClaims[2])", "token_malformed"),
            (rsa.token(claims: valid.merging(["sub": "user-3", "exp": now + 600]) { $1 }), "token_user_claim"),
        ]
        for (token, code) in cases {
            for (method, path) in [("PUT", "/v1/posts/\(post)/like"), ("POST", "/v1/posts/\(post)/like/toggle")] {
                let answer = try await http.send(method, path, token: token)
                #expect(answer.status == 401, "\(code): \(answer.text)")
                #expect(answer.text.contains(#""code":"\#(code)""#), "\(code): \(answer.text)")
                #expect(answer.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
            }
        }
        // A token over the 8 KiB a token may have makes the request's head over the node's 8 KiB:
        // refused before the token is read.
        let oversized = rsa.token(user: 3, extra: valid.merging(["pad": String(repeating: "p", count: 6_000)]) { $1 })
        for (method, path) in [("PUT", "/v1/posts/\(post)/like"), ("POST", "/v1/posts/\(post)/like/toggle")] {
            let answer = try await http.send(method, path, token: oversized)
            #expect(answer.status == 431, "\(answer.text)")
            #expect(answer.text.contains(#""code":"headers_too_large""#), "\(answer.text)")
        }
        // The HS256 secret (configured too) still works, and RS256 with the key set.
        #expect(try await http.send("PUT", "/v1/posts/\(post)/like", token: rsa.token(user: 3, extra: valid)).status == 200)
        #expect(try await http.send("GET", "/v1/posts/\(post)").text == #"{"post_id":\#(post),"likes_count":1}"#)
        await http.stop()
    }

    @Test("the seed's route: off by default; on, it toggles in the seed's exact shape")
    func seedRoute() async throws {
        let off = try await HTTPHarness.start(users: try Self.users())
        let token = Self.signer.token(user: 11)
        #expect(try await off.send("POST", "/api/posts/\(off.posts[0])/like", token: token).status == 404)
        await off.stop()

        let http = try await HTTPHarness.start(users: try Self.users { $0.seedRoute = true })
        let post = http.posts[0]
        let first = try await http.send("POST", "/api/posts/\(post)/like", token: token)
        #expect(first.status == 200)
        #expect(first.headers["content-type"] == "application/json")
        #expect(first.text == #"{"is_liked":true,"likes_count":1}"#)
        #expect(try WireDecoder.decode(SeedLikeStatus.self, from: first.body) == SeedLikeStatus(isLiked: true, likesCount: 1))
        #expect(
            try await http.send("POST", "/api/posts/\(post)/like", token: Self.signer.token(user: 12)).text == #"{"is_liked":true,"likes_count":2}"#)
        #expect(try await http.send("POST", "/api/posts/\(post)/like", token: token).text == #"{"is_liked":false,"likes_count":1}"#)
        let missing = try await http.send("POST", "/api/posts/999999999/like", token: token)
        #expect(missing.status == 404 && missing.text.contains("post_not_found"))
        #expect(try await http.send("POST", "/api/posts/\(post)/like", token: nil).status == 401)
        #expect(try await http.send("GET", "/api/posts/\(post)/like", token: token).status == 405)
        await http.stop()
    }

    @Test("per-user write limits: 429 with Retry-After, the limited writes change nothing, reads and other users go on")
    func rateLimits() async throws {
        // The limiter's clock moves only when the test says (a loaded machine must not refill buckets).
        let clock = UserRateLimiterTests.FakeClock()
        var configuration = UserAccessConfiguration()
        configuration.secret = Self.secret
        configuration.writesPerSecond = 1
        configuration.burst = 3
        let http = try await HTTPHarness.start(users: try UserAccess(configuration: configuration, clock: clock.read))
        let post = http.posts[0]
        let hammer = Self.signer.token(user: 21)
        for expected in [true, false, true] {
            #expect(
                try await http.send("POST", "/v1/posts/\(post)/like/toggle", token: hammer).text == Self.like(post, 21, expected, expected ? 1 : 0))
        }
        let limited = try await http.send("POST", "/v1/posts/\(post)/like/toggle", token: hammer)
        #expect(limited.status == 429)
        #expect(limited.text.contains(#""code":"rate_limited""#))
        #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 >= 1)
        #expect(try await http.send("DELETE", "/v1/posts/\(post)/like", token: hammer).status == 429)
        // Nothing of the limited writes happened; reads are not limited; another user is not.
        for _ in 0..<5 {
            #expect(try await http.send("GET", "/v1/posts/\(post)/like", token: hammer).text == Self.like(post, 21, true, 1))
        }
        #expect(try await http.send("PUT", "/v1/posts/\(post)/like", token: Self.signer.token(user: 22)).text == Self.like(post, 22, true, 2))
        // The service routes are for backends: not limited per user.
        for _ in 0..<5 { #expect(try await http.send("PUT", "/v1/posts/\(post)/likes/21").status == 200) }
        // A second later, one more write.
        clock.advance(milliseconds: 1_000)
        #expect(try await http.send("POST", "/v1/posts/\(post)/like/toggle", token: hammer).text == Self.like(post, 21, false, 1))
        let metrics = try await http.send("GET", "/metrics")
        #expect(metrics.text.contains("counter_rate_limited_total 2"), "\(metrics.text)")
        #expect(metrics.text.contains("counter_rate_limited_users 2"))
        await http.stop()
    }

    @Test("with --api-token-on-user-routes, a backend acts for the user a Counter-User header names")
    func apiTokenActingForUser() async throws {
        let closed = try await HTTPHarness.start(users: try Self.users())
        #expect(try await closed.send("PUT", "/v1/posts/\(closed.posts[0])/like", headers: ["Counter-User": "5"]).status == 401)
        await closed.stop()
        let http = try await HTTPHarness.start(users: try Self.users { $0.apiTokenOnUserRoutes = true })
        let post = http.posts[0]
        #expect(try await http.send("PUT", "/v1/posts/\(post)/like", headers: ["Counter-User": "5"]).text == Self.like(post, 5, true, 1))
        let missing = try await http.send("PUT", "/v1/posts/\(post)/like")
        #expect(missing.status == 400 && missing.text.contains("Counter-User"))
        #expect(try await http.send("PUT", "/v1/posts/\(post)/like", headers: ["Counter-User": "-5"]).status == 400)
        // The admin token is not the API token here.
        #expect(try await http.send("PUT", "/v1/posts/\(post)/like", token: HTTPHarness.adminToken, headers: ["Counter-User": "5"]).status == 401)
        await http.stop()
    }
}
