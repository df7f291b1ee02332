import BenchKit
import NodeTestSupport
import TestSupport
import Testing

@Suite("Load generator against a node")
struct LoadGeneratorTests {
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
        let rows = try await http.writePath.pool.query("SELECT user_id, post_id FROM likes WHERE post_id = $1", [.int64(http.posts[0])])
        let members = Set(try rows.map { CorrectnessCheck.Pair(user: try $0.int64(0), post: try $0.int64(1)) })
        let counts = try await http.writePath.postgresCounts().mapValues { (likesCount: $0.count, rows: $0.rows) }
        let report = CorrectnessCheck.run(expected: result.expectations, baseline: [], members: members, counts: counts)
        #expect(report.passed, "lost \(report.lost.count), phantom \(report.phantom.count), drift \(report.drift.count)")
        #expect(report.checkedPairs >= result.successes)
        await http.stop()
    }

    @Test("open loop at a fixed rate sends about that many requests")
    func openLoopRate() async throws {
        let http = try await HTTPHarness.start(posts: 1)
        var options = LoadOptions()
        options.endpoints = [Endpoint(host: "127.0.0.1", port: http.port)]
        options.connections = 8
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
