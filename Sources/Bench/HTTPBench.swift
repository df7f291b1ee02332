import BenchKit
import CounterCore
import Foundation
import PostgresDriver
import UserTokens

/// Options of `counter-bench http`.
struct HTTPBenchOptions {
    var scenario = "hot"
    var operation = WriteOperation.toggle
    var load = LoadOptions()
    var posts = 1_000
    var zipfExponent = 0.99
    var readRatio = 0.9
    /// Posts per feed page (`nil`: 20 to 100 at random).
    var feedSize: Int?
    var path = "/healthz"
    var apiToken: String?
    var adminToken: String?
    /// The node's HS256 secret for end users' tokens (`--user-token-secret`,
    /// `COUNTER_USER_TOKEN_SECRET`), with which `--user-tokens` signs one token per connection.
    var userTokenSecret: String?
    /// Writes go to the user routes, each connection as its own user with its own token.
    var userTokens = false
    /// `storm` with this many users every connection shares (checked by parity); `nil`: each
    /// connection its own users.
    var sharedStormUsers: Int64?
    /// `reactions`: the kinds drawn (the node's `--reactions` must list them).
    var reactionKinds = ["like", "love", "haha", "wow", "sad", "angry"]
    /// `reactions`: the node's `--reactions-per-user`; with `one`, the check also counts answers
    /// and rows that show a user with two kinds.
    var reactionsPerUser = "one"
    /// `reactions`: users per connection, in turn (a storm of changes of kind); `nil`: a new
    /// user for every request.
    var reactionUsers: Int64?
    var check = true
    /// Send each post's requests to its slot's owner, by the map of `/v1/cluster`.
    var slotAware = false
    /// Spread the connections over every live node of the cluster, whatever the post (as a
    /// round-robin load balancer would; nodes forward what they do not own).
    var spread = false
    var jsonPath: String?
    var htmlPath: String?
    var servers: BenchServers
    /// HTTP/2 with this many streams per connection (`--http2`, `--streams`); `nil`: HTTP/1.1.
    var http2Streams: Int?
    /// The TCP connections asked for (`--connections`); over HTTP/2 each carries
    /// `http2Streams` clients, so `load.connections` counts the clients.
    var tcpConnections: Int { http2Streams.map { load.connections / $0 } ?? load.connections }

