import Foundation
import Synchronization
import TestSupport
import Testing

@testable import NodeHTTP

@Suite("Forwarded batches: the body format")
struct PeerBatchTests {
    static let requests = [
        PeerClient.Request(
            method: "POST", target: "/v1/posts/5/likes/7/toggle",
            headers: [("Counter-Forwarded-By", "node-1"), ("Authorization", "Bearer t0k3n"), ("Counter-User", "7")], body: []),
        PeerClient.Request(method: "GET", target: "/v1/posts/9?user=3&x=%31+", headers: [], body: []),
        PeerClient.Request(
            method: "PUT", target: "/v1/posts/1/likes/2", headers: [("Content-Type", "application/json")], body: [0, 13, 10, 255, 34]),
    ]

    @Test(
        "requests read back as the server reads them: target split but not decoded, Authorization apart, header names in lower case, bodies byte for byte"
    )
    func requestsRoundTrip() throws {
        let body = PeerBatch.body(ofParts: Self.requests.map(PeerBatch.part(of:)))
        let read = try PeerBatch.requests(from: body).get()
        #expect(read.count == 3)
        #expect(read[0].method == "POST" && read[0].path == "/v1/posts/5/likes/7/toggle" && read[0].rawQuery == "")
        #expect(read[0].authorization == "Bearer t0k3n")
        #expect(read[0].headers == ["counter-forwarded-by": "node-1", "counter-user": "7"])
        #expect(read[1].path == "/v1/posts/9" && read[1].rawQuery == "user=3&x=%31+" && read[1].query == ["user": "3", "x": "%31+"])
        #expect(read[1].authorization == nil)
        #expect(read[2].body == [0, 13, 10, 255, 34])
    }

    @Test("answers read back in order, with their headers and bodies; an empty batch is a batch")
    func answersRoundTrip() throws {
        let answers = [
            PeerBatch.Answer(status: 200, headers: [("Content-Type", "application/json")], body: Array(#"{"a":1}"#.utf8)),
            PeerBatch.Answer(status: 421, headers: [("Content-Type", "application/json"), ("Counter-Owner", "http://h:1")], body: []),
            PeerBatch.Answer(status: 503, headers: [("Retry-After", "1")], body: [0, 1, 2]),
        ]
        #expect(try PeerBatch.answers(from: PeerBatch.body(of: answers), expected: 3).get() == answers)
        #expect(try PeerBatch.answers(from: PeerBatch.body(of: []), expected: 0).get() == [])
        #expect(try PeerBatch.requests(from: PeerBatch.body(ofParts: [])).get().isEmpty)
    }

    @Test("every cut of a batch, and of its answer, is refused with a reason, never read as a shorter one")
    func truncated() {
        let body = PeerBatch.body(ofParts: Self.requests.map(PeerBatch.part(of:)))
        for length in 0..<body.count {
            guard case .failure(let malformed) = PeerBatch.requests(from: Array(body[0..<length])) else {
                Issue.record("a batch cut at \(length) of \(body.count) bytes was read")
                return
            }
            #expect(!malformed.reason.isEmpty)
        }
        let answer = PeerBatch.body(of: [PeerBatch.Answer(status: 200, headers: [("A", "b")], body: [1, 2, 3])])
        for length in 0..<answer.count {
            if case .success = PeerBatch.answers(from: Array(answer[0..<length]), expected: 1) {
                Issue.record("an answer cut at \(length) of \(answer.count) bytes was read")
            }
        }
    }

    @Test(
        "refused: another version, too many requests, bytes after the last, a count that is not the requests', a target that is not a path, a header value of two lines, a method not in capitals"
    )
    func refused() {
        func reason(_ bytes: [UInt8]) -> String? {
            if case .failure(let malformed) = PeerBatch.requests(from: bytes) { return malformed.reason }
            return nil
        }
        let good = PeerBatch.body(ofParts: [PeerBatch.part(of: Self.requests[1])])
        #expect(reason([2] + good.dropFirst())?.contains("version") == true)
        #expect(reason([1, 0, 0, 1, 1])?.contains("more than") == true)
        #expect(reason(good + [0])?.contains("after the last") == true)
        #expect(
            PeerBatch.answers(from: PeerBatch.body(of: [PeerBatch.Answer(status: 200, headers: [], body: [])]), expected: 2)
                .map { _ in "" } == .failure(PeerBatch.Malformed(reason: "1 answers for 2 requests")))
        let notAPath = PeerBatch.body(ofParts: [PeerBatch.part(of: PeerClient.Request(method: "GET", target: "http://elsewhere/"))])
        #expect(reason(notAPath)?.contains("not a path") == true)
        let twoLines = PeerBatch.body(
            ofParts: [PeerBatch.part(of: PeerClient.Request(method: "GET", target: "/", headers: [("Counter-User", "7\r\nX: y")]))])
        #expect(reason(twoLines)?.contains("one line") == true)
        let lower = PeerBatch.body(ofParts: [PeerBatch.part(of: PeerClient.Request(method: "get", target: "/"))])
        #expect(reason(lower)?.contains("capitals") == true)
    }
}

/// A server that answers batches (`PeerBatch`) on `/batch` — each request with its target and
/// credentials as the body — or refuses them with 404 (a node of an older version); it holds
/// the first request it gets until told, so the client's next requests queue behind it.
final class BatchAnsweringHandler: HTTPHandler {
    let refusesBatches: Bool
    private let state = Mutex<(requests: Int, batches: Int, held: (@Sendable (HTTPResponse) -> Void)?, holding: Bool)>((0, 0, nil, true))

