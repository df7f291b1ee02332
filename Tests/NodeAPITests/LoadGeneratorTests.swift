import BenchKit
import NodeHTTP
import NodeTestSupport
import Synchronization
import TestSupport
import Testing

@Suite("Load generator against a node")
struct LoadGeneratorTests {
    /// The run's expectations against what PostgreSQL holds for the harness's first post (the
    /// bench's correctness check).
    static func check(_ result: LoadResult, against http: HTTPHarness) async throws -> CorrectnessCheck.Report {
        let rows = try await http.writePath.pool.query("SELECT user_id, post_id FROM likes WHERE post_id = $1", [.int64(http.posts[0])])
        let members = Set(try rows.map { CorrectnessCheck.Pair(user: try $0.int64(0), post: try $0.int64(1)) })
        let counts = try await http.writePath.postgresCounts().mapValues { (likesCount: $0.count, rows: $0.rows) }
        return CorrectnessCheck.run(expected: result.expectations, baseline: [], members: members, counts: counts)
    }

    @Test("closed loop on the hot scenario: answers counted, every pair's final state checked in PostgreSQL", arguments: ["toggle", "like"])
    func closedLoopHot(operation: String) async throws {
        let http = try await HTTPHarness.start(posts: 1)
        // Touch the post first, so the run does not begin with its hydration.
        #expect(try await http.send("GET", "/v1/posts/\(http.posts[0])").status == 200)
        var options = LoadOptions()
        options.endpoints = [Endpoint(host: "127.0.0.1", port: http.port)]
        options.connections = 16
        // Long enough that a machine busy with the other tests still answers many requests.
        options.duration = .seconds(3)
        options.warmup = .zero
        let workload = ScenarioWorkload(
            scenario: .hot, operation: WriteOperation(rawValue: operation)!, posts: http.posts,
            zipfExponent: 0.99, readRatio: 0, token: HTTPHarness.apiToken, userBase: 1_000_000)
        let result = await LoadGenerator(options: options, workload: workload).run { _, _, _, _ in }
        #expect(result.successes > 0)
        #expect(result.failures == 0)
        #expect(result.histogram.total == UInt64(result.successes))
        _ = try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken)
        let report = try await Self.check(result, against: http)
        #expect(report.passed, "lost \(report.lost.count), phantom \(report.phantom.count), drift \(report.drift.count)")
        #expect(report.checkedPairs >= result.successes)
        await http.stop()
    }

    @Test("closed loop over HTTP/2: 2 connections × 8 streams of toggles, every answer counted, every pair checked, the node saw HTTP/2")
    func closedLoopHTTP2() async throws {
        let http = try await HTTPHarness.start(posts: 1)
        #expect(try await http.send("GET", "/v1/posts/\(http.posts[0])").status == 200)
        var options = LoadOptions()
        options.endpoints = [Endpoint(host: "127.0.0.1", port: http.port)]
        options.connections = 16
        options.wire = .http2(streamsPerConnection: 8)
        options.threads = 2
        options.duration = .seconds(3)
        options.warmup = .zero
        let workload = ScenarioWorkload(
            scenario: .hot, operation: .toggle, posts: http.posts, zipfExponent: 0.99, readRatio: 0, token: HTTPHarness.apiToken,
            userBase: 3_000_000)
        let result = await LoadGenerator(options: options, workload: workload).run { _, _, _, _ in }
        #expect(result.successes > 0)
        #expect(result.failures == 0, "\(result.errors)")
        _ = try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken)
        let report = try await Self.check(result, against: http)
        #expect(report.passed, "lost \(report.lost.count), phantom \(report.phantom.count), drift \(report.drift.count)")
        #expect(report.checkedPairs >= result.successes)
        // Every request came over HTTP/2 (the warm-up's GET and the flush are HTTP/1.1).
        #expect(try await http.requestsOverHTTP2() >= result.successes)
        await http.stop()
    }

    @Test("over HTTP/2, a node that stops mid-run fails the streams in flight (no answer, no lost pair) and the generator ends")
    func http2NodeStops() async throws {
        let http = try await HTTPHarness.start(posts: 1)
        var options = LoadOptions()
        options.endpoints = [Endpoint(host: "127.0.0.1", port: http.port)]
        options.connections = 8
        options.wire = .http2(streamsPerConnection: 4)
        options.duration = .seconds(3)
        options.warmup = .zero
        options.timeout = .seconds(2)
        let workload = ScenarioWorkload(
            scenario: .hot, operation: .toggle, posts: http.posts, zipfExponent: 0.99, readRatio: 0, token: HTTPHarness.apiToken,
            userBase: 4_000_000)
        let answered = FirstAnswers()
        let generator = LoadGenerator(options: options, workload: workload)
        async let run = generator.run { second, count, _, _ in answered.add(count, last: second >= 3) }
        // Stopped once answers flow (at the first second's progress that counted some), while
        // streams are open; a machine too slow to answer any by the end fails the test, no hang.
        await answered.wait()
        await http.server.stop()
        let result = await run
        #expect(result.successes > 0)
        // Once stopped, the node is unreachable: what was in flight and what followed failed.
        #expect(result.failures > 0, "\(result.errors)")
        // The write path flushes everything as it stops: every answered pair has the state its
        // last answer gave, and the count matches the rows.
        await http.writePath.stopService()
        let report = try await Self.check(result, against: http)
        #expect(report.passed, "lost \(report.lost.count), phantom \(report.phantom.count), drift \(report.drift.count)")
        await http.writePath.stop()
        try? await http.requests.stop()
    }

    @Test("over HTTP/2, requests a server never answers time out: every client's fail as timeouts, each sends again, the run ends on time")
    func http2Timeouts() async throws {
        let handler = SilentHandler()
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let server = try HTTPServer(configuration: configuration, handler: handler)
        try server.start()
        var options = LoadOptions()
        options.endpoints = [Endpoint(host: "127.0.0.1", port: server.port)]
        options.connections = 4
        options.wire = .http2(streamsPerConnection: 2)
        options.duration = .seconds(3)
        options.warmup = .zero
        options.timeout = .seconds(1)
        let result = await LoadGenerator(options: options, workload: FixedPathWorkload(path: "/hold")).run { _, _, _, _ in }
        #expect(result.successes == 0)
        #expect((result.errors["timeout"] ?? 0) >= 4, "\(result.errors)")
        // Every client sent again after its timeout (no client stuck on its first request).
        #expect(handler.held.count >= 8, "\(handler.held.count) requests")
        handler.answerAll()
        await server.stop()
    }

    @Test(
        "open loop at a fixed rate sends about that many requests, over HTTP/1.1 and over HTTP/2 (2 connections × 4 streams)",
        arguments: [false, true])
    func openLoopRate(http2: Bool) async throws {
        let http = try await HTTPHarness.start(posts: 1)
        var options = LoadOptions()
        options.endpoints = [Endpoint(host: "127.0.0.1", port: http.port)]
        options.connections = 8
        if http2 { options.wire = .http2(streamsPerConnection: 4) }
        options.duration = .seconds(2)
        options.warmup = .zero
        options.rate = 200
        let result = await LoadGenerator(options: options, workload: FixedPathWorkload(path: "/healthz")).run { _, _, _, _ in }
        // 200/s for 2 s: about 400 answers (the schedule, not the server, sets the pace).
        #expect(result.successes >= 300 && result.successes <= 420, "\(result.successes) answers")
        await http.stop()
    }

    @Test(
        "the HTTP loop never waits for a periodic wake-up: 1, 128 and 256 ready connections and answers given from other threads",
        .serialized, arguments: [1, 128, 256])
    func noStalls(connections: Int) async throws {
        let http = try await HTTPHarness.start(posts: 1)
        #expect(try await http.send("GET", "/v1/posts/\(http.posts[0])").status == 200)
        var options = LoadOptions()
        options.endpoints = [Endpoint(host: "127.0.0.1", port: http.port)]
        options.connections = connections
        options.duration = .seconds(2)
        options.warmup = .zero
        // A stalled request would sit until this timeout and count as a failure (a busy
        // machine may delay an answer, but not by seconds).
        options.timeout = .seconds(5)
        let workload = ScenarioWorkload(
            scenario: .hot, operation: .toggle, posts: http.posts,
            zipfExponent: 0.99, readRatio: 0, token: HTTPHarness.apiToken, userBase: 2_000_000)
        let result = await LoadGenerator(options: options, workload: workload).run { _, _, _, _ in }
        #expect(result.failures == 0, "\(result.errors)")
        #expect(result.successes >= connections)
        // Suspended requests are answered when they are resumed, not at the loop's next 50 ms
        // wake-up: a lost wake-up made every answer on one connection take about 50 ms, so even
        // the fastest tenth would (a machine busy with other tests slows some, not all).
        if connections == 1 { #expect(result.histogram.percentile(0.1) < 25_000, "p10 \(result.histogram.percentile(0.1)) µs") }
        await http.stop()
    }
}