    init(arguments: [String], environment: [String: String]) throws {
        servers = BenchServers(environment: environment)
        apiToken = environment["COUNTER_API_TOKEN"]
        adminToken = environment["COUNTER_ADMIN_TOKEN"]
        userTokenSecret = environment["COUNTER_USER_TOKEN_SECRET"]
        var reader = BenchArguments(arguments)
        try reader.forEachFlag { flag, reader in
            switch flag {
            case "--scenario":
                scenario = try reader.value(flag)
                guard Scenario(rawValue: scenario) != nil || scenario == "ceiling" else {
                    throw BenchUsageError(message: "--scenario \(scenario): must be hot, zipf, storm, feed, mixed, lists, reactions or ceiling")
                }
            case "--operation":
                let text = try reader.value(flag)
                guard let value = WriteOperation(rawValue: text) else {
                    throw BenchUsageError(message: "--operation \(text): must be toggle, like or unlike")
                }
                operation = value
            case "--connections": load.connections = try reader.number(flag, 1...20_000)
            case "--threads": load.threads = try reader.number(flag, 1...64)
            case "--duration": load.duration = .seconds(try reader.number(flag, 1...3_600))
            case "--warmup": load.warmup = .seconds(try reader.number(flag, 0...600))
            case "--rate": load.rate = Double(try reader.number(flag, 1...10_000_000))
            case "--timeout": load.timeout = .seconds(try reader.number(flag, 1...600))
            case "--posts": posts = try reader.number(flag, 1...1_000_000)
            case "--zipf-exponent":
                let text = try reader.value(flag)
                guard let value = Double(text), (0...5).contains(value) else {
                    throw BenchUsageError(message: "--zipf-exponent \(text): must be from 0 to 5")
                }
                zipfExponent = value
            case "--feed-size": feedSize = try reader.number(flag, 1...1_000)
            case "--read-ratio":
                let text = try reader.value(flag)
                guard let value = Double(text), (0...1).contains(value) else {
                    throw BenchUsageError(message: "--read-ratio \(text): must be from 0 to 1")
                }
                readRatio = value
            case "--url":
                do {
                    load.endpoints = [try Endpoint(url: try reader.value(flag))]
                } catch let error as Endpoint.Invalid {
                    throw BenchUsageError(message: "--url \(error.message)")
                }
            case "--slot-aware": slotAware = true
            case "--spread": spread = true
            case "--path": path = try reader.value(flag)
            case "--api-token": apiToken = try reader.value(flag)
            case "--admin-token": adminToken = try reader.value(flag)
            case "--user-token-secret": userTokenSecret = try reader.value(flag)
            case "--user-tokens": userTokens = true
            case "--storm-users": sharedStormUsers = Int64(try reader.number(flag, 1...1_000_000))
            case "--reaction-kinds":
                let text = try reader.value(flag)
                let kinds = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
                guard !kinds.isEmpty, kinds.allSatisfy({ ReactionKind($0) != nil }), Set(kinds).count == kinds.count else {
                    throw BenchUsageError(
                        message: "--reaction-kinds \(text): must be distinct names of 1-32 characters of a-z, 0-9 and _, comma-separated")
                }
                reactionKinds = kinds
            case "--reaction-users": reactionUsers = Int64(try reader.number(flag, 1...1_000_000))
            case "--reactions-per-user":
                let text = try reader.value(flag)
                guard text == "one" || text == "many" else { throw BenchUsageError(message: "--reactions-per-user \(text): must be one or many") }
                reactionsPerUser = text
            case "--http2": http2Streams = http2Streams ?? 32
            case "--streams": http2Streams = try reader.number(flag, 1...100)
            case "--no-check": check = false
            case "--json": jsonPath = try reader.value(flag)
            case "--html": htmlPath = try reader.value(flag)
            default: return try servers.take(flag, from: &reader)
            }
            return true
        }
        if slotAware && spread { throw BenchUsageError(message: "--slot-aware and --spread: choose one") }
        if let streams = http2Streams {
            guard load.connections * streams <= 200_000 else {
                throw BenchUsageError(message: "--connections \(load.connections) × --streams \(streams): at most 200000 clients in all")
            }
            // --connections counts TCP connections, as h2load's -c does; each carries `streams`
            // clients (h2load's -m), and the load counts the clients.
            load.connections *= streams
            load.wire = .http2(streamsPerConnection: streams)
        }
        if userTokens && userTokenSecret.map(HMACSecret.init) == nil {
            throw BenchUsageError(
                message: "--user-tokens signs with --user-token-secret (or COUNTER_USER_TOKEN_SECRET), the node's secret of at least 32 bytes")
        }
    }
}

/// `counter-bench http`: one scenario against a running node over real sockets, then (for
/// write scenarios) the correctness check against PostgreSQL.
struct HTTPBench {
    let options: HTTPBenchOptions

    func run() async throws {
        let warmupSeconds = Int(options.load.warmup.inSeconds)
        let (result, check) = try await measure { second, count, failures, p99 in
            if second <= warmupSeconds {
                print("  [\(second) s] warming up")
            } else {
                print(String(format: "  [%3d s] %8d req/s  failures %d  p99 so far %.2f ms", second, count, failures, Double(p99) / 1_000))
            }
        }
        let summary = Summary(label: label, connections: options.load.connections, result: result.load, nodeCPU: result.nodeCPU, lag: result.lag)
        print("")
        print(Summary.header)
        print(summary.row)
        let statuses = result.load.statusesText
        let errors = result.load.errorsText
        print("  answers by status: \(statuses.isEmpty ? "none" : statuses); errors: \(errors.isEmpty ? "none" : errors)")
        if let ratio = result.readHitRatio {
            print(String(format: "  reads answered from Redis: %.1f %% (the rest from PostgreSQL: cold posts)", ratio * 100))
        }
        if let path = options.jsonPath {
            try Data(summary.json(check: check).utf8).write(to: URL(fileURLWithPath: path))
            print("  result written to \(path)")
        }
        if let path = options.htmlPath {
            let verdict = check.map { $0.passed ? "check passed" : "CHECK FAILED" }
            let page = HTMLReport.render(
                title: "counter-bench: \(label)",
                runs: [HTMLReport.Run(label: label, connections: options.load.connections, result: result.load, verdict: verdict)])
            try Data(page.utf8).write(to: URL(fileURLWithPath: path))
            print("  report written to \(path)")
        }
        if let check, !check.passed { throw BenchCheckFailure(message: "correctness check FAILED") }
    }

