import CounterWire
import Testing

@testable import BenchKit

@Suite("Latency histogram")
struct LatencyHistogramTests {
    /// The exact quantile of sorted samples, by the same rank rule.
    static func exact(_ sorted: [UInt64], _ q: Double) -> UInt64 {
        sorted[max(0, Int((q * Double(sorted.count)).rounded(.up)) - 1)]
    }

    @Test("percentiles stay within 1/128 of the exact value on known distributions", arguments: ["uniform", "exponential", "bimodal", "constant"])
    func relativeError(distribution: String) {
        var generator = SystemRandomNumberGenerator()
        let samples: [UInt64] = (0..<200_000).map { _ in
            switch distribution {
            case "uniform": return UInt64.random(in: 1...1_000_000, using: &generator)
            case "exponential": return UInt64(-log(Double.random(in: 0.000001..<1, using: &generator)) * 2_000) + 1
            case "bimodal":
                return Bool.random(using: &generator)
                    ? UInt64.random(in: 200...300, using: &generator) : UInt64.random(in: 40_000...60_000, using: &generator)
            default: return 4_321
            }
        }
        var histogram = LatencyHistogram()
        for sample in samples { histogram.record(sample) }
        let sorted = samples.sorted()
        for q in [0.5, 0.9, 0.99, 0.999] {
            let exact = Double(Self.exact(sorted, q))
            let estimate = Double(histogram.percentile(q))
            #expect(abs(estimate - exact) <= exact / 128 + 1, "\(distribution) p\(q * 100): \(estimate) vs \(exact)")
        }
        #expect(histogram.percentile(1) == sorted.last)
        #expect(histogram.maximum == sorted.last && histogram.minimum == sorted.first)
        #expect(histogram.total == UInt64(samples.count))
    }

    @Test("values below 128 µs are exact; merged histograms equal one fed everything")
    func exactAndMerge() {
        var a = LatencyHistogram()
        var b = LatencyHistogram()
        var both = LatencyHistogram()
        for value in 0..<128 {
            a.record(UInt64(value))
            both.record(UInt64(value))
        }
        for value in stride(from: 1_000, to: 100_000, by: 7) {
            b.record(UInt64(value))
            both.record(UInt64(value))
        }
        #expect(a.percentile(0.5) == 63)
        a.merge(b)
        #expect(a == both)
        #expect(LatencyHistogram().percentile(0.99) == 0)
    }

    @Test("every bucket's representative maps back to that bucket")
    func bucketsRoundTrip() {
        for index in 0..<LatencyHistogram.bucketCount {
            #expect(LatencyHistogram.index(of: LatencyHistogram.representative(of: index)) == index)
        }
    }
}

@Suite("Zipf distribution")
struct ZipfTests {
    @Test("sampled frequencies follow 1/rank^s", arguments: [0.0, 0.99, 1.2])
    func frequencies(exponent: Double) {
        let zipf = ZipfDistribution(count: 1_000, exponent: exponent)
        var generator = SystemRandomNumberGenerator()
        var hits = [Int](repeating: 0, count: 1_000)
        let draws = 400_000
        for _ in 0..<draws { hits[zipf.sample(using: &generator)] += 1 }
        for rank in [0, 1, 2, 9, 99] {
            let expected = zipf.probability(of: rank) * Double(draws)
            // Five standard deviations of a binomial count.
            let tolerance = 5 * expected.squareRoot() + 5
            #expect(abs(Double(hits[rank]) - expected) <= tolerance, "rank \(rank): \(hits[rank]) vs \(expected)")
        }
        if exponent > 0 {
            #expect(abs(zipf.probability(of: 0) / zipf.probability(of: 1) - (2.0).power(exponent)) < 1e-9)
        }
        #expect(abs((0..<1_000).map(zipf.probability(of:)).reduce(0, +) - 1) < 1e-9)
    }
}

@Suite("Correctness check")
struct CorrectnessCheckTests {
    typealias Pair = CorrectnessCheck.Pair