/// Resumes a waiter once the progress callback has reported answers, or the run's last second.
private final class FirstAnswers: Sendable {
    private let state = Mutex<(seen: Int, waiter: CheckedContinuation<Void, Never>?, done: Bool)>((0, nil, false))

    func add(_ answers: Int, last: Bool) {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            state.seen += answers
            guard state.seen > 0 || last, !state.done else { return nil }
            state.done = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.done { return true }
                state.waiter = continuation
                return false
            }
            if ready { continuation.resume() }
        }
    }
}

/// Holds every request unanswered until `answerAll`.
private final class SilentHandler: HTTPHandler {
    let held = Held()

    final class Held: Sendable {
        private let answers = Mutex<[@Sendable (HTTPResponse) -> Void]>([])
        var count: Int { answers.withLock { $0.count } }
        func add(_ respond: @escaping @Sendable (HTTPResponse) -> Void) { answers.withLock { $0.append(respond) } }
        func takeAll() -> [@Sendable (HTTPResponse) -> Void] {
            answers.withLock { held in
                defer { held = [] }
                return held
            }
        }
    }

    func dispatch(_ request: HTTPRequest) -> HTTPDisposition {
        .later { respond in self.held.add(respond) }
    }

    func answerAll() {
        for respond in held.takeAll() { respond(HTTPResponse(status: 200, body: Array("{}".utf8))) }
    }

    func response(for refusal: HTTPRefusal) -> HTTPResponse { HTTPResponse(status: 503, body: []) }
}
