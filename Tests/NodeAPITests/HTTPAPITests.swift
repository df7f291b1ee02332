import CounterCore
import CounterWire
import Foundation
import NodeTestSupport
import Synchronization
import TestSupport
import Testing

@testable import NodeAPI
@testable import NodeHTTP
@testable import WritePath

@Suite("HTTP API over real sockets")
struct HTTPAPITests {
    @Test("every endpoint answers with the documented JSON", arguments: RedisTarget.allCases)
    func endpoints(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(redis: redis)
        let post = http.posts[0]
        let toggled = try await http.send("POST", "/v1/posts/\(post)/likes/7/toggle")
        #expect(toggled.status == 200)
        #expect(toggled.text == #"{"post_id":\#(post),"user_id":7,"is_liked":true,"likes_count":1}"#)
        #expect(toggled.headers["content-type"] == "application/json")
        #expect(try await http.send("PUT", "/v1/posts/\(post)/likes/8").text == #"{"post_id":\#(post),"user_id":8,"is_liked":true,"likes_count":2}"#)
        #expect(try await http.send("PUT", "/v1/posts/\(post)/likes/8").text == #"{"post_id":\#(post),"user_id":8,"is_liked":true,"likes_count":2}"#)
        #expect(
            try await http.send("DELETE", "/v1/posts/\(post)/likes/7").text == #"{"post_id":\#(post),"user_id":7,"is_liked":false,"likes_count":1}"#)
        #expect(try await http.send("GET", "/v1/posts/\(post)/likes/8").text == #"{"post_id":\#(post),"user_id":8,"is_liked":true,"likes_count":1}"#)
        #expect(try await http.send("GET", "/v1/posts/\(post)").text == #"{"post_id":\#(post),"likes_count":1}"#)
        let feed = try await http.send("POST", "/v1/posts/query", body: #"{"post_ids":[\#(http.posts[1]),\#(post)],"user_id":8}"#)
        #expect(feed.status == 200)
        #expect(
            feed.text
                == #"{"posts":[{"post_id":\#(http.posts[1]),"likes_count":0,"is_liked":false},{"post_id":\#(post),"likes_count":1,"is_liked":true}]}"#
        )
        // A whole number is that integer however JSON spells it (JSON Schema's integer).
        let spelled = try await http.send("POST", "/v1/posts/query", body: #"{"post_ids":[\#(http.posts[1]).0,\#(post)e0],"user_id":8.00}"#)
        #expect(spelled.text == feed.text)
        // Without user_id (or with null), a logged-out viewer's page: the counts, liked by nobody.
        let loggedOut = try await http.send("POST", "/v1/posts/query", body: #"{"post_ids":[\#(http.posts[1]),\#(post)]}"#)
        #expect(
            loggedOut.text
                == #"{"posts":[{"post_id":\#(http.posts[1]),"likes_count":0,"is_liked":false},{"post_id":\#(post),"likes_count":1,"is_liked":false}]}"#
        )
        #expect(
            try await http.send("POST", "/v1/posts/query", body: #"{"post_ids":[\#(http.posts[1]),\#(post)],"user_id":null}"#).text == loggedOut.text)
        #expect(try await http.send("GET", "/healthz", token: nil).text == #"{"status":"ok"}"#)
        #expect(try await http.send("GET", "/readyz", token: nil).status == 200)

        let flushed = try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken)
        #expect(flushed.text == #"{"flushed":true,"pending_changes":0}"#)
        #expect(try await http.writePath.postgresCounts()[post]?.count == 1)
        let stats = try await http.send("GET", "/admin/stats", token: HTTPHarness.adminToken)
        #expect(stats.status == 200)
        #expect(stats.text.contains(#""total":{"#) && stats.text.contains(#""pending_changes":0"#))
        // The Redis nodes as the node sees them: every slot served, by connected masters.
        let redisStats = try WireDecoder.decode(ServiceStatistics.self, from: Array(stats.text.utf8)).redis
        #expect(redisStats.mode == (redis == .cluster ? "cluster" : "single"))
        let nodes = redisStats.nodes
        #expect(nodes.reduce(0) { $0 + $1.slots } == 16_384)
        let serving = nodes.filter { $0.slots > 0 }
        #expect(serving.count == (redis == .cluster ? 3 : 1))
        #expect(serving.allSatisfy { $0.connected })
        let inspect = try await http.send("GET", "/admin/posts/\(post)?user=8", token: HTTPHarness.adminToken)
        #expect(inspect.text.contains(#""verdict":"agree""#))
        #expect(inspect.text.contains(#""postgres":{"exists":true,"likes_count":1,"likes_rows":1,"is_liked":true}"#))

        let metrics = try await http.send("GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.headers["content-type"]?.hasPrefix("text/plain") == true)
        #expect(metrics.text.contains(#"counter_http_requests_total{route="/v1/posts/{post}/likes/{user}/toggle",status="200"} 1"#))
        #expect(metrics.text.contains("counter_http_request_duration_seconds_bucket"))
        #expect(metrics.text.contains("counter_backlog_changes{shard=\"0\"}"))
        #expect(metrics.text.contains("counter_redis_node_up{endpoint=\""))
        #expect(metrics.text.contains(#"kind="moved"}"#))
        #expect(metrics.text.contains("process_cpu_seconds_total "))
        #expect(metrics.text.contains("\ncounter_ready 1\n"))
        #expect(metrics.text.contains("\ncounter_flush_max_age_seconds 1.0\n"))
        #expect(metrics.text.contains("process_resident_memory_bytes "))
        // The change flushed above was measured from its write to its commit.
        let lagCount = metrics.text.split(separator: "\n").first { $0.hasPrefix("counter_write_behind_lag_seconds_count ") }
            .flatMap { Int($0.split(separator: " ")[1]) }
        #expect((lagCount ?? 0) >= 1)
        #expect(metrics.text.contains("# TYPE counter_write_behind_lag_seconds histogram"))
        await http.stop()
    }

    /// (method, path, token, body, status, error code)
    static let badRequests: [(String, String, String?, String?, Int, String)] = [
        ("POST", "/v1/posts/0/likes/7/toggle", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("POST", "/v1/posts/-1/likes/7/toggle", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("POST", "/v1/posts/abc/likes/7/toggle", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("POST", "/v1/posts/99999999999999999999/likes/7/toggle", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("PUT", "/v1/posts/POST/likes/0", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("GET", "/v1/posts/+5", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("GET", "/v1/nothing", HTTPHarness.apiToken, nil, 404, "not_found"),
        ("GET", "/", nil, nil, 404, "not_found"),
        ("PATCH", "/v1/posts/POST/likes/7", HTTPHarness.apiToken, nil, 405, "method_not_allowed"),
        ("GET", "/v1/posts/POST/likes/7/toggle", HTTPHarness.apiToken, nil, 405, "method_not_allowed"),
        ("POST", "/healthz", nil, nil, 405, "method_not_allowed"),
        ("POST", "/v1/posts/POST/likes/7/toggle", nil, nil, 401, "unauthorized"),
        ("POST", "/v1/posts/POST/likes/7/toggle", "wrong-token-wrong-token", nil, 401, "unauthorized"),
        ("POST", "/admin/flush", HTTPHarness.apiToken, nil, 401, "unauthorized"),
        ("GET", "/metrics", nil, nil, 401, "unauthorized"),
        ("POST", "/v1/posts/999999999999999/likes/7/toggle", HTTPHarness.apiToken, nil, 404, "post_not_found"),
        ("GET", "/v1/posts/999999999999999", HTTPHarness.apiToken, nil, 404, "post_not_found"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, "{not json", 400, "invalid_json"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, "", 400, "invalid_json"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":[],"user_id":7}"#, 400, "invalid_body"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":[1],"user_id":0}"#, 400, "invalid_id"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":[1.5],"user_id":7}"#, 400, "invalid_id"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":[99999999999999999999],"user_id":7}"#, 400, "invalid_id"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":"1","user_id":7}"#, 400, "invalid_body"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":[1],"user_id":7,"extra":1}"#, 400, "invalid_body"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":[1e-1],"user_id":7}"#, 400, "invalid_id"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":[15e-1],"user_id":7}"#, 400, "invalid_id"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":[1],"user_id":7.5}"#, 400, "invalid_id"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":[9223372036854775808.0],"user_id":7}"#, 400, "invalid_id"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":[1e19],"user_id":7}"#, 400, "invalid_id"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":["7"],"user_id":7}"#, 400, "invalid_id"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"user_id":7}"#, 400, "invalid_body"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":null,"user_id":7}"#, 400, "invalid_body"),
        ("POST", "/v1/posts/query", HTTPHarness.apiToken, "[" + String(repeating: "[", count: 100) + "]", 400, "invalid_json"),
        (
            "POST", "/v1/posts/query", HTTPHarness.apiToken, #"{"post_ids":[\#((1...1001).map(String.init).joined(separator: ","))],"user_id":7}"#,
            400, "invalid_body"
        ),
        ("GET", "/admin/posts/POST?user=abc", HTTPHarness.adminToken, nil, 400, "invalid_id"),
        // Ids are read on the bytes sent, never percent-decoded: none of these is user 1 (who
        // likes the post; an unlike taken as user 1 would show in the count).
        ("DELETE", "/v1/posts/POST/likes/1%00", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("DELETE", "/v1/posts/POST/likes/%31", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("DELETE", "/v1/posts/POST/likes/1%2F", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("DELETE", "/v1/posts/POST/likes/%2531", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("DELETE", "/v1/posts/POST/likes/%C0%B1", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("DELETE", "/v1/posts/POST/likes/1%20", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("DELETE", "/v1/posts/POST/likes/1+", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("DELETE", "/v1/posts/POST/likes/+1", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("POST", "/v1/posts/POST/likes/1%00/toggle", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("DELETE", "/v1/posts/POST%00/likes/1", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        ("DELETE", "/v1/posts/POST%2F/likes/1", HTTPHarness.apiToken, nil, 400, "invalid_id"),
        // Query strings of the admin routes likewise.
        ("GET", "/admin/posts/POST?user=1%00", HTTPHarness.adminToken, nil, 400, "invalid_id"),
        ("GET", "/admin/posts/POST?user=%31", HTTPHarness.adminToken, nil, 400, "invalid_id"),
        ("GET", "/admin/posts/POST?user=+1", HTTPHarness.adminToken, nil, 400, "invalid_id"),
        ("GET", "/admin/dead-letters?count=1%00", HTTPHarness.adminToken, nil, 400, "invalid_argument"),
        ("GET", "/admin/dead-letters?count=+5", HTTPHarness.adminToken, nil, 400, "invalid_argument"),
        ("GET", "/admin/dead-letters?count=0", HTTPHarness.adminToken, nil, 400, "invalid_argument"),
        ("POST", "/admin/flush?wait=fals%65", HTTPHarness.adminToken, nil, 400, "invalid_argument"),
    ]

    @Test("bad requests get their documented status and JSON error, change nothing, and the node keeps serving", arguments: RedisTarget.allCases)
    func badRequests(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(redis: redis)
        let post = http.posts[0]
        _ = try await http.send("PUT", "/v1/posts/\(post)/likes/1")
        for (method, path, token, body, status, code) in Self.badRequests {
            let response = try await http.send(
                method,
                path.replacingOccurrences(of: "POST/", with: "\(post)/")
                    .replacingOccurrences(of: "posts/POST", with: "posts/\(post)"), token: token, body: body)
            #expect(response.status == status, "\(method) \(path)")
            #expect(response.text.hasPrefix(#"{"error":{"code":"\#(code)","message":""#), "\(method) \(path): \(response.text)")
            if status == 405 { #expect(response.headers["allow"] != nil) }
            if status == 401 { #expect(response.headers["www-authenticate"] == "Bearer") }
        }
        // Nothing changed: one like, by user 1, on the post.
        #expect(try await http.send("GET", "/v1/posts/\(post)").text == #"{"post_id":\#(post),"likes_count":1}"#)
        #expect(try await http.writePath.redisCount(post) == 1)
        await http.stop()
    }

    /// `/readyz` asked every 50 ms until it answers `status` (up to 30 s); the last answer.
    static func readiness(of http: HTTPHarness, until status: Int) async throws -> RawHTTPResponse {
        let deadline = ContinuousClock.now + .seconds(30)
        var answer = try await http.send("GET", "/readyz", token: nil)
        while answer.status != status && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            answer = try await http.send("GET", "/readyz", token: nil)
        }
        return answer
    }

    @Test(
        "clients that send pipelined requests and leave at once: the answers' writes fail (EPIPE), the process goes on and the server keeps serving")
    func clientsLeavingMidAnswer() async throws {
        let http = try await HTTPHarness.start(posts: 1)
        // Each connection's first answer meets a closed socket (the client's kernel resets it),
        // and the next write fails with EPIPE: a SIGPIPE on the HTTP thread would end the process.
        try await RawHTTPClient.sendAndLeave(
            port: http.port, request: RawHTTPClient.request("GET", "/healthz"), pipelined: 20, connections: 200)
        try await RawHTTPClient.sendAndLeave(
            port: http.port, request: RawHTTPClient.request("POST", "/v1/posts/\(http.posts[0])/likes/5/toggle", token: HTTPHarness.apiToken),
            pipelined: 20, connections: 50)
        #expect(try await http.send("GET", "/healthz", token: nil).status == 200)
        await http.stop()
    }

    @Test(
        "readiness: not ready while a change has waited for PostgreSQL longer than the limit, ready once flushed, and not ready from the moment the node shuts down",
        arguments: RedisTarget.allCases)
    func readiness(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(redis: redis, writePath: { $0.flushOnlyWhenAsked() }, readyMaxLag: .seconds(1))
        let post = http.posts[0]
        #expect(try await http.send("GET", "/readyz", token: nil).status == 200)
        #expect(try await http.send("POST", "/v1/posts/\(post)/likes/7/toggle").status == 200)
        // The change waits (flushes only when asked); once older than the limit, and past the
        // probe's one-second cache, the node is not ready, and says why (asked until it says so,
        // however slow the machine).
        let lagging = try await Self.readiness(of: http, until: 503)
        #expect(lagging.status == 503)
        #expect(lagging.text.contains("write-behind: the oldest change waiting for PostgreSQL is"), "\(lagging.text)")
        let oldest = await http.writePath.service.stats().map(\.oldestPendingAgeSeconds).max() ?? 0
        #expect(oldest > 1, "not ready while the oldest change is \(oldest) s old")
        #expect(try await http.send("GET", "/healthz", token: nil).status == 200, "liveness stays")
        // Flushed: ready again, once the cached answer has expired.
        try await http.writePath.service.flush()
        #expect(try await Self.readiness(of: http, until: 200).status == 200)
        http.api.markShuttingDown()
        let stopping = try await http.send("GET", "/readyz", token: nil)
        #expect(stopping.status == 503 && stopping.text.contains("the node is shutting down"))
        await http.stop()
    }

    @Test(
        "oversized headers (over 8 KiB), request lines and bodies are refused, nothing done; malformed request lines are answered by the HTTP library; the node keeps serving",
        arguments: RedisTarget.allCases)
    func malformedTraffic(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(redis: redis)
        let bigBody = #"{"post_ids":[1],"user_id":7,"pad":""# + String(repeating: "x", count: 70_000) + #""}"#
        let tooLarge = try await http.send("POST", "/v1/posts/query", body: bigBody)
        #expect(tooLarge.status == 413)
        #expect(tooLarge.text.hasPrefix(#"{"error":{"code":"body_too_large""#))
        let bigHeader = RawHTTPClient.request("GET", "/healthz", headers: ["X-Padding": String(repeating: "a", count: 40_000)])
        #expect(try await RawHTTPClient.exchange(port: http.port, chunks: [bigHeader], responses: 1).first?.status == 431)
        // Over 8 KiB but within the library's buffer: the node's own refusal, before the request
        // is handled, with room left for it.
        let overLimit = RawHTTPClient.request("GET", "/healthz", headers: ["X-Padding": String(repeating: "a", count: 8_500)])
        let refused = try await RawHTTPClient.exchange(port: http.port, chunks: [overLimit], responses: 1).first
        #expect(refused?.status == 431)
        #expect(refused?.text.hasPrefix(#"{"error":{"code":"headers_too_large""#) == true)
        // Headers within the 8 KiB allowed (a long bearer token, say) are served.
        let longHeader = RawHTTPClient.request("GET", "/healthz", headers: ["X-Padding": String(repeating: "a", count: 7_000)])
        #expect(try await RawHTTPClient.exchange(port: http.port, chunks: [longHeader], responses: 1).first?.status == 200)
        // A request line over the limit: 431 in the node's format, before the handler acts; the
        // like it carried was not done.
        let post = http.posts[0]
        let longLike = RawHTTPClient.request(
            "PUT", "/v1/posts/\(post)/likes/1?pad=" + String(repeating: "a", count: 20_000),
            token: HTTPHarness.apiToken)
        let refusedLike = try await RawHTTPClient.exchange(port: http.port, chunks: [longLike], responses: 1).first
        #expect(refusedLike?.status == 431)
        #expect(refusedLike?.text.hasPrefix(#"{"error":{"code":"headers_too_large""#) == true)
        // From under the limit to well past it, a like is done and answered 200, or refused
        // (414 or 431), or its connection closed without an answer — and then not done: a client
        // never sees a closed connection for a like that was done.
        var outcomes: [String: Int] = [:]
        func like(user: Int, query: String, _ what: String) async throws {
            let like = RawHTTPClient.request("PUT", "/v1/posts/\(post)/likes/\(user)?" + query, token: HTTPHarness.apiToken)
            let answer = try await RawHTTPClient.exchange(port: http.port, chunks: [like], responses: 1).first
            let outcome = answer.map { String($0.status) } ?? "closed"
            outcomes[outcome, default: 0] += 1
            #expect(["200", "414", "431", "closed"].contains(outcome), "\(what): \(outcome)")
        }
        for padding in stride(from: 7_600, through: 10_600, by: 20) {
            try await like(user: 100_000 + padding, query: "pad=" + String(repeating: "a", count: padding), "padding \(padding)")
        }
        // The same with 80 query arguments, whose records (56 bytes each) fill the buffer before
        // the bytes do: the library may close some of these connections while reading the head.
        for width in stride(from: 0, through: 116, by: 4) {
            let arguments = (0..<80).map { "a\($0)=" + String(repeating: "v", count: width) }.joined(separator: "&")
            try await like(user: 200_000 + width, query: arguments, "80 arguments of \(width) bytes")
        }
        let served = outcomes["200", default: 0]
        let count = try await http.send("GET", "/v1/posts/\(post)").text
        #expect(count.contains(#""likes_count":\#(served)"#), "\(outcomes) \(count)")
        let noVersion = Array("GET /healthz\r\n\r\n".utf8)
        #expect(try await RawHTTPClient.exchange(port: http.port, chunks: [noVersion], responses: 1).first?.status == 400)
        let badHeader = Array("GET /healthz HTTP/1.1\r\nHost: x\r\nnot a header\r\n\r\n".utf8)
        #expect(try await RawHTTPClient.exchange(port: http.port, chunks: [badHeader], responses: 1).first?.status == 400)
        // A version other than HTTP/1.x (the engine reads HTTP/2 by its preface, not its request
        // line), and a line that is not a request at all: 400, and the connection closed.
        let badVersion = Array("GET /healthz HTTP/7.0\r\nHost: x\r\n\r\n".utf8)
        let versionRefused = try await RawHTTPClient.exchange(port: http.port, chunks: [badVersion], responses: 2)
        #expect(versionRefused.map(\.status) == [400] && versionRefused.first?.headers["connection"] == "close")
        let garbage = try await RawHTTPClient.exchange(port: http.port, chunks: [Array("GARBAGE\r\n\r\n".utf8)], responses: 2)
        #expect(garbage.map(\.status) == [400] && garbage.first?.headers["connection"] == "close")
        #expect(try await http.send("GET", "/healthz", token: nil).status == 200)
        await http.stop()
    }

    @Test(
        "framing that intermediaries read differently is refused with 400 and the connection closed, before any body is read; a NUL byte in the target too; nothing changes",
        arguments: RedisTarget.allCases)
    func ambiguousFraming(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(redis: redis)
        let post = http.posts[0]
        _ = try await http.send("PUT", "/v1/posts/\(post)/likes/1")
        let auth = "Authorization: Bearer \(HTTPHarness.apiToken)\r\n"
        // Each carries, after what the node reads as its end, a second request: the unlike of user 1
        // a proxy that frames the first differently would have passed on as a request of its own.
        let smuggled = "DELETE /v1/posts/\(post)/likes/1 HTTP/1.1\r\nHost: x\r\n\(auth)\r\n"
        let chunkedBody = "0\r\n\r\n"
        let cases: [(String, [UInt8])] = [
            (
                "Content-Length and Transfer-Encoding",
                Array(
                    "POST /v1/posts/query HTTP/1.1\r\nHost: x\r\n\(auth)Content-Length: \(chunkedBody.utf8.count)\r\nTransfer-Encoding: chunked\r\n\r\n\(chunkedBody)\(smuggled)"
                        .utf8)
            ),
            (
                "Transfer-Encoding and Content-Length",
                Array(
                    "POST /v1/posts/query HTTP/1.1\r\nHost: x\r\n\(auth)Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n\(chunkedBody)\(smuggled)"
                        .utf8)
            ),
            (
                "two Content-Length values",
                Array(
                    "POST /v1/posts/query HTTP/1.1\r\nHost: x\r\n\(auth)Content-Length: 0\r\nContent-Length: \(smuggled.utf8.count)\r\n\r\n\(smuggled)"
                        .utf8)
            ),
            (
                "the same Content-Length twice",
                Array("POST /v1/posts/query HTTP/1.1\r\nHost: x\r\n\(auth)Content-Length: 0\r\nContent-Length: 0\r\n\r\n\(smuggled)".utf8)
            ),
            (
                "a transfer coding other than chunked",
                Array("POST /v1/posts/query HTTP/1.1\r\nHost: x\r\n\(auth)Transfer-Encoding: gzip, chunked\r\n\r\n\(chunkedBody)\(smuggled)".utf8)
            ),
            (
                "Transfer-Encoding twice",
                Array(
                    "POST /v1/posts/query HTTP/1.1\r\nHost: x\r\n\(auth)Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n\(chunkedBody)\(smuggled)"
                        .utf8)
            ),
            (
                "whitespace before the colon",
                Array(
                    "POST /v1/posts/query HTTP/1.1\r\nHost: x\r\n\(auth)Transfer-Encoding : chunked\r\nContent-Length: 0\r\n\r\n\(chunkedBody)\(smuggled)"
                        .utf8)
            ),
            (
                "a NUL byte in the target",
                Array("DELETE /v1/posts/\(post)/likes/1".utf8) + [0] + Array("7 HTTP/1.1\r\nHost: x\r\n\(auth)\r\n\(smuggled)".utf8)
            ),
        ]
        // Whitespace in a field name and a NUL byte in the target are refused by the engine's
        // parser itself, before the node sees the request: its own 400, not the node's JSON.
        let refusedByTheParser: Set = ["whitespace before the colon", "a NUL byte in the target"]
        for (name, bytes) in cases {
            let responses = try await RawHTTPClient.exchange(port: http.port, chunks: [bytes], responses: 2)
            #expect(responses.count == 1, "\(name): one answer, then the connection closes (\(responses.map(\.status)))")
            #expect(responses.first?.status == 400, "\(name)")
            let expectedBody = refusedByTheParser.contains(name) ? "Bad Request" : #"{"error":{"code":"bad_request","message":""#
            #expect(responses.first?.text.hasPrefix(expectedBody) == true, "\(name): \(responses.first?.text ?? "")")
            #expect(responses.first?.headers["connection"]?.lowercased() == "close", "\(name)")
        }
        // A Content-Length that is not a number is refused by the engine, before the node sees
        // the request, in the node's format.
        let badLength = Array("POST /v1/posts/query HTTP/1.1\r\nHost: x\r\n\(auth)Content-Length: 1x\r\n\r\n\(smuggled)".utf8)
        let refused = try await RawHTTPClient.exchange(port: http.port, chunks: [badLength], responses: 2)
        #expect(refused.count == 1 && refused.first?.status == 400, "\(refused.map(\.status))")
        #expect(refused.first?.text.hasPrefix(#"{"error":{"code":"bad_request","message":""#) == true, "\(refused.first?.text ?? "")")
        // A chunked body alone is read as usual.
        let chunked =
            Array("POST /v1/posts/query HTTP/1.1\r\nHost: x\r\n\(auth)Transfer-Encoding: chunked\r\n\r\n".utf8)
            + Array(String(format: "%x\r\n", #"{"post_ids":[\#(post)],"user_id":1}"#.utf8.count).utf8)
            + Array(#"{"post_ids":[\#(post)],"user_id":1}"#.utf8) + Array("\r\n0\r\n\r\n".utf8)
        let answered = try await RawHTTPClient.exchange(port: http.port, chunks: [chunked], responses: 1)
        #expect(answered.first?.status == 200, "\(answered.first?.text ?? "")")
        // Nothing changed: user 1 still likes the post.
        #expect(try await http.send("GET", "/v1/posts/\(post)/likes/1").text.contains(#""is_liked":true,"likes_count":1"#))
        await http.stop()
    }

    @Test("keep-alive pipelined requests split at every byte boundary get the same answers", arguments: RedisTarget.allCases)
    func splitAtEveryByte(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(redis: redis)
        let post = http.posts[0]
        let token = HTTPHarness.apiToken
        let requests =
            RawHTTPClient.request("PUT", "/v1/posts/\(post)/likes/3", token: token)
            + RawHTTPClient.request("GET", "/v1/posts/\(post)", token: token)
            + RawHTTPClient.request("POST", "/v1/posts/query", token: token, body: #"{"post_ids":[\#(post)],"user_id":3}"#)
            + RawHTTPClient.request("GET", "/healthz")
        let reference = try await RawHTTPClient.exchange(port: http.port, chunks: [requests], responses: 4).map(\.undated)
        #expect(reference.map(\.status) == [200, 200, 200, 200])
        #expect(reference[2].text == #"{"posts":[{"post_id":\#(post),"likes_count":1,"is_liked":true}]}"#)
        for split in 1..<requests.count {
            let answers = try await RawHTTPClient.exchange(
                port: http.port, chunks: [Array(requests[..<split]), Array(requests[split...])],
                responses: 4, pause: .milliseconds(1))
            #expect(answers.map(\.undated) == reference, "split at byte \(split)")
        }
        // Byte by byte, and in random pieces.
        let byteByByte = try await RawHTTPClient.exchange(port: http.port, chunks: requests.map { [$0] }, responses: 4)
        #expect(byteByByte.map(\.undated) == reference)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20 {
            var chunks: [[UInt8]] = []
            var start = 0
            while start < requests.count {
                let end = min(requests.count, start + Int.random(in: 1...40, using: &generator))
                chunks.append(Array(requests[start..<end]))
                start = end
            }
            #expect(
                try await RawHTTPClient.exchange(port: http.port, chunks: chunks, responses: 4, pause: .microseconds(200)).map(\.undated) == reference
            )
        }
        await http.stop()
    }

    @Test("concurrent toggles over HTTP on one post stay consistent with PostgreSQL", arguments: RedisTarget.allCases)
    func concurrentOverHTTP(redis: RedisTarget) async throws {
        let http = try await HTTPHarness.start(redis: redis)
        let post = http.posts[0]
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for user in 1...200 { group.addTask { try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)").status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.allSatisfy { $0 == 200 })
        #expect(try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        let counts = try await http.writePath.postgresCounts()
        #expect(counts[post]?.count == 200 && counts[post]?.rows == 200)
        await http.stop()
    }
}

@Suite("HTTP pieces (pure)")
struct HTTPPieceTests {
    @Test(
        "ids: positive 64-bit decimal integers only",
        arguments: [
            ("1", Int64(1)), ("9223372036854775807", Int64.max), ("007", Int64(7)),
            ("0", nil), ("-1", nil), ("+1", nil), ("abc", nil), ("", nil), ("9223372036854775808", nil),
            ("99999999999999999999", nil), ("1.0", nil), (" 1", nil),
        ] as [(String, Int64?)])
    func ids(text: String, expected: Int64?) {
        #expect(EntityID.parse(text) == expected)
        #expect(EntityID.parse(bytes: Array(text.utf8)) == expected)
    }

    @Test("paths map to their routes; a malformed id names itself; anything else is not found")
    func routes() {
        let expected: [(String, RouteMatch)] = [
            ("/healthz", found("/healthz")), ("/readyz", found("/readyz")), ("/metrics", found("/metrics")),
            ("/v1/posts/7/likes/9", found("/v1/posts/{post}/likes/{user}", post: 7, user: 9)),
            ("/v1/posts/7/likes/9/toggle", found("/v1/posts/{post}/likes/{user}/toggle", post: 7, user: 9)),
            ("/v1/posts/7", found("/v1/posts/{post}", post: 7)), ("/v1/posts/query", found("/v1/posts/query")),
            ("/admin/flush", found("/admin/flush")), ("/admin/stats", found("/admin/stats")), ("/admin/reconcile", found("/admin/reconcile")),
            ("/admin/posts/12", found("/admin/posts/{post}", post: 12)), ("/admin/dead-letters", found("/admin/dead-letters")),
            ("/admin/dead-letters/replay", found("/admin/dead-letters/replay")), ("/admin/dead-letters/drop", found("/admin/dead-letters/drop")),
            ("/v1/posts/x/likes/9", .invalidID("post id \"x\"")), ("/v1/posts/7/likes/0", .invalidID("user id \"0\"")),
            ("/v1/posts/-1", .invalidID("post id \"-1\"")), ("/admin/posts/", .invalidID("post id \"\"")),
            ("", .notFound), ("healthz", .notFound), ("/", .notFound), ("/healthz/", .notFound), ("/v1/posts/7/likes/9/toggle/x", .notFound),
            ("/v1/posts/7/likes/9/flip", .notFound), ("/v2/posts/7", .notFound), ("/admin/nothing", .notFound),
            ("/v1/posts/7/likes/9/toggle/x/y/z", .notFound), ("//healthz", .notFound),
            ("/v1/posts/7/like", found("/v1/posts/{post}/like", post: 7)),
            ("/v1/posts/7/like/toggle", found("/v1/posts/{post}/like/toggle", post: 7)),
            ("/api/posts/7/like", found("/api/posts/{id}/like", post: 7)), ("/v1/posts/0/like", .invalidID("post id \"0\"")),
            ("/api/posts/x/like", .invalidID("post id \"x\"")), ("/v1/posts/7/like/flip", .notFound), ("/api/posts/7/likes", .notFound),
            ("/api/posts/7", .notFound), ("/v1/posts/7/like/toggle/x", .notFound),
            // A literal wins over an id; where only an id fits, a word is a malformed id.
            ("/v1/posts/query/likes/9", .invalidID("post id \"query\"")),
            ("/v1/users/7/likes/pending", found("/v1/users/{user}/likes/pending", user: 7)),
            ("/v1/users/me/likes", .invalidID("user id \"me\"")), ("/v1/me/likes", found("/v1/me/likes")),
        ]
        for (path, route) in expected { #expect(APIRoutes.table.match(path) == route, "\(path)") }
    }

    @Test("the route table: paths unique and never ambiguous, each route's label its path, methods in Allow's order")
    func table() {
        let routes = APIRoutes.table.routes
        #expect(Set(routes.map(\.label)).count == routes.count)
        for (index, route) in routes.enumerated() {
            for other in routes[..<index] { #expect(!route.pattern.isAmbiguous(with: other.pattern), "\(route.label) \(other.label)") }
            #expect(route.allowed == route.methods.map(\.rawValue).joined(separator: ", "))
        }
        #expect(PathPattern("/v1/posts/{post}").isAmbiguous(with: PathPattern("/v1/posts/{id}")))
        #expect(PathPattern("/a/{post}/c").isAmbiguous(with: PathPattern("/{post}/b/c")))
        #expect(!PathPattern("/v1/posts/query").isAmbiguous(with: PathPattern("/v1/posts/{post}")))
        #expect(APIRoutes.table.route("/v1/posts/{post}/likes/{user}")?.allowed == "GET, PUT, DELETE")
    }

    @Test("token comparison does not depend on where tokens differ")
    func tokens() {
        let tokens = AccessTokens(api: "api-token-0123456789", admin: "admin-token-0123456789")
        #expect(tokens.refusal("Bearer api-token-0123456789", for: .api) == nil)
        #expect(tokens.refusal("Bearer admin-token-0123456789", for: .api) == nil)
        #expect(tokens.refusal("Bearer api-token-0123456789", for: .admin) != nil)
        #expect(tokens.refusal("Bearer api-token-012345678", for: .api) != nil)
        #expect(tokens.refusal("Basic abc", for: .api) != nil)
        #expect(tokens.refusal(nil, for: .open) == nil)
        #expect(AccessTokens().refusal(nil, for: .api) == nil)
    }
}

@Suite("Hot answers (pure)")
struct HotAnswersTests {
    @Test("the hand-written hot answers are exactly what the wire types encode")
    func sameBytesAsTheWireTypes() throws {
        let states = [
            LikeState(postID: 1, userID: 7, isLiked: true, likesCount: 124),
            LikeState(postID: .max, userID: .max, isLiked: false, likesCount: 0),
        ]
        for state in states {
            #expect(
                HotAnswers.likeStatus(state)
                    == (try WireEncoder.encode(
                        LikeStatus(postID: state.postID, userID: state.userID, isLiked: state.isLiked, likesCount: state.likesCount))))
            #expect(
                HotAnswers.postCount(postID: state.postID, likesCount: state.likesCount)
                    == (try WireEncoder.encode(PostCount(postID: state.postID, likesCount: state.likesCount))))
            #expect(HotAnswers.seedStatus(state) == (try WireEncoder.encode(SeedLikeStatus(isLiked: state.isLiked, likesCount: state.likesCount))))
        }
        for page in [[], states] {
            #expect(
                HotAnswers.feedPage(page)
                    == (try WireEncoder.encode(
                        FeedPage(posts: page.map { FeedEntry(postID: $0.postID, likesCount: $0.likesCount, isLiked: $0.isLiked) }))))
        }
        for message in ["post 9 does not exist", "no route GET /v1/x?\"a\"\\b\n\t\u{01}é"] {
            #expect(
                HotAnswers.error(code: "post_not_found", message: message)
                    == (try WireEncoder.encode(ErrorBody(code: "post_not_found", message: message))))
        }
    }
}

@Suite("Hot request bodies (pure)")
struct HotRequestsTests {
    /// What the wire's decoder makes of `body`: the query, or nil when it refuses it.
    static func decoded(_ body: String) -> FeedQuery? {
        try? WireDecoder.decode(FeedQuery.self, from: Array(body.utf8))
    }

    @Test("the hand-read feed query agrees with the wire's decoder, or leaves the body to it")
    func agreesWithTheDecoder() {
        let plain = [
            #"{"post_ids":[1,2,3],"user_id":7}"#, #" { "user_id" : 7 , "post_ids" : [ 1 , 2 ] } "#, "{\"post_ids\":[\n1,\t2],\"user_id\":9}\n",
            #"{"post_ids":[],"user_id":7}"#, #"{"post_ids":[0],"user_id":0}"#, #"{"post_ids":[9223372036854775807],"user_id":1}"#,
        ]
        // Left to the decoder (which accepts or refuses each with the precise reason):
        let leftToTheDecoder = [
            #"{"post_ids":[9223372036854775808],"user_id":1}"#, #"{"post_ids":[1.5],"user_id":7}"#, #"{"post_ids":[1e3],"user_id":7}"#,
            #"{"post_ids":[-1],"user_id":7}"#, #"{"post_ids":[01],"user_id":7}"#, #"{"post_ids":[1],"user_id":7,"extra":1}"#,
            #"{"post_ids":[1],"post_ids":[2],"user_id":7}"#, #"{"post_\u0069ds":[1],"user_id":7}"#, #"{"post_ids":"1","user_id":7}"#,
            #"{"post_ids":[1],"user_id":7} x"#, #"{"post_ids":[1,],"user_id":7}"#, #"{"post_ids":[1]}"#, #"[1]"#, "", "{",
            #"{"post_ids":[1] "user_id":7}"#, #"{"post_ids":[1],"user_id":null}"#,
        ]
        for body in plain {
            #expect(HotRequests.feedQuery(Array(body.utf8)) != nil, "\(body)")
            #expect(HotRequests.feedQuery(Array(body.utf8)) == Self.decoded(body), "\(body)")
        }
        for body in leftToTheDecoder {
            #expect(HotRequests.feedQuery(Array(body.utf8)) == nil, "\(body)")
        }
        // The plain shape is read by hand (the point of it).
        #expect(HotRequests.feedQuery(Array(#" { "user_id" : 7 , "post_ids" : [ 1 , 2 ] } "#.utf8)) == FeedQuery(postIDs: [1, 2], userID: 7))
    }

    @Test("an end user's feed query (user_id optional) is read by hand the same as by the wire's decoder")
    func ownQueryAgreesWithTheDecoder() {
        let bodies = [#"{"post_ids":[1,2]}"#, #"{"post_ids":[1],"user_id":7}"#, #" { "user_id" : 7 , "post_ids" : [ 3 ] } "#, #"{"post_ids":[]}"#]
        for body in bodies {
            let fast = HotRequests.ownFeedQuery(Array(body.utf8))
            #expect(fast != nil, "\(body)")
            #expect(fast == (try? WireDecoder.decode(OwnFeedQuery.self, from: Array(body.utf8))), "\(body)")
        }
        for body in [#"{"user_id":7}"#, #"{"post_ids":[1],"user":7}"#, #"{"post_ids":[1],"user_id":7,"user_id":8}"#, #"{"post_\u0069ds":[1]}"#] {
            #expect(HotRequests.ownFeedQuery(Array(body.utf8)) == nil, "\(body)")
        }
        #expect(HotRequests.ownFeedQuery(Array(#"{"post_ids":[1,2]}"#.utf8)) == OwnFeedQuery(postIDs: [1, 2]))
    }

    @Test("random feed queries in random spacing read the same both ways")
    func randomBodies() {
        var generator = SeededGenerator(seed: 12)
        for _ in 0..<2_000 {
            let ids = (0..<Int.random(in: 0...30, using: &generator)).map { _ in Int64.random(in: 0...Int64.max, using: &generator) }
            let user = Int64.random(in: 0...Int64.max, using: &generator)
            func space() -> String {
                String(repeating: [" ", "\n", "\t", ""][Int.random(in: 0...3, using: &generator)], count: Int.random(in: 0...2, using: &generator))
            }
            let idList = ids.map { space() + String($0) + space() }.joined(separator: ",")
            let members = [
                space() + #""post_ids""# + space() + ":" + space() + "[" + idList + "]" + space(),
                space() + #""user_id""# + space() + ":" + space() + String(user) + space(),
            ]
            let body = "{" + (Bool.random(using: &generator) ? members : members.reversed()).joined(separator: ",") + "}"
            let fast = HotRequests.feedQuery(Array(body.utf8))
            #expect(fast == FeedQuery(postIDs: ids, userID: user), "\(body)")
            #expect(fast == Self.decoded(body), "\(body)")
        }
    }
}

@Suite("The OpenAPI document and the router")
struct OpenAPIDocumentTests {
    @Test("the document names exactly the routes the router knows, with exactly their methods, and each path template matches its route")
    func routesMatchTheDocument() throws {
        let document = try #require(try JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json)) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        var documented: [String: Set<String>] = [:]
        for (path, item) in paths { documented[path] = Set(item.keys.filter { $0 != "parameters" }.map { $0.uppercased() }) }
        var routed: [String: Set<String>] = [:]
        for route in APIRoutes.table.routes { routed[route.label] = Set(route.methods.map(\.rawValue)) }
        #expect(routed == documented)
        // Each template, its parameters filled in, is matched to the route it documents.
        for template in documented.keys {
            let path = template.replacingOccurrences(of: "{post}", with: "7").replacingOccurrences(of: "{user}", with: "9").replacingOccurrences(
                of: "{kind}", with: "like"
            )
            .replacingOccurrences(of: "{id}", with: "7")
            #expect(APIRoutes.table.match(path).label == template, "\(path)")
        }
    }

    @Test("GET /openapi.json serves the document without a token")
    func served() async throws {
        let http = try await HTTPHarness.start(posts: 1)
        let answer = try await http.send("GET", "/openapi.json", token: nil)
        #expect(answer.status == 200 && answer.headers["content-type"] == "application/json")
        #expect(answer.body == OpenAPIDocument.json)
        await http.stop()
    }
}

/// The route `path` declares, as matched with `ids`.
func found(_ path: String, post: Int64 = 0, user: Int64 = 0) -> RouteMatch {
    guard let route = APIRoutes.table.route(path) else { return .invalidID("no route \(path) is declared") }
    return .found(route, PathIDs(post: post, user: user))
}
