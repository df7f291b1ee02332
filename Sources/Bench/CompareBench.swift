import BenchKit
import Foundation
import PostgresDriver
import UserTokens

/// `counter-bench compare`: the standard comparison in one invocation — the node's `hot`
/// scenario (and, with `--cluster-url`, a second node's on a Redis Cluster), the `seed-sql` and
/// `sql-upsert` baselines, the seed's own Laravel endpoint (`laravel-seed`, with `--seed-app-url`),
/// the `/healthz` ceiling and the `redis-lua` peer (the same toggle as a Lua script in the node's
/// Redis, over RESP) at each concurrency level, then `zipf`, `feed`, `storm` (and, beside the
/// seed's endpoint, a storm of users every connection shares), `mixed` and `lists`; with `--nodes-url`, `hot` and `zipf` on a cluster of several
/// nodes, spread over them (forwarding) and slot-aware; with `--reactions-url`, `reactions` on a
/// node that serves them; `hot` and the ceiling over HTTP/2 (`--http2 64x32`) — and the ratios
/// measured in this run.
struct CompareBench {
    var levels = [64, 256, 1_000]
    var duration = 10
    var warmup = 2
    var http: HTTPBenchOptions
    /// A node on a Redis Cluster, measured on `hot` beside the main node.
    var clusterNode: Endpoint?
    /// A node of a cluster of several nodes, measured on `hot` and `zipf` beside the main node.
    var severalNodes: Endpoint?
    /// The seed's Laravel endpoint (`scripts/seed-app`), measured beside the node.
    var seedApp: SeedAppTarget?
    /// A node serving reactions (`--reactions` listing the bench's kinds), measured on
    /// `reactions` beside the main node's `hot`.
    var reactionsNode: Endpoint?
    /// The HTTP/2 rows' shape (`--http2 64x32`): TCP connections × streams each; `nil`: no
    /// HTTP/2 rows (`--http2 none`).
    var http2Shape: (connections: Int, streams: Int)? = (64, 32)

    init(arguments: [String], environment: [String: String]) throws {
        var passThrough: [String] = []
        var reader = BenchArguments(arguments)
        var levels = self.levels
        var duration = 10
        var warmup = 2
        var clusterNode: Endpoint?
        var severalNodes: Endpoint?
        var reactionsNode: Endpoint?
        var http2Shape = self.http2Shape
        var seedAppURL = environment["COUNTER_SEED_APP_URL"]
        var seedAppPostgresURL = environment["COUNTER_SEED_APP_DATABASE_URL"]
        try reader.forEachFlag { flag, reader in
            switch flag {
            case "--seed-app-url": seedAppURL = try reader.value(flag)
            case "--seed-app-postgres-url": seedAppPostgresURL = try reader.value(flag)
            case "--cluster-url", "--nodes-url", "--reactions-url":
                let endpoint: Endpoint
                do {
                    endpoint = try Endpoint(url: try reader.value(flag))
                } catch let error as Endpoint.Invalid {
                    throw BenchUsageError(message: "\(flag) \(error.message)")
                }
                switch flag {
                case "--cluster-url": clusterNode = endpoint
                case "--nodes-url": severalNodes = endpoint
                default: reactionsNode = endpoint
                }
            case "--levels":
                let text = try reader.value(flag)
                let parsed = text.split(separator: ",").compactMap { Int($0) }
                guard !parsed.isEmpty, parsed.allSatisfy({ (1...20_000).contains($0) }) else {
                    throw BenchUsageError(message: "--levels \(text): must be connection counts like 64,256,1000")
                }
                levels = parsed
            case "--duration": duration = try reader.number(flag, 1...3_600)
            case "--warmup": warmup = try reader.number(flag, 0...600)
            case "--http2":
                let text = try reader.value(flag)
                let parts = text.split(separator: "x").compactMap { Int($0) }
                if text == "none" {
                    http2Shape = nil
                } else if parts.count == 2, (1...20_000).contains(parts[0]), (1...100).contains(parts[1]), parts[0] * parts[1] <= 200_000 {
                    http2Shape = (parts[0], parts[1])
                } else {
                    throw BenchUsageError(message: "--http2 \(text): must be CONNECTIONSxSTREAMS like 64x32 (streams 1 to 100), or none")
                }
            case "--url", "--api-token", "--admin-token", "--user-token-secret", "--postgres-url", "--redis-url", "--json", "--html",
                "--reactions-per-user", "--reaction-kinds":
                passThrough += [flag, try reader.value(flag)]
            default: return false
            }
            return true
        }
        self.levels = levels
        self.clusterNode = clusterNode
        self.severalNodes = severalNodes
        self.reactionsNode = reactionsNode
        self.http2Shape = http2Shape
        self.duration = duration
        self.warmup = warmup
        http = try HTTPBenchOptions(arguments: passThrough, environment: environment)
        http.load.duration = .seconds(duration)
        http.load.warmup = .seconds(warmup)
        if let seedAppURL {
            let endpoint: Endpoint
            do {
                endpoint = try Endpoint(url: seedAppURL)
            } catch {
                throw BenchUsageError(message: "--seed-app-url \(error.message)")
            }
            guard let seedAppPostgresURL else {
                throw BenchUsageError(
                    message:
                        "--seed-app-url: also give the app's database, --seed-app-postgres-url (or COUNTER_SEED_APP_DATABASE_URL; `scripts/seed-app env` prints both)"
                )
            }
            guard let secret = http.userTokenSecret else {
                throw BenchUsageError(
                    message: "--seed-app-url: the app verifies user tokens; give their secret, --user-token-secret (or COUNTER_USER_TOKEN_SECRET)")
            }
            seedApp = SeedAppTarget(endpoint: endpoint, postgresURL: seedAppPostgresURL, signer: TokenSigner(secret: secret))
        }
    }