    static let expected: [Pair: CorrectnessCheck.Expectation] = [
        Pair(user: 1, post: 10): .liked(true),
        Pair(user: 2, post: 10): .liked(false),
        Pair(user: 3, post: 10): .either,
        Pair(user: 4, post: 11): .liked(true),
    ]

    @Test("a run whose database matches passes")
    func passes() {
        let report = CorrectnessCheck.run(
            expected: Self.expected, baseline: [Pair(user: 9, post: 11)],
            members: [Pair(user: 1, post: 10), Pair(user: 3, post: 10), Pair(user: 4, post: 11), Pair(user: 9, post: 11)],
            counts: [10: (2, 2), 11: (2, 2)])
        #expect(report.passed)
        #expect(report.undeterminedPairs == 1)
    }

    @Test("it reports a planted lost like")
    func lostLike() {
        let report = CorrectnessCheck.run(
            expected: Self.expected, baseline: [], members: [Pair(user: 1, post: 10)], counts: [10: (1, 1), 11: (0, 0)])
        #expect(report.lost == [Pair(user: 4, post: 11)])
        #expect(!report.passed)
    }

    @Test("it reports a planted phantom like, requested-not or never requested")
    func phantomLike() {
        let report = CorrectnessCheck.run(
            expected: Self.expected, baseline: [],
            members: [Pair(user: 1, post: 10), Pair(user: 2, post: 10), Pair(user: 4, post: 11), Pair(user: 77, post: 11)],
            counts: [10: (2, 2), 11: (2, 2)])
        #expect(report.phantom == [Pair(user: 2, post: 10), Pair(user: 77, post: 11)])
    }

    @Test("it reports a planted count drift")
    func drift() {
        let report = CorrectnessCheck.run(
            expected: Self.expected, baseline: [],
            members: [Pair(user: 1, post: 10), Pair(user: 4, post: 11)], counts: [10: (1, 1), 11: (3, 1)])
        #expect(report.drift == [CorrectnessCheck.Drift(post: 11, likesCount: 3, rows: 1)])
        #expect(!report.passed)
    }

    @Test("a toggle that succeeded counts; a refusal (4xx) changed nothing; a 5xx or no answer leaves the pair undetermined")
    func toggleTally() {
        var tally = CorrectnessCheck.ToggleTally()
        tally.record(expectation: .liked(true), status: 200)
        tally.record(expectation: .liked(false), status: 200)
        tally.record(expectation: .liked(true), status: 200)
        for status in [400, 401, 404, 429] { tally.record(expectation: .either, status: status) }
        #expect(tally == CorrectnessCheck.ToggleTally(successes: 3, uncertain: false))
        for status in [408, 500, 503, nil] as [Int?] {
            var failed = tally
            failed.record(expectation: .either, status: status)
            #expect(failed.uncertain, "\(String(describing: status))")
        }
    }

    @Test("by parity: a pair ends liked exactly when an odd number of its toggles succeeded; undetermined pairs and drift as usual")
    func parity() {
        let toggles: [Pair: CorrectnessCheck.ToggleTally] = [
            Pair(user: 1, post: 10): .init(successes: 3),
            Pair(user: 2, post: 10): .init(successes: 2),
            Pair(user: 3, post: 10): .init(successes: 1, uncertain: true),
            Pair(user: 4, post: 10): .init(successes: 0, uncertain: true),
        ]
        let good = CorrectnessCheck.runByParity(toggles: toggles, members: [Pair(user: 1, post: 10), Pair(user: 4, post: 10)], counts: [10: (2, 2)])
        #expect(good.passed && good.checkedPairs == 4 && good.undeterminedPairs == 2)
        let lost = CorrectnessCheck.runByParity(toggles: toggles, members: [], counts: [10: (0, 0)])
        #expect(lost.lost == [Pair(user: 1, post: 10)] && lost.phantom.isEmpty)
        let phantom = CorrectnessCheck.runByParity(
            toggles: toggles, members: [Pair(user: 1, post: 10), Pair(user: 2, post: 10), Pair(user: 9, post: 10)],
            counts: [10: (3, 3)])
        #expect(phantom.phantom == [Pair(user: 2, post: 10), Pair(user: 9, post: 10)] && phantom.lost.isEmpty)
        let drift = CorrectnessCheck.runByParity(toggles: toggles, members: [Pair(user: 1, post: 10)], counts: [10: (2, 1)])
        #expect(drift.drift == [CorrectnessCheck.Drift(post: 10, likesCount: 2, rows: 1)] && !drift.passed)
    }
}

