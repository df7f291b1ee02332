import Foundation
import NodeHTTP
import NodeTestSupport
import Testing

@testable import NodeAPI

/// `POST /v1/cluster/forwarded` in process: each request of a batch answered as if it came alone.
@Suite("Forwarded batches: the route")
struct ForwardedBatchesTests {
    static func part(_ method: String, _ target: String, token: String? = HTTPHarness.apiToken) -> [UInt8] {
        var headers: [(name: String, value: String)] = [("Counter-Forwarded-By", "node-x")]
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        return PeerBatch.part(of: PeerClient.Request(method: method, target: target, headers: headers))
    }

    static func batch(_ api: InProcessAPI, _ parts: [[UInt8]]) async -> HTTPResponse {
        await api.api.answer(
            HTTPRequest(
                method: "POST", path: ForwardedBatches.path, headers: ["counter-forwarded-by": "node-x"], body: PeerBatch.body(ofParts: parts)))
    }

    @Test("a batch's requests each get their own answer, in order, through the whole API: toggles, reads, a refused token, an unknown route")
    func answersInOrder() async throws {
        let api = try await InProcessAPI.start(posts: 1)
        let post = api.posts[0]
        let response = await Self.batch(
            api,
            [
                Self.part("POST", "/v1/posts/\(post)/likes/7/toggle"),
                Self.part("PUT", "/v1/posts/\(post)/likes/8"),
                Self.part("POST", "/v1/posts/\(post)/likes/9/toggle", token: "wrong"),
                Self.part("GET", "/v1/posts/\(post)/likes/7"),
                Self.part("GET", "/nowhere"),
            ])
        #expect(response.status == 200 && response.contentType == PeerBatch.contentType)
        let answers = try PeerBatch.answers(from: response.body, expected: 5).get()
        #expect(answers.map(\.status) == [200, 200, 401, 200, 404])
        let bodies = answers.map { String(decoding: $0.body, as: UTF8.self) }
        // The toggle and the like ran together: their counts say which went first, not the batch's order.
        #expect(bodies[0].contains(#""user_id":7,"is_liked":true"#), "\(bodies[0])")
        #expect(bodies[1].contains(#""user_id":8,"is_liked":true"#), "\(bodies[1])")
        #expect(bodies[2].contains("unauthorized"))
        #expect(answers[0].headers.first?.name == "Content-Type" && answers[0].headers.first?.value == "application/json")
        // The refused request changed nothing.
        #expect(try await api.writePath.redisCount(post) == 2)
        #expect(try await !api.writePath.redisIsMember(post, 9))
        await api.stop()
    }

    @Test("a body that is not a batch, or a batch inside a batch, is refused 400 invalid_argument and nothing runs")
    func refused() async throws {
        let api = try await InProcessAPI.start(posts: 1)
        let post = api.posts[0]
        let garbage = await api.api.answer(HTTPRequest(method: "POST", path: ForwardedBatches.path, body: Array(#"{"a":1}"#.utf8)))
        #expect(garbage.status == 400 && String(decoding: garbage.body, as: UTF8.self).contains("invalid_argument"))
        let nested = await Self.batch(
            api, [Self.part("PUT", "/v1/posts/\(post)/likes/8"), Self.part("POST", ForwardedBatches.path)])
        #expect(nested.status == 400 && String(decoding: nested.body, as: UTF8.self).contains("itself a batch"))
        let count = await api.send("GET", "/v1/posts/\(post)")
        #expect(String(decoding: count.body, as: UTF8.self) == #"{"post_id":\#(post),"likes_count":0}"#)
        await api.stop()
    }
}