    var label: String {
        let target = Scenario(rawValue: options.scenario) == nil ? "GET \(options.path)" : "\(options.scenario) (\(options.operation.rawValue))"
        let routed = options.slotAware ? target + ", slot-aware" : options.spread ? target + ", spread" : target
        let signed = options.userTokens ? routed + ", user tokens" : routed
        return options.http2Streams.map { signed + ", HTTP/2 \(options.tcpConnections)×\($0)" } ?? signed
    }

    /// What one run measured: the load, the CPU the nodes spent per request (all nodes of the
    /// cluster, over the measured seconds) and, for writes, how long the changes waited for
    /// PostgreSQL, when the nodes tell it.
    struct Measured {
        var load: LoadResult
        /// Node CPU microseconds per answered request.
        var nodeCPU: Double?
        /// Acknowledgement → PostgreSQL commit of the changes committed from the end of the
        /// warm-up to the flush after the run, in milliseconds.
        var lag: (p50: Double, p99: Double)?
        /// The share of reads the nodes answered from Redis rather than PostgreSQL.
        var readHitRatio: Double?
    }

    /// Where the requests go: the node at `--url`; every node in turn (`--spread`); or each
    /// post's owner (`--slot-aware`).
    private func route(over cluster: ClusterView) throws -> ([Endpoint], ScenarioWorkload.Routing) {
        if options.spread {
            print("counter-bench http: connections spread over \(cluster.nodes.map(\.description).joined(separator: ", "))")
            return (cluster.nodes, .spread(count: cluster.nodes.count))
        }
        guard options.slotAware else { return (options.load.endpoints, .first) }
        guard let map = cluster.map else {
            throw BenchCheckFailure(message: "--slot-aware: \(options.load.endpoints[0]) runs alone (GET /v1/cluster answered 404)")
        }
        let routes: SlotAwareRoutes
        do {
            routes = try SlotAwareRoutes(map: map)
        } catch {
            throw BenchCheckFailure(message: "--slot-aware: \(error)")
        }
        let owners = zip(routes.nodeIDs, zip(routes.endpoints, routes.slotCounts)).map { "\($0.0) \($0.1.0) (\($0.1.1) slots)" }
        print("counter-bench http: slot-aware over \(owners.joined(separator: ", "))")
        return (routes.endpoints, .slotAware(routes))
    }