#if canImport(Glibc)
    import Glibc
#endif

@Suite("HTML report")
struct HTMLReportTests {
    @Test("a self-contained page with the table, a chart per run, and escaped labels")
    func page() {
        var result = LoadResult()
        for value in [100, 200, 5_000] as [UInt64] { result.histogram.record(value) }
        result.statuses = [200: 3]
        result.measuredSeconds = 1
        result.throughputTimeline = [1, 2]
        let html = HTMLReport.render(
            title: "bench <run>", runs: [HTMLReport.Run(label: "hot & <cold>", connections: 64, result: result, verdict: "check passed")])
        #expect(html.hasPrefix("<!doctype html>"))
        #expect(html.contains("bench &lt;run&gt;"))
        #expect(html.contains("hot &amp; &lt;cold&gt;"))
        #expect(!html.contains("<cold>"))
        #expect(html.components(separatedBy: "<svg").count - 1 == 2)
        #expect(html.contains("<td>3</td>"))
        #expect(!html.contains("<script"))
    }
}

@Suite("Bench request bodies (pure)")
struct BenchBodyTests {
    @Test("the feed bodies the bench sends are exactly the wire's FeedQuery")
    func feedBodyIsTheWireFormat() throws {
        for ids in [[Int64(1)], [4_000_000_000_000_000_123, 7, .max], Array(1...100)] {
            #expect(ScenarioWorkload.feedBody(ids, user: 42) == (try WireEncoder.text(FeedQuery(postIDs: ids, userID: 42))))
        }
    }
    @Test("with user tokens, each connection writes on the user routes as its own user, with its own token")
    func userTokenWrites() {
        for (operation, line) in [
            (WriteOperation.toggle, "POST /v1/posts/9/like/toggle"), (.like, "PUT /v1/posts/9/like"), (.unlike, "DELETE /v1/posts/9/like"),
        ] {
            var workload = ScenarioWorkload(
                scenario: .hot, operation: operation, posts: [9], zipfExponent: 0.99, readRatio: 0,
                token: "service", userBase: 1_000, usersPerConnection: 100)
            workload.userTokens = ["t0", "t1", "t2"]
            var random = SystemRandomNumberGenerator()
            for (connection, sequence) in [(0, 0), (0, 5), (1, 0), (4, 3)] {
                let request = workload.request(connection: connection, sequence: sequence, random: &random)
                let text = String(decoding: request.bytes, as: UTF8.self)
                #expect(text.hasPrefix(line + " HTTP/1.1\r\n"), "\(text)")
                #expect(text.contains("Authorization: Bearer t\(connection % 3)\r\n"))
                #expect(request.pair == CorrectnessCheck.Pair(user: 1_000 + Int64(connection) * 100 + 1, post: 9))
            }
        }
    }

    @Test("on the seed's route every write is POST /api/posts/{id}/like with a token signed for the request's own user")
    func seedRouteWrites() {
        var workload = ScenarioWorkload(
            scenario: .hot, operation: .toggle, posts: [9], zipfExponent: 0.99, readRatio: 0,
            token: "service", userBase: 1_000, usersPerConnection: 100)
        workload.seedRouteToken = { user in "token-of-\(user)" }
        var random = SystemRandomNumberGenerator()
        for (connection, sequence) in [(0, 0), (0, 5), (3, 2)] {
            let request = workload.request(connection: connection, sequence: sequence, random: &random)
            let user = 1_000 + Int64(connection) * 100 + 1 + Int64(sequence)
            let text = String(decoding: request.bytes, as: UTF8.self)
            #expect(text.hasPrefix("POST /api/posts/9/like HTTP/1.1\r\n"), "\(text)")
            #expect(text.contains("Authorization: Bearer token-of-\(user)\r\n"))
            #expect(request.pair == CorrectnessCheck.Pair(user: user, post: 9))
        }
    }

