import NodeTestSupport
import TestSupport
import Testing

@Suite("The API over HTTP/2")
struct HTTP2APITests {
    @Test("400 likes on one post as 400 streams of one HTTP/2 connection: each answered, and Redis and PostgreSQL count exactly 400")
    func likesOverOneConnection() async throws {
        let http = try await HTTPHarness.start()
        let post = http.posts[0]
        let urls = (1...400).map { "http://127.0.0.1:\(http.port)/v1/posts/\(post)/likes/\($0)" }
        let result = try await Curl.nghttp(urls, headers: [":method: PUT", "authorization: Bearer \(HTTPHarness.apiToken)"])
        #expect(result.status == 0, "\(result.lines.suffix(2))")
        let answers = result.lines.joined()
        #expect(answers.components(separatedBy: #""is_liked":true"#).count - 1 == 400, "\(answers.prefix(300))")
        #expect(try await http.writePath.redisCount(post) == 400)
        #expect(try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        let counts = try await http.writePath.postgresCounts()
        #expect(counts[post]?.count == 400 && counts[post]?.rows == 400, "\(String(describing: counts[post]))")
        await http.stop()
    }
}