    func run() async throws {
        var rows: [(Summary, String?)] = []
        var throughput: [String: Double] = [:]
        /// Node CPU µs per request, by the same keys as `throughput`.
        var cpu: [String: Double] = [:]
        /// What the seed's endpoint answered, by row, for the report.
        var seedAnswers: [(level: Int, scenario: String, load: LoadResult)] = []
        let quiet: @Sendable (Int, Int, Int, UInt64) -> Void = { _, _, _, _ in }
        var targets =
            clusterNode == nil
            ? ["hot", "seed-sql", "sql-upsert", "ceiling"]
            : ["hot", "hot-cluster", "seed-sql", "sql-upsert", "ceiling"]
        if http.userTokenSecret != nil {
            // Beside the service token's row: each connection an end user with a token of its own.
            targets.insert("hot-user", at: 1)
        } else {
            print("counter-bench compare: no hot row with user tokens (no --user-token-secret / COUNTER_USER_TOKEN_SECRET)")
        }
        if seedApp != nil {
            targets.insert("laravel-seed", at: targets.firstIndex(of: "seed-sql")! + 1)
        } else {
            print(
                "counter-bench compare: no laravel-seed row (no --seed-app-url / COUNTER_SEED_APP_URL; `scripts/seed-app start` serves the seed's endpoint)"
            )
        }
        if let why = RedisLuaPeer.unsupported(http.servers.redisURL) {
            print("counter-bench compare: no redis-lua row: \(why) (\(http.servers.redisURL))")
        } else {
            targets.append("redis-lua")
        }
        for level in levels {
            for target in targets {
                print("counter-bench compare: \(target) at \(level) connections …")
                var summary: Summary
                var verdict: String?
                switch target {
                case "seed-sql", "sql-upsert":
                    let baseline = SQLBaseline(rawValue: target)!
                    let post = try await createPost()
                    let result = try await baseline.run(
                        postgresURL: http.servers.postgresURL, post: post, clients: level,
                        duration: http.load.duration, warmup: http.load.warmup
                    ) { _, _ in }
                    summary = Summary(label: target, connections: level, result: result)
                case "laravel-seed":
                    var options = http.load
                    options.connections = level
                    let measured = try await seedApp!.measure(.hot, load: options)
                    summary = Summary(label: "laravel-seed (the seed's endpoint)", connections: level, result: measured.load)
                    verdict = measured.check.passed ? "check passed" : "CHECK FAILED"
                    seedAnswers.append((level, "hot", measured.load))
                case "ceiling":
                    var options = http.load
                    options.connections = level
                    let result = await LoadGenerator(options: options, workload: FixedPathWorkload(path: "/healthz")).run(progress: quiet)
                    summary = Summary(label: "GET /healthz (ceiling)", connections: level, result: result)
                case "redis-lua":
                    var options = http.load
                    options.connections = level
                    let result = try await RedisLuaPeer.run(redisURL: http.servers.redisURL, options: options)
                    summary = Summary(label: "redis-lua toggle (EVALSHA)", connections: level, result: result)
                default:
                    var options = http
                    options.scenario = "hot"
                    options.load.connections = level
                    if target == "hot-cluster", let clusterNode { options.load.endpoints = [clusterNode] }
                    options.userTokens = target == "hot-user"
                    let (result, check) = try await HTTPBench(options: options).measure(progress: quiet)
                    let label =
                        ["hot": "node hot (toggle)", "hot-user": "node hot, user tokens", "hot-cluster": "node hot, Redis Cluster"][target] ?? target
                    summary = Summary(
                        label: label, connections: level,
                        result: result.load, nodeCPU: result.nodeCPU, lag: result.lag)
                    verdict = check.map { $0.passed ? "check passed" : "CHECK FAILED" }
                    if check?.passed == false {
                        rows.append((summary, verdict))
                        report(rows, throughput, cpu, seedAnswers)
                        throw BenchCheckFailure(message: "correctness check FAILED")
                    }
                }
                summary.series = target
                throughput["\(target)@\(level)"] = summary.result.throughput
                if let nodeCPU = summary.nodeCPU { cpu["\(target)@\(level)"] = nodeCPU }
                rows.append((summary, verdict))
            }
        }
        // Closed loop, latency at N connections is N ÷ throughput (Little's law) however fast each
        // request is; open loop at half the measured rate shows the latency of a node with room.
        if let level = levels.max(), let closed = throughput["hot@\(level)"], closed > 0 {
            let rate = (closed / 2).rounded()
            print("counter-bench compare: hot, open loop at \(Int(rate))/s over \(level) connections …")
            var options = http
            options.scenario = "hot"
            options.load.connections = level
            options.load.rate = rate
            let (result, check) = try await HTTPBench(options: options).measure(progress: quiet)
            let summary = Summary(
                label: "node hot, open loop \(Int(rate))/s", connections: level, result: result.load, nodeCPU: result.nodeCPU, lag: result.lag)
            rows.append((summary, check.map { $0.passed ? "check passed" : "CHECK FAILED" }))
            if check?.passed == false {
                report(rows, throughput, cpu, seedAnswers)
                throw BenchCheckFailure(message: "correctness check FAILED")
            }
        }
        if let (connections, streams) = http2Shape {
            // HTTP/2 beside HTTP/1.1: many clients over few connections, as a gateway keeps them.
            let shape = "\(connections)×\(streams)"
            for target in ["hot-h2", "ceiling-h2"] {
                print("counter-bench compare: \(target == "hot-h2" ? "hot" : "ceiling") over HTTP/2, \(shape) …")
                var options = http
                options.http2Streams = streams
                options.load.connections = connections * streams
                options.load.wire = .http2(streamsPerConnection: streams)
                var summary: Summary
                var verdict: String?
                if target == "hot-h2" {
                    options.scenario = "hot"
                    let (result, check) = try await HTTPBench(options: options).measure(progress: quiet)
                    summary = Summary(
                        label: "node hot, HTTP/2 \(shape)", connections: connections * streams, result: result.load, nodeCPU: result.nodeCPU,
                        lag: result.lag)
                    verdict = check.map { $0.passed ? "check passed" : "CHECK FAILED" }
                    if let nodeCPU = result.nodeCPU { cpu["hot-h2"] = nodeCPU }
                    if check?.passed == false {
                        rows.append((summary, verdict))
                        report(rows, throughput, cpu, seedAnswers)
                        throw BenchCheckFailure(message: "correctness check FAILED")
                    }
                } else {
                    let result = await LoadGenerator(options: options.load, workload: FixedPathWorkload(path: "/healthz")).run(progress: quiet)
                    summary = Summary(label: "GET /healthz, HTTP/2 \(shape)", connections: connections * streams, result: result)
                }
                summary.series = target
                throughput[target] = summary.result.throughput
                rows.append((summary, verdict))
            }
        }
        for scenario in ["zipf", "feed", "storm", "mixed", "lists"] {
            let level = severalNodesLevel
            print("counter-bench compare: \(scenario) at \(level) connections …")
            var options = http
            options.scenario = scenario
            options.load.connections = level
            let (result, check) = try await HTTPBench(options: options).measure(progress: quiet)
            // The share of reads answered from Redis (hot posts) rather than PostgreSQL (cold).
            let hits = result.readHitRatio.map { String(format: ", %.0f%% hot reads", $0 * 100) } ?? ""
            // The lists row pages the run's own posts and users (small lists: `counter-bench lists`
            // measures a post with a million likers and a user with 100,000 likes).
            let label = scenario == "lists" ? "node lists (likers and users' likes, first pages)" : "node \(scenario)\(hits)"
            rows.append(
                (
                    Summary(label: label, connections: level, result: result.load, nodeCPU: result.nodeCPU, lag: result.lag),
                    check.map { $0.passed ? "check passed" : "CHECK FAILED" }
                ))
            throughput["\(scenario)@\(level)"] = result.load.throughput
            if let nodeCPU = result.nodeCPU { cpu["\(scenario)@\(level)"] = nodeCPU }
            if check?.passed == false {
                report(rows, throughput, cpu, seedAnswers)
                throw BenchCheckFailure(message: "correctness check FAILED")
            }
        }
        if let seedApp {
            // The same users toggling the same posts from several connections at once: the
            // seed's endpoint beside the node, both checked by parity.
            let level = severalNodesLevel
            let users = Int64(max(1, level / 4))
            print("counter-bench compare: storm of \(users) shared users, node and laravel-seed, at \(level) connections …")
            var options = http
            options.scenario = "storm"
            options.load.connections = level
            options.sharedStormUsers = users
            let (result, check) = try await HTTPBench(options: options).measure(progress: quiet)
            rows.append(
                (
                    Summary(label: "node storm, shared users", connections: level, result: result.load, nodeCPU: result.nodeCPU, lag: result.lag),
                    check.map { $0.passed ? "check passed" : "CHECK FAILED" }
                ))
            throughput["storm-shared@\(level)"] = result.load.throughput
            if check?.passed == false {
                report(rows, throughput, cpu, seedAnswers)
                throw BenchCheckFailure(message: "correctness check FAILED")
            }
            var load = http.load
            load.connections = level
            let measured = try await seedApp.measure(.storm, load: load, sharedUsers: users)
            var summary = Summary(label: "laravel-seed storm, shared users", connections: level, result: measured.load)
            summary.series = "laravel-seed-storm"
            rows.append((summary, measured.check.passed ? "check passed" : "CHECK FAILED"))
            throughput["laravel-seed-storm@\(level)"] = measured.load.throughput
            seedAnswers.append((level, "storm", measured.load))
        }
        if let reactionsNode {
            let level = severalNodesLevel
            print("counter-bench compare: reactions at \(level) connections …")
            var options = http
            options.scenario = "reactions"
            options.load.connections = level
            options.load.endpoints = [reactionsNode]
            let (result, check) = try await HTTPBench(options: options).measure(progress: quiet)
            let label = "node reactions (\(options.reactionKinds.count) kinds, \(options.reactionsPerUser) per user)"
            rows.append(
                (
                    Summary(label: label, connections: level, result: result.load, nodeCPU: result.nodeCPU, lag: result.lag),
                    check.map { $0.passed ? "check passed" : "CHECK FAILED" }
                ))
            throughput["reactions@\(level)"] = result.load.throughput
            if let nodeCPU = result.nodeCPU { cpu["reactions@\(level)"] = nodeCPU }
            if check?.passed == false {
                report(rows, throughput, cpu, seedAnswers)
                throw BenchCheckFailure(message: "correctness check FAILED")
            }
        }
        if let severalNodes {
            let level = severalNodesLevel
            for scenario in ["hot", "zipf"] {
                for shape in ["spread", "slot-aware"] {
                    print("counter-bench compare: \(scenario) on several nodes, \(shape), at \(level) connections …")
                    var options = http
                    options.scenario = scenario
                    options.load.connections = level
                    options.load.endpoints = [severalNodes]
                    options.spread = shape == "spread"
                    options.slotAware = shape == "slot-aware"
                    let (result, check) = try await HTTPBench(options: options).measure(progress: quiet)
                    let label = "nodes \(scenario), " + (shape == "spread" ? "spread (forwarding)" : "slot-aware")
                    rows.append(
                        (
                            Summary(label: label, connections: level, result: result.load, nodeCPU: result.nodeCPU, lag: result.lag),
                            check.map { $0.passed ? "check passed" : "CHECK FAILED" }
                        ))
                    throughput["\(scenario)-\(shape)@\(level)"] = result.load.throughput
                    if let nodeCPU = result.nodeCPU { cpu["\(scenario)-\(shape)@\(level)"] = nodeCPU }
                    if check?.passed == false {
                        report(rows, throughput, cpu, seedAnswers)
                        throw BenchCheckFailure(message: "correctness check FAILED")
                    }
                }
            }
        }
        report(rows, throughput, cpu, seedAnswers)
    }