    @Test("a storm of shared users: every connection draws from the same few users and posts")
    func sharedStormUsers() {
        var workload = ScenarioWorkload(
            scenario: .storm, operation: .toggle, posts: [1, 2, 3, 4, 5], zipfExponent: 0.99, readRatio: 0,
            token: "service", userBase: 1_000, usersPerConnection: 100)
        workload.sharedStormUsers = 3
        var random = SystemRandomNumberGenerator()
        var pairs: [Int: Set<CorrectnessCheck.Pair>] = [:]
        for connection in 0..<4 {
            for sequence in 0..<200 {
                pairs[connection, default: []].insert(workload.request(connection: connection, sequence: sequence, random: &random).pair!)
            }
        }
        let every = Set((1_001...1_003).flatMap { user in (1...4).map { CorrectnessCheck.Pair(user: Int64(user), post: Int64($0)) } })
        for connection in 0..<4 { #expect(pairs[connection] == every) }
    }
}

@Suite("A node's /metrics as the bench reads them (pure)")
struct NodeMetricsTextTests {
    static let text = """
        # HELP process_cpu_seconds_total CPU.
        process_cpu_seconds_total 12.5
        counter_write_behind_lag_seconds_bucket{le="0.1"} 10
        counter_write_behind_lag_seconds_bucket{le="0.2"} 90
        counter_write_behind_lag_seconds_bucket{le="1.0"} 100
        counter_write_behind_lag_seconds_bucket{le="+Inf"} 100
        counter_write_behind_lag_seconds_count 100
        counter_hot_reads_total{shard="0"} 30
        counter_hot_reads_total{shard="1"} 60
        counter_cold_reads_total{shard="0"} 10
        """

    @Test("CPU seconds, cumulative lag buckets and hot and cold reads (summed over shards) are read; other lines are skipped")
    func parses() {
        let figures = NodeMetricsText(parsing: Self.text)
        #expect(figures.cpuSeconds == 12.5)
        #expect(figures.hotReads == 90 && figures.coldReads == 10)
        #expect(figures.lagBuckets == [0.1: 10, 0.2: 90, 1.0: 100, .infinity: 100])
        #expect(NodeMetricsText(parsing: "nothing here\n").cpuSeconds == nil)
    }

    @Test("quantiles interpolate inside their bucket, as histogram_quantile does")
    func quantiles() throws {
        let buckets = NodeMetricsText(parsing: Self.text).lagBuckets
        // The 50th of 100 lies 40 of 80 into (0.1, 0.2]; the 99th 9 of 10 into (0.2, 1].
        #expect(abs(try #require(NodeMetricsText.quantile(0.5, of: buckets)) - 0.15) < 1e-9)
        #expect(abs(try #require(NodeMetricsText.quantile(0.99, of: buckets)) - 0.92) < 1e-9)
        // The first bucket starts at 0.
        #expect(abs(try #require(NodeMetricsText.quantile(0.05, of: buckets)) - 0.05) < 1e-9)
        // Past the last finite bound: that bound.
        #expect(NodeMetricsText.quantile(0.99, of: [1: 1, .infinity: 10]) == 1)
        #expect(NodeMetricsText.quantile(0.5, of: [1: 0, .infinity: 0]) == nil)
        #expect(NodeMetricsText.quantile(0.5, of: [:]) == nil)
    }
}

@Suite("RESP framing and the redis-lua workload (pure)")
struct RESPFramingTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test("complete replies are framed whole, errors are told apart, incomplete ones wait")
    func frames() {
        #expect(RESPFraming.reply(Self.bytes("+OK\r\n"))! == (5, false))
        #expect(RESPFraming.reply(Self.bytes("-NOSCRIPT no\r\n+OK\r\n"))! == (14, true))
        #expect(RESPFraming.reply(Self.bytes(":42\r\n"))! == (5, false))
        #expect(RESPFraming.reply(Self.bytes("$3\r\nabc\r\n"))! == (9, false))
        #expect(RESPFraming.reply(Self.bytes("$-1\r\n"))! == (5, false))
        #expect(RESPFraming.reply(Self.bytes("*2\r\n:1\r\n:17\r\n:9\r\n"))! == (13, false)) // the next reply is not part of it
        #expect(RESPFraming.reply(Self.bytes("*2\r\n*1\r\n$1\r\nx\r\n:1\r\n"))! == (19, false))
        for partial in ["", "+OK", "+OK\r", "$3\r\nab", "$3\r\nabc\r", "*2\r\n:1\r\n", "*2\r\n:1\r\n:1"] {
            #expect(RESPFraming.reply(Self.bytes(partial)) == nil, "\(partial.debugDescription)")
        }
        #expect(RESPFraming.reply(Self.bytes("HTTP/1.1 200 OK\r\n")) == nil)
    }

