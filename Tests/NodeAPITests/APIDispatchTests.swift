import CounterWire
import Foundation
import NodeHTTP
import NodeTestSupport
import Testing
import UserTokens

@testable import NodeAPI

/// The API called in process (`InProcessAPI`): a request goes through `CounterAPI.dispatch` — the
/// route table, the middleware, a handler — to the write path on the test servers and back,
/// without a socket.
@Suite("The API's dispatch without a socket")
struct APIDispatchTests {
    static let secret = "api-dispatch-test-secret-0123456789abcdef"

    static func users() throws -> UserAccess {
        var configuration = UserAccessConfiguration()
        configuration.secret = secret
        configuration.seedRoute = true
        configuration.writesPerSecond = 0
        return try UserAccess(configuration: configuration)
    }

    /// The count of `route`'s answers with `status` in `metrics`; 0 when none was counted.
    static func counted(_ metrics: HTTPResponse, route: String, status: Int) -> Int {
        let prefix = #"counter_http_requests_total{route="\#(route)",status="\#(status)"} "#
        let line = String(decoding: metrics.body, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix(prefix) }
        return line.flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
    }

    @Test(
        "likes, reads, a feed page, a list and a flush answered through dispatch, on the real write path; refusals by the middleware; every answer counted"
    )
    func throughDispatch() async throws {
        let api = try await InProcessAPI.start(posts: 2)
        let (post, other) = (api.posts[0], api.posts[1])
        func text(_ response: HTTPResponse) -> String { String(decoding: response.body, as: UTF8.self) }

        // The hot path: handed to the write path, answered from its completion.
        let toggled = await api.send("POST", "/v1/posts/\(post)/likes/7/toggle")
        #expect(toggled.status == 200 && text(toggled) == #"{"post_id":\#(post),"user_id":7,"is_liked":true,"likes_count":1}"#, "\(text(toggled))")
        #expect(text(await api.send("PUT", "/v1/posts/\(post)/likes/8")) == #"{"post_id":\#(post),"user_id":8,"is_liked":true,"likes_count":2}"#)
        #expect(text(await api.send("GET", "/v1/posts/\(post)/likes/9")) == #"{"post_id":\#(post),"user_id":9,"is_liked":false,"likes_count":2}"#)
        #expect(try await api.writePath.redisCount(post) == 2)
        #expect(try await api.writePath.redisIsMember(post, 7))
        #expect(try await api.writePath.redisIsMember(post, 8))

        // Request tasks: a count, a feed page, a list.
        #expect(text(await api.send("GET", "/v1/posts/\(post)")) == #"{"post_id":\#(post),"likes_count":2}"#)
        let feed = await api.send("POST", "/v1/posts/query", body: #"{"post_ids":[\#(post),\#(other)],"user_id":8}"#)
        #expect(
            text(feed) == #"{"posts":[{"post_id":\#(post),"likes_count":2,"is_liked":true},{"post_id":\#(other),"likes_count":0,"is_liked":false}]}"#)
        let likers = try WireDecoder.decode(LikersPage.self, from: await api.send("GET", "/v1/posts/\(post)/likers?limit=10").body)
        #expect(likers.likesCount == 2 && Set(likers.likers.map(\.userID)) == [7, 8])
        let flushed = await api.send("POST", "/admin/flush", token: HTTPHarness.adminToken)
        #expect(text(flushed) == #"{"flushed":true,"pending_changes":0}"#)
        #expect(try await api.writePath.postgresCounts()[post]?.count == 2)

        // The middleware's refusals, before any handler.
        let unknown = await api.send("GET", "/v1/nothing")
        #expect(unknown.status == 404 && text(unknown).hasPrefix(#"{"error":{"code":"not_found""#))
        let unauthorized = await api.send("POST", "/v1/posts/\(post)/likes/7/toggle", token: "wrong")
        #expect(unauthorized.status == 401 && unauthorized.headers["WWW-Authenticate"] == "Bearer")
        let badID = await api.send("POST", "/v1/posts/x/likes/7/toggle")
        #expect(badID.status == 400 && text(badID) == #"{"error":{"code":"invalid_id","message":"post id \"x\" is not a positive 64-bit integer"}}"#)
        let method = await api.send("PATCH", "/v1/posts/\(post)/likes/7")
        #expect(method.status == 405 && method.headers["Allow"] == "GET, PUT, DELETE")
        // The write path's refusal, mapped by the handler's step.
        let missing = await api.send("POST", "/v1/posts/999999999999/likes/7/toggle")
        #expect(missing.status == 404 && text(missing).hasPrefix(#"{"error":{"code":"post_not_found""#))
        #expect(try await api.writePath.redisCount(post) == 2, "no refusal changed anything")

        // Every answer counted under its route's label (unknown routes and bad ids apart).
        let metrics = await api.send("GET", "/metrics")
        #expect(metrics.status == 200 && metrics.contentType.hasPrefix("text/plain"))
        #expect(Self.counted(metrics, route: "/v1/posts/{post}/likes/{user}/toggle", status: 200) == 1)
        #expect(Self.counted(metrics, route: "/v1/posts/{post}/likes/{user}/toggle", status: 401) == 1)
        #expect(Self.counted(metrics, route: "/v1/posts/{post}/likes/{user}/toggle", status: 404) == 1)
        #expect(Self.counted(metrics, route: "/v1/posts/{post}/likes/{user}", status: 200) == 2)
        #expect(Self.counted(metrics, route: "/v1/posts/{post}/likes/{user}", status: 405) == 1)
        #expect(Self.counted(metrics, route: "/v1/posts/query", status: 200) == 1)
        #expect(Self.counted(metrics, route: "unknown", status: 404) == 1)
        #expect(Self.counted(metrics, route: "invalid", status: 400) == 1)
        #expect(String(decoding: metrics.body, as: UTF8.self).contains("\ncounter_ready 1\n"))
        // From the first signal on, the readiness /metrics reports is 0 (the verdict, not a check).
        api.api.markShuttingDown()
        #expect(String(decoding: await api.send("GET", "/metrics").body, as: UTF8.self).contains("\ncounter_ready 0\n"))
        await api.stop()
    }

    @Test("every route of the table refuses a method it does not take with 405, its Allow and its label, past a token it takes")
    func everyRouteRefusesOtherMethods() async throws {
        let api = try await InProcessAPI.start(posts: 1, users: try Self.users())
        let user = TokenSigner(secret: Self.secret).token(user: 7)
        for route in APIRoutes.table.routes {
            let path = route.label.replacingOccurrences(of: "{post}", with: "\(api.posts[0])").replacingOccurrences(
                of: "{id}", with: "\(api.posts[0])"
            )
            .replacingOccurrences(of: "{user}", with: "7").replacingOccurrences(of: "{kind}", with: "like")
            let answer = await api.send("PATCH", path, token: route.access == .user ? user : HTTPHarness.adminToken)
            #expect(answer.status == 405 && answer.headers["Allow"] == route.allowed, "\(route.label): \(answer.status)")
            #expect(
                String(decoding: answer.body, as: UTF8.self)
                    == #"{"error":{"code":"method_not_allowed","message":"PATCH is not allowed on \#(route.label); use \#(route.allowed)"}}"#)
        }
        let metrics = await api.send("GET", "/metrics", token: HTTPHarness.adminToken)
        for route in APIRoutes.table.routes {
            #expect(Self.counted(metrics, route: route.label, status: 405) == 1, "\(route.label)")
        }
        await api.stop()
    }
}