    /// The connections of the `zipf`, `feed`, `storm`, `mixed` and several-nodes rows: 256 when
    /// it is one of the levels, else the first level.
    private var severalNodesLevel: Int { levels.contains(256) ? 256 : levels[0] }

    /// The ratios of the run, in words, for the report's head.
    private func sentences(_ throughput: [String: Double], _ cpu: [String: Double]) -> [String] {
        var lines: [String] = []
        for level in levels {
            guard let node = throughput["hot@\(level)"], node > 0 else { continue }
            var parts: [String] = []
            if let laravel = throughput["laravel-seed@\(level)"], laravel > 0 {
                parts.append(String(format: "%@× the seed's own Laravel endpoint (%@/s)", Self.ratio(node / laravel), Self.count(laravel)))
            }
            if let seed = throughput["seed-sql@\(level)"], seed > 0 {
                parts.append(String(format: "%@× the seed's transaction with its row lock (%@/s)", Self.ratio(node / seed), Self.count(seed)))
            }
            if let upsert = throughput["sql-upsert@\(level)"], upsert > 0 {
                parts.append(String(format: "%@× the best single SQL statement", Self.ratio(node / upsert)))
            }
            if let ceiling = throughput["ceiling@\(level)"], ceiling > 0 {
                parts.append(String(format: "%.0f%% of what the HTTP server answers with no work at all", node / ceiling * 100))
            }
            if let lua = throughput["redis-lua@\(level)"], lua > 0 {
                parts.append(String(format: "%.0f%% of a bare Redis Lua toggle with neither HTTP nor PostgreSQL", node / lua * 100))
            }
            lines.append("At \(level) connections the node answers \(Self.count(node)) toggles/s: " + parts.joined(separator: ", ") + ".")
        }
        if let level = levels.max(), let node = throughput["hot@\(level)"], let user = throughput["hot-user@\(level)"], node > 0 {
            lines.append(
                String(
                    format: "With end users' tokens (one per connection, verified by the node) it answers %.2f× as many at %d connections%@.",
                    user / node, level,
                    cpu["hot-user@\(level)"].map { String(format: ", at %.1f µs of node CPU per request", $0) } ?? ""))
        }
        if let (key, node) = throughput.first(where: { $0.key.hasPrefix("storm-shared@") }),
            let laravel = throughput["laravel-seed-storm@" + key.dropFirst("storm-shared@".count)], laravel > 0
        {
            lines.append(
                "The same users toggling the same posts from several connections at once: the node answers \(Self.ratio(node / laravel))× the seed's endpoint (\(Self.count(node))/s against \(Self.count(laravel))/s)."
            )
        }
        if let (key, reactions) = throughput.first(where: { $0.key.hasPrefix("reactions@") }),
            let node = throughput["hot@" + key.dropFirst("reactions@".count)], node > 0
        {
            lines.append(
                "Reactions of \(http.reactionKinds.count) random kinds on one hot post (\(http.reactionsPerUser) per user): \(Self.count(reactions))/s, "
                    + "\(Self.ratio(reactions / node))× the like toggles of the hot row at \(key.dropFirst("reactions@".count)) connections.")
        }
        if let (connections, streams) = http2Shape, let h2 = throughput["hot-h2"], let node = throughput["hot@\(severalNodesLevel)"], node > 0 {
            lines.append(
                "Over HTTP/2 (\(connections) connections × \(streams) streams) it answers \(Self.count(h2)) toggles/s, "
                    + "\(Self.ratio(h2 / node))× what it answers over HTTP/1.1 at \(severalNodesLevel) connections"
                    + (cpu["hot-h2"].map { String(format: ", at %.1f µs of node CPU per toggle", $0) } ?? "") + ".")
        }
        if let level = levels.max(), let node = throughput["hot@\(level)"], let cluster = throughput["hot-cluster@\(level)"], node > 0 {
            lines.append(String(format: "On a Redis Cluster it answers %.2f× what it answers on one Redis at %d connections.", cluster / node, level))
        }
        return lines
    }