    init(refusesBatches: Bool) { self.refusesBatches = refusesBatches }

    var requests: Int { state.withLock { $0.requests } }
    var batches: Int { state.withLock { $0.batches } }
    var isHolding: Bool { state.withLock { $0.held != nil } }
    /// Rings once the first request is held.
    let holding = Arrivals()

    static func echo(_ request: HTTPRequest) -> HTTPResponse {
        let target = request.path + (request.rawQuery.isEmpty ? "" : "?" + request.rawQuery)
        return HTTPResponse(
            status: 200, contentType: "text/plain", headers: ["Retry-After": "7"],
            body: Array("\(request.method) \(target) \(request.authorization ?? "-") \(request.headers["counter-forwarded-by"] ?? "-")".utf8))
    }

    func release() {
        let held = state.withLock { state -> (@Sendable (HTTPResponse) -> Void)? in
            state.holding = false
            defer { state.held = nil }
            return state.held
        }
        held?(HTTPResponse(status: 200, contentType: "text/plain", body: Array("first".utf8)))
    }

    var requestHeaders: [String] { ["Counter-Forwarded-By"] }

    func dispatch(_ request: HTTPRequest) -> HTTPDisposition {
        let first = state.withLock { state -> Bool in
            state.requests += 1
            if request.path == "/batch" { state.batches += 1 }
            return state.holding && state.requests == 1
        }
        if first {
            return .later { respond in
                self.state.withLock { $0.held = respond }
                self.holding.arrive()
            }
        }
        guard request.path == "/batch" else { return .respond(Self.echo(request)) }
        if refusesBatches { return .respond(HTTPResponse(status: 404, body: Array(#"{"error":{}}"#.utf8))) }
        switch PeerBatch.requests(from: request.body) {
        case .failure(let malformed): return .respond(HTTPResponse(status: 400, body: Array(malformed.reason.utf8)))
        case .success(let requests):
            let answers = requests.map { request in
                let response = Self.echo(request)
                return PeerBatch.Answer(
                    status: response.status, headers: [("Content-Type", response.contentType), ("Retry-After", "7")], body: response.body)
            }
            return .respond(HTTPResponse(status: 200, contentType: PeerBatch.contentType, body: PeerBatch.body(of: answers)))
        }
    }

    func response(for refusal: HTTPRefusal) -> HTTPResponse { HTTPResponse(status: 503, body: []) }
}

@Suite("Forwarded batches: the peer client")
struct PeerClientBatchingTests {
    /// Sends 100 batchable requests while the first is held, then releases it; every answer must
    /// be its own request's.
    static func sendHundred(refusesBatches: Bool) async throws -> BatchAnsweringHandler {
        let handler = BatchAnsweringHandler(refusesBatches: refusesBatches)
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let server = try HTTPServer(configuration: configuration, handler: handler)
        try server.start()
        let client = try PeerClient(
            batching: .init(target: "/batch", headers: [("Counter-Forwarded-By", "me")], maximumInFlight: 1))
        let base = "http://127.0.0.1:\(server.port)"
        let first = Task {
            await client.send(PeerClient.Request(method: "GET", target: "/first"), to: base, batchable: true)
        }
        await handler.holding.waitFor(1)
        #expect(handler.isHolding)
        let outcomes = Task {
            await withTaskGroup(of: (Int, PeerClient.Outcome).self) { group in
                for index in 0..<100 {
                    group.addTask {
                        let request = PeerClient.Request(
                            method: index % 2 == 0 ? "POST" : "GET", target: "/v1/posts/\(index)?user=\(index)",
                            headers: [("Authorization", "Bearer \(index)"), ("Counter-Forwarded-By", "me")])
                        return (index, await client.send(request, to: base, batchable: true))
                    }
                }
                var outcomes: [Int: PeerClient.Outcome] = [:]
                for await (index, outcome) in group { outcomes[index] = outcome }
                return outcomes
            }
        }
        // All 100 wait behind the held one (one flight at most), then go when it comes back.
        await client.waitUntilRequestsWaitingToBatch(atLeast: 100)
        #expect(client.requestsWaitingToBatch == 100)
        handler.release()
        guard case .answered(let firstAnswer) = await first.value else {
            Issue.record("the first request was not answered")
            return handler
        }
        #expect(firstAnswer.body == Array("first".utf8))
        let answered = await outcomes.value
        for index in 0..<100 {
            guard case .answered(let answer) = answered[index] else {
                Issue.record("request \(index): \(String(describing: answered[index]))")
                continue
            }
            let method = index % 2 == 0 ? "POST" : "GET"
            #expect(String(decoding: answer.body, as: UTF8.self) == "\(method) /v1/posts/\(index)?user=\(index) Bearer \(index) me")
            #expect(answer.headers["retry-after"] == "7" && answer.headers["content-type"] == "text/plain")
        }
        await server.stop()
        return handler
    }

    @Test("requests under way while a flight is out go together in one batch, and each gets its own answer", .timeLimit(.minutes(1)))
    func batched() async throws {
        let handler = try await Self.sendHundred(refusesBatches: false)
        // The held one alone, then the hundred in one batch.
        #expect(handler.requests == 2)
        #expect(handler.batches == 1)
    }

    @Test(
        "a peer without the batch route (404) ran none of it: the requests go again one by one, each answered once", .timeLimit(.minutes(1)))
    func peerWithoutBatches() async throws {
        let handler = try await Self.sendHundred(refusesBatches: true)
        #expect(handler.batches == 1)
        #expect(handler.requests == 1 + 1 + 100)
    }
}