    @Test("each request is an EVALSHA of the script on the key, for a new user of the connection")
    func requests() {
        let workload = RedisLuaToggleWorkload(sha: "abc", key: "k", userBase: 1_000, usersPerConnection: 10)
        var random = SystemRandomNumberGenerator()
        let first = workload.request(connection: 2, sequence: 3, random: &random)
        #expect(String(decoding: first.bytes, as: UTF8.self) == "*5\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$1\r\nk\r\n$4\r\n1024\r\n")
        #expect(first.pair == nil)
    }
}

@Suite("Spread likes workload (pure)")
struct SpreadLikesWorkloadTests {
    @Test("requests walk every post once per round, each pair once, whichever connection sends them")
    func walks() {
        let workload = SpreadLikesWorkload(firstPost: 100, posts: 3, userBase: 1_000, token: nil)
        var random = SystemRandomNumberGenerator()
        var lines: [String] = []
        for (connection, sequence) in [(0, 0), (1, 0), (0, 1), (1, 1), (1, 2), (0, 2), (1, 3)] {
            let text = String(decoding: workload.request(connection: connection, sequence: sequence, random: &random).bytes, as: UTF8.self)
            lines.append(String(text.split(separator: "\r\n").first ?? ""))
        }
        #expect(
            lines == [
                "PUT /v1/posts/100/likes/1000 HTTP/1.1", "PUT /v1/posts/101/likes/1000 HTTP/1.1", "PUT /v1/posts/102/likes/1000 HTTP/1.1",
                "PUT /v1/posts/100/likes/1001 HTTP/1.1", "PUT /v1/posts/101/likes/1001 HTTP/1.1", "PUT /v1/posts/102/likes/1001 HTTP/1.1",
                "PUT /v1/posts/100/likes/1002 HTTP/1.1",
            ])
        #expect(workload.sent == 7)
    }
}

@Suite("The load generator's response parsing (pure)")
struct ResponseParsingTests {
    @Test("status, body and length of a complete response, whatever the header's case; nothing until it is whole")
    func parses() throws {
        let body = #"{"post_id":1,"user_id":7,"is_liked":true,"likes_count":3}"#
        let text =
            "HTTP/1.1 200 OK\r\nconnection: Keep-Alive\r\nCONTENT-LENGTH:  \(body.utf8.count)\r\nContent-Type: application/json\r\n\r\n\(body)HTTP/1.1 2"
        let bytes = Array(text.utf8)
        let (status, parsed, used) = try #require(EventLoop.parseResponse(bytes))
        #expect(status == 200)
        #expect(String(decoding: parsed, as: UTF8.self) == body)
        #expect(used == bytes.count - "HTTP/1.1 2".utf8.count)
        #expect(EventLoop.expectation(status: status, body: parsed) == .liked(true))
        #expect(EventLoop.parseResponse(Array(bytes[..<(used - 1)])) == nil)
        // No length: an empty body.
        let empty = Array("HTTP/1.1 204 No Content\r\nX-Content-Length-Note: 5\r\n\r\n".utf8)
        #expect(try #require(EventLoop.parseResponse(empty)).2 == empty.count)
        #expect(EventLoop.expectation(status: 200, body: Array(#"{"is_liked":false}"#.utf8)[...]) == .liked(false))
        #expect(EventLoop.expectation(status: 503, body: Array(#"{"is_liked":true}"#.utf8)[...]) == .either)
        #expect(EventLoop.expectation(status: 200, body: Array(#"{"likes_count":3}"#.utf8)[...]) == .either)
    }