    private static func ratio(_ value: Double) -> String { value < 10 ? String(format: "%.1f", value) : Self.count(value) }
    private static func count(_ value: Double) -> String {
        let formatter = NumberFormatter()
        formatter.numberStyle = .decimal
        formatter.maximumFractionDigits = 0
        return formatter.string(from: NSNumber(value: value.rounded())) ?? String(Int(value))
    }

    private func report(
        _ rows: [(Summary, String?)], _ throughput: [String: Double], _ cpu: [String: Double],
        _ seedAnswers: [(level: Int, scenario: String, load: LoadResult)]
    ) {
        if let path = http.htmlPath {
            let reportRows = rows.map { summary, verdict in
                let h = summary.result.histogram
                return ComparisonReport.Row(
                    series: summary.series, label: summary.label, connections: summary.connections,
                    throughput: summary.result.throughput,
                    latency: (Double(h.percentile(0.5)) / 1_000, Double(h.percentile(0.9)) / 1_000, Double(h.percentile(0.99)) / 1_000),
                    failures: summary.result.failures, nodeCPU: summary.nodeCPU, lag: summary.lag, verdict: verdict)
            }
            let context =
                "counter-bench compare, \(Date().ISO8601Format()), \(ProcessInfo.processInfo.activeProcessorCount) cores; "
                + "each row \(Int(http.load.duration.inSeconds)) s after \(Int(http.load.warmup.inSeconds)) s of warm-up, over keep-alive connections on loopback; "
                + "write rows checked against PostgreSQL afterwards"
            let page = ComparisonReport.render(
                title: "CounterService against a transaction per like", context: context,
                rows: reportRows, ratios: sentences(throughput, cpu))
            do {
                try Data(page.utf8).write(to: URL(fileURLWithPath: path))
                print("  report written to \(path)")
            } catch {
                print("  cannot write the report to \(path): \(error)")
            }
        }
        print("")
        print(Summary.header + "  check")
        for (summary, verdict) in rows { print(summary.row + "  " + (verdict ?? "")) }
        print("")
        print("  ratios in this run (node hot ÷ other, requests/s):")
        for level in levels {
            guard let node = throughput["hot@\(level)"] else { continue }
            let parts = ["laravel-seed", "seed-sql", "sql-upsert", "ceiling", "redis-lua"].compactMap { other -> String? in
                guard let value = throughput["\(other)@\(level)"], value > 0 else { return nil }
                let ratio = node / value
                return String(format: ratio < 10 ? "%@ %.2f×" : "%@ %.1f×", other as NSString, ratio)
            }
            var line = "    \(level) connections: " + parts.joined(separator: ", ")
            if let user = throughput["hot-user@\(level)"], node > 0 {
                line += String(format: "; hot with user tokens ÷ with the service token %.2f×", user / node)
                if let userCPU = cpu["hot-user@\(level)"], let nodeCPU = cpu["hot@\(level)"] {
                    line += String(format: " (node CPU %.1f vs %.1f µs/req)", userCPU, nodeCPU)
                }
            }
            if let cluster = throughput["hot-cluster@\(level)"], node > 0 {
                line += String(format: "; hot on Redis Cluster ÷ hot on one Redis %.2f×", cluster / node)
            }
            print(line)
        }
        if let (key, node) = throughput.first(where: { $0.key.hasPrefix("storm-shared@") }),
            let laravel = throughput["laravel-seed-storm@" + key.dropFirst("storm-shared@".count)], laravel > 0
        {
            print(String(format: "    storm of shared users: node ÷ laravel-seed %.1f×", node / laravel))
        }
        if let (connections, streams) = http2Shape, let h2 = throughput["hot-h2"] {
            let level = severalNodesLevel
            var line = "    hot over HTTP/2 (\(connections)×\(streams)) ÷ hot over HTTP/1.1 at \(level) connections: "
            line += throughput["hot@\(level)"].map { String(format: "%.2f×", h2 / max($0, 1)) } ?? "-"
            if let h2CPU = cpu["hot-h2"], let h1CPU = cpu["hot@\(level)"] {
                line += String(format: " (node CPU %.1f vs %.1f µs/req)", h2CPU, h1CPU)
            }
            if let ceiling2 = throughput["ceiling-h2"], let ceiling1 = throughput["ceiling@\(level)"], ceiling1 > 0 {
                line += String(format: "; GET /healthz %.2f×", ceiling2 / ceiling1)
            }
            print(line)
        }
        if !seedAnswers.isEmpty {
            print("  what the seed's endpoint answered (after the warm-up):")
            for answer in seedAnswers {
                let statuses = answer.load.statusesText
                let errors = answer.load.errorsText
                print(
                    "    \(answer.scenario) at \(answer.level) connections: \(statuses.isEmpty ? "nothing" : statuses)\(errors.isEmpty ? "" : "; without an answer: " + errors)"
                )
            }
        }
        if severalNodes != nil {
            let level = severalNodesLevel
            print("    several nodes at \(level) connections, against the one node (requests/s; node CPU per request, all nodes summed):")
            for scenario in ["hot", "zipf"] {
                guard let one = throughput["\(scenario)@\(level)"], one > 0 else { continue }
                let parts = ["spread", "slot-aware"].compactMap { shape -> String? in
                    guard let value = throughput["\(scenario)-\(shape)@\(level)"] else { return nil }
                    var part = String(format: "%@ %.2f×", shape as NSString, value / one)
                    if let mine = cpu["\(scenario)-\(shape)@\(level)"], let base = cpu["\(scenario)@\(level)"], base > 0 {
                        part += String(format: " (CPU %.1f µs, %.2f×)", mine, mine / base)
                    }
                    return part
                }
                let baseCPU = cpu["\(scenario)@\(level)"].map { String(format: ", one node's CPU %.1f µs", $0) } ?? ""
                print("      \(scenario)\(baseCPU): " + parts.joined(separator: "; "))
            }
        }
    }

    private func createPost() async throws -> Int64 {
        let pool = PostgresPool(configuration: PostgresConfiguration(url: http.servers.postgresURL))
        let post = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        try await pool.query("INSERT INTO posts (id) VALUES ($1)", [.int64(post)])
        await pool.close()
        return post
    }
}