    /// Runs the load (creating and afterwards deleting its posts) and, for write scenarios, the
    /// correctness check.
    func measure(progress: @escaping @Sendable (Int, Int, Int, UInt64) -> Void) async throws -> (Measured, CorrectnessCheck.Report?) {
        let cluster = try ClusterView.read(from: options.load.endpoints[0], token: options.apiToken)
        var load = options.load
        let routing: ScenarioWorkload.Routing
        (load.endpoints, routing) = try route(over: cluster)
        let pool = PostgresPool(configuration: PostgresConfiguration(url: options.servers.postgresURL))
        defer { Task { await pool.close() } }
        let workload: any Workload
        var posts: [Int64] = []
        let scenario = Scenario(rawValue: options.scenario)
        if let scenario {
            let count = scenario == .hot || scenario == .reactions ? 1 : scenario == .storm ? 4 : options.posts
            let base = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
            posts = (0..<Int64(count)).map { base + $0 }
            try await pool.query("INSERT INTO posts (id) SELECT unnest($1::bigint[])", [.int64Array(posts)])
            try await SeededPostsUpkeep.run(afterSeeding: posts.count, pool: pool)
            var scenarioWorkload = ScenarioWorkload(
                scenario: scenario, operation: options.operation, posts: posts,
                zipfExponent: options.zipfExponent, readRatio: options.readRatio, token: options.apiToken,
                userBase: Int64.random(in: 1...1_000_000) * 1_000_000_000)
            scenarioWorkload.routing = routing
            scenarioWorkload.feedSize = options.feedSize
            scenarioWorkload.sharedStormUsers = scenario == .storm ? options.sharedStormUsers : nil
            scenarioWorkload.reactionKinds = options.reactionKinds
            scenarioWorkload.reactionUsersPerConnection = options.reactionUsers
            if options.userTokens, let secret = options.userTokenSecret {
                let signer = TokenSigner(secret: secret)
                scenarioWorkload.userTokens = (0..<load.connections).map {
                    signer.token(user: scenarioWorkload.tokenUser(ofConnection: $0), lifetime: 3_600)
                }
            }
            workload = scenarioWorkload
        } else {
            workload = FixedPathWorkload(path: options.path, token: options.apiToken)
        }
        let mode = options.load.rate.map { "open loop at \(Int($0)) req/s" } ?? "closed loop"
        let connections =
            options.http2Streams.map { "\(options.tcpConnections) HTTP/2 connections × \($0) streams" } ?? "\(options.load.connections) connections"
        print(
            "counter-bench http: \(label), \(connections), \(mode), \(Int(options.load.duration.inSeconds)) s after \(Int(options.load.warmup.inSeconds)) s warm-up"
        )
        // The nodes' counters at the end of the warm-up, at the end of the run (CPU) and after
        // the flush that follows it (lag).
        let metrics = NodeMetricsWindow(cluster: cluster, token: options.adminToken ?? options.apiToken)
        let warmupSeconds = Int(load.warmup.inSeconds)
        let lastSecond = warmupSeconds + Int(load.duration.inSeconds)
        if warmupSeconds == 0 { metrics.mark(.start) }
        let result = await LoadGenerator(options: load, workload: workload).run { second, count, failures, p99 in
            if second == warmupSeconds { metrics.mark(.start) }
            if second == lastSecond { metrics.mark(.endOfRun) }
            progress(second, count, failures, p99)
        }
        var check: CorrectnessCheck.Report?
        if options.check, scenario == .reactions {
            check = try await verifyReactions(posts: posts, result: result, pool: pool, cluster: cluster)
        } else if options.check, let scenario, scenario.writes {
            check = try await verify(
                posts: posts, result: result, byParity: scenario == .storm && options.sharedStormUsers != nil, pool: pool, cluster: cluster)
        }
        if !posts.isEmpty {
            // Flushed first (the check did already): deleting posts whose changes a node is still
            // writing deadlocks with its flush in PostgreSQL.
            if check == nil, scenario?.writes == true { try cluster.flushAll(token: options.adminToken) }
            if scenario?.writes == true { metrics.mark(.afterFlush) }
            let gone = try await pool.query(
                "WITH gone AS (DELETE FROM posts p USING unnest($1::bigint[]) AS gone(id) WHERE p.id = gone.id RETURNING p.likes_count) SELECT coalesce(sum(likes_count), 0)::bigint FROM gone",
                [.int64Array(posts)])
            await SeededPostsUpkeep.run(afterDeleting: posts.count, likes: try gone.first?.int64(0) ?? 0, pool: pool)
        }
        return (
            Measured(
                load: result, nodeCPU: metrics.microsecondsPerRequest(throughput: result.throughput),
                lag: metrics.lagMilliseconds(), readHitRatio: metrics.readHitRatio()), check
        )
    }

    /// The reaction run's check: each pair's kinds as its last answer listed, each kind's count
    /// equal to its rows, and with one kind per user no answer or row showing two.
    private func verifyReactions(posts: [Int64], result: LoadResult, pool: PostgresPool, cluster: ClusterView) async throws
        -> CorrectnessCheck.Report
    {
        try cluster.flushAll(token: options.adminToken)
        let reactions = try await PostgresReactions.read(posts, pool: pool)
        let onePerUser = options.reactionsPerUser == "one"
        let report = CorrectnessCheck.runReactions(
            expected: result.expectations, held: reactions.held, counts: reactions.counts, onePerUser: onePerUser,
            severalKindsAnswers: result.severalKindsAnswers)
        let rows = reactions.held.values.reduce(0) { $0 + $1.count }
        print(
            "  correctness: \(report.checkedPairs) pairs (\(report.undeterminedPairs) undetermined), \(rows) rows of \(reactions.counts.count) kinds"
                + (onePerUser ? ", \(result.severalKindsAnswers) answers showing two kinds" : "") + " — "
                + (report.passed
                    ? "PASSED"
                    : "FAILED: \(report.lost.count) lost, \(report.phantom.count) phantom, \(report.drift.count) count drifts, \(report.severalKindsHeld.count) users holding two kinds")
        )
        for pair in report.lost.prefix(5) { print("    lost \(pair)") }
        for pair in report.phantom.prefix(5) { print("    phantom \(pair)") }
        for drift in report.drift.prefix(5) {
            print("    drift post \(drift.post) \(drift.kind ?? "like"): count \(drift.likesCount), rows \(drift.rows)")
        }
        for pair in report.severalKindsHeld.prefix(5) { print("    two kinds \(pair)") }
        return report
    }