    @Test("a reaction answer's own kinds, sorted, from a slice of a larger buffer; none, one or several; nil without mine")
    func reactionKinds() {
        func kinds(_ body: String) -> [String]? {
            // The body inside a buffer with bytes before and after it, as the event loop reads it.
            let buffer = Array(("HTTP/1.1 200 OK\r\n\r\n" + body + "HTTP/1.1").utf8)
            let start = 19
            return EventLoop.kinds(in: buffer[start..<(start + body.utf8.count)])
        }
        let prefix = #"{"post_id":1,"user_id":7,"reactions":{"love":2,"like":1},"total":3,"#
        #expect(kinds(prefix + #""mine":[]}"#) == [])
        #expect(kinds(prefix + #""mine":["love"]}"#) == ["love"])
        #expect(kinds(prefix + #""mine":["wow","like","a_very_long_kind_name_of_32_char"]}"#) == ["a_very_long_kind_name_of_32_char", "like", "wow"])
        #expect(kinds(#"{"post_id":1,"is_liked":true}"#) == nil)
        #expect(kinds(prefix + #""mine":["love""#) == nil)
        #expect(EventLoop.expectation(status: 200, body: Array((prefix + #""mine":["love"]}"#).utf8)[...]) == .holds(["love"]))
    }

    @Test("a chunked answer (nginx in front of PHP): its chunks joined, trailers skipped, nothing until the last chunk and the empty line")
    func chunked() throws {
        let next = "HTTP/1.1 2"
        for (chunks, trailer) in [
            ([#"{"is_liked":true,"likes_count":1}"#], ""), ([#"{"is_liked""#, #":false,"likes"#, #"_count":0}"#], "X-Trailer: 1\r\n"),
        ] {
            var text = "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            for chunk in chunks { text += String(chunk.utf8.count, radix: 16, uppercase: true) + "\r\n" + chunk + "\r\n" }
            text += "0\r\n" + trailer + "\r\n"
            let bytes = Array((text + next).utf8)
            let (status, parsed, used) = try #require(EventLoop.parseResponse(bytes))
            #expect(status == 200)
            #expect(String(decoding: parsed, as: UTF8.self) == chunks.joined())
            #expect(used == bytes.count - next.utf8.count)
            for cut in [used - 1, used - 3, used - 10] { #expect(EventLoop.parseResponse(Array(bytes[..<cut])) == nil) }
        }
        let lowercase = Array("HTTP/1.1 404 Not Found\r\ntransfer-encoding: Chunked\r\n\r\na;ext=1\r\n0123456789\r\n0\r\n\r\n".utf8)
        let (status, parsed, used) = try #require(EventLoop.parseResponse(lowercase))
        #expect(status == 404 && String(decoding: parsed, as: UTF8.self) == "0123456789" && used == lowercase.count)
    }
}

@Suite("The comparison report (pure)")
struct ComparisonReportTests {
    static func row(_ series: String, _ connections: Int, _ throughput: Double, lag: (Double, Double)? = nil, cpu: Double? = nil)
        -> ComparisonReport.Row
    {
        ComparisonReport.Row(
            series: series, label: "\(series) row", connections: connections, throughput: throughput,
            latency: (1, 2, 3), failures: 0, nodeCPU: cpu, lag: lag.map { ($0.0, $0.1) }, verdict: "check passed")
    }

    @Test("ratios lead, then a log-scale line per target across levels, latency per level, lag and CPU bars, and every row; no scripts")
    func page() {
        let rows = [
            Self.row("hot", 64, 30_000, lag: (100, 300), cpu: 25), Self.row("seed-sql", 64, 150), Self.row("ceiling", 64, 100_000),
            Self.row("hot", 256, 35_000, lag: (110, 290), cpu: 24), Self.row("seed-sql", 256, 40), Self.row("ceiling", 256, 110_000),
            Self.row("zipf", 256, 20_000, cpu: 38),
        ]
        let html = ComparisonReport.render(title: "A <title>", context: "2 cores", rows: rows, ratios: ["At 64 connections: 200× & more"])
        #expect(html.contains("A &lt;title&gt;") && html.contains("200× &amp; more"))
        #expect(html.range(of: "200× &amp; more")!.lowerBound < html.range(of: "Throughput by connections")!.lowerBound)
        // One line for each target measured at the levels (the zipf row is not one), in its colour.
        #expect(html.components(separatedBy: "<polyline").count - 1 == 3)
        #expect(html.contains("stroke=\"#1f6feb\"") && html.contains("stroke=\"#cf222e\"") && !html.contains("stroke=\"#8250df\""))
        // A log axis: the decades from 10 to 1M for throughputs from 40 to 110,000.
        #expect(html.contains(">10<") && html.contains(">1M<"))
        #expect(html.contains("64 connections") && html.contains("256 connections"))
        #expect(html.contains("Write-behind lag") && html.contains("100.0 / 300.0 ms"))
        #expect(html.contains("Node CPU per request") && html.contains("38.0 µs"))
        #expect(html.components(separatedBy: "<tr><td>").count - 1 == rows.count)
        #expect(!html.contains("<script"))
    }

    @Test("log axes span whole decades around the values")
    func decades() {
        #expect(ComparisonReport.decades([40, 110_000]) == (1, 6))
        #expect(ComparisonReport.decades([0.5, 3]) == (-1, 1))
        #expect(ComparisonReport.decades([100]) == (2, 3))
        #expect(ComparisonReport.grouped(1_000_000) == "1M" && ComparisonReport.grouped(10_000) == "10k" && ComparisonReport.grouped(0.1) == "0.1")
    }
}

@Suite("A workload's request as HTTP/2 fields")
struct HTTP2RequestFieldsTests {
    private func text(_ fields: HTTP2RequestFields) -> [String] {
        fields.fields.map { String(decoding: fields.bytes[$0.name], as: UTF8.self) + ": " + String(decoding: fields.bytes[$0.value], as: UTF8.self) }
    }

    @Test("the request line becomes the pseudo-headers, Host the authority, names lower-case, the target as sent")
    func requestLine() throws {
        let request = ScenarioWorkload.http("PUT", "/v1/posts/7/likes/9?x=%41+b", token: "secret", body: nil)
        let fields = try #require(HTTP2RequestFields(http1: request))
        #expect(
            text(fields) == [
                ":method: PUT", ":scheme: http", ":authority: bench", ":path: /v1/posts/7/likes/9?x=%41+b", "authorization: Bearer secret",
            ])
        #expect(fields.body.isEmpty)
    }

    @Test("a body is kept with its length; fields HTTP/2 forbids are left out")
    func bodyAndForbiddenFields() throws {
        let request = Array(
            "POST /v1/posts/query HTTP/1.1\r\nHost: h:1\r\nConnection: keep-alive\r\nTransfer-Encoding: identity\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{\"ids\":1"
                .utf8)
        let fields = try #require(HTTP2RequestFields(http1: request))
        #expect(
            text(fields) == [
                ":method: POST", ":scheme: http", ":authority: h:1", ":path: /v1/posts/query", "content-type: application/json", "content-length: 8",
            ])
        #expect(String(decoding: fields.bytes[fields.body], as: UTF8.self) == "{\"ids\":1")
    }

    @Test(
        "bytes that are not a whole HTTP/1 head are refused",
        arguments: ["", "GET / HTTP/1.1\r\n", "GET\r\n\r\n", "GET / HTTP/1.1\r\nno colon\r\n\r\n"])
    func refused(request: String) {
        #expect(HTTP2RequestFields(http1: Array(request.utf8)) == nil)
    }
}