    private func verify(
        posts: [Int64], result: LoadResult, byParity: Bool,
        pool: PostgresPool, cluster: ClusterView
    ) async throws -> CorrectnessCheck.Report {
        try cluster.flushAll(token: options.adminToken)
        let likes = try await PostgresLikes.read(posts, pool: pool)
        let members = Set(likes.pairs)
        let report =
            byParity
            ? CorrectnessCheck.runByParity(toggles: result.toggles, members: members, counts: likes.counts)
            : CorrectnessCheck.run(expected: result.expectations, baseline: [], members: members, counts: likes.counts)
        print(
            "  correctness: \(report.checkedPairs) pairs (\(report.undeterminedPairs) undetermined), \(members.count) likes rows, \(posts.count) posts — "
                + (report.passed
                    ? "PASSED" : "FAILED: \(report.lost.count) lost, \(report.phantom.count) phantom, \(report.drift.count) count drifts"))
        for pair in report.lost.prefix(5) { print("    lost \(pair)") }
        for pair in report.phantom.prefix(5) { print("    phantom \(pair)") }
        for drift in report.drift.prefix(5) { print("    drift post \(drift.post): likes_count \(drift.likesCount), rows \(drift.rows)") }
        return report
    }
}

/// The end-of-run table and JSON.
struct Summary {
    let label: String
    let connections: Int
    let result: LoadResult
    /// Node CPU microseconds per request (every node of the cluster), when measured.
    var nodeCPU: Double? = nil
    /// Write rows: acknowledgement → PostgreSQL commit, p50 and p99 in milliseconds.
    var lag: (p50: Double, p99: Double)? = nil
    /// Which line of the comparison the row belongs to across levels (`hot`, `seed-sql`, …).
    var series = ""

    static let header =
        "  " + pad("target", 34) + pad("conns", 7, left: true) + pad("req/s", 10, left: true)
        + ["p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"].map { pad($0, 10, left: true) }.joined() + pad("failures", 10, left: true)
        + pad("node µs/req", 13, left: true) + pad("lag p50/p99 ms", 16, left: true)

    var row: String {
        let h = result.histogram
        let latencies = [h.percentile(0.5), h.percentile(0.9), h.percentile(0.99), h.percentile(0.999), h.maximum]
        return "  " + Self.pad(label, 34) + Self.pad(String(connections), 7, left: true)
            + Self.pad(String(Int(result.throughput.rounded())), 10, left: true)
            + latencies.map { Self.pad(String(format: "%.2f", Double($0) / 1_000), 10, left: true) }.joined()
            + Self.pad(String(result.failures), 10, left: true)
            + Self.pad(nodeCPU.map { String(format: "%.1f", $0) } ?? "-", 13, left: true)
            + Self.pad(lag.map { String(format: "%.0f/%.0f", $0.p50, $0.p99) } ?? "-", 16, left: true)
    }

    static func pad(_ text: String, _ width: Int, left: Bool = false) -> String {
        let padding = String(repeating: " ", count: max(0, width - text.count))
        return left ? padding + text : text + padding
    }

    func json(check: CorrectnessCheck.Report?) -> String {
        let h = result.histogram
        var fields = [
            "\"target\":\"\(label)\"", "\"connections\":\(connections)",
            "\"throughput\":\(result.throughput)", "\"successes\":\(result.successes)", "\"failures\":\(result.failures)",
        ]
        for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
            fields.append("\"\(name)_us\":\(h.percentile(q))")
        }
        fields.append("\"max_us\":\(h.maximum)")
        if let nodeCPU { fields.append("\"node_cpu_us_per_request\":\(String(format: "%.2f", nodeCPU))") }
        if let lag {
            fields.append("\"lag_p50_ms\":\(String(format: "%.1f", lag.p50))")
            fields.append("\"lag_p99_ms\":\(String(format: "%.1f", lag.p99))")
        }
        fields.append("\"throughput_timeline\":[\(result.throughputTimeline.map(String.init).joined(separator: ","))]")
        fields.append("\"p99_timeline_us\":[\(result.p99Timeline.map(String.init).joined(separator: ","))]")
        fields.append("\"failure_timeline\":[\(result.failureTimeline.map(String.init).joined(separator: ","))]")
        fields.append("\"errors\":{\(result.errors.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ","))}")
        if let check {
            fields.append(
                "\"check\":{\"passed\":\(check.passed),\"lost\":\(check.lost.count),\"phantom\":\(check.phantom.count),\"drift\":\(check.drift.count)}"
            )
        }
        return "{" + fields.joined(separator: ",") + "}\n"
    }
}
