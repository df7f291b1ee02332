import BenchKit
import CounterCore
import Foundation
import Persistence
import PostgresDriver
import RedisDriver

/// Options of `counter-bench scale`.
struct ScaleBenchOptions {
    var posts = 1_000_000
    var likesPerPost = 10
    var load = LoadOptions()
    var keep = false
    /// Seconds of zipf toggles on 1 % of the posts after the likes (0: none).
    var hotPhase = 300
    /// The users who toggle in the hot phase, spread over the connections (each connection has
    /// its own, so every pair has one writer): a post's audience, which bounds its likers set.
    var hotUsers = 1_024
    var node: NodeTarget
    var servers: BenchServers

    init(arguments: [String], environment: [String: String]) throws {
        servers = BenchServers(environment: environment)
        node = NodeTarget(environment: environment)
        load.connections = 256
        load.warmup = .zero
        var reader = BenchArguments(arguments)
        try reader.forEachFlag { flag, reader in
            switch flag {
            case "--posts": posts = try reader.number(flag, 1...10_000_000)
            case "--likes-per-post": likesPerPost = try reader.number(flag, 2...1_000)
            case "--connections": load.connections = try reader.number(flag, 1...20_000)
            case "--keep": keep = true
            case "--hot-phase": hotPhase = try reader.number(flag, 0...86_400)
            case "--hot-users": hotUsers = try reader.number(flag, 1...100_000_000)
            default: return try node.take(flag, from: &reader) || servers.take(flag, from: &reader)
            }
            return true
        }
        load.endpoints = [node.endpoint]
    }
}

/// `counter-bench scale`: `--posts` posts get `--likes-per-post` likes each through the node
/// (one per post, then the rest), and the memory it took is read: the node's resident memory,
/// and Redis's `used_memory` after the first like of every post and after the last, which gives
/// Redis's bytes per post and per liker. Then what the write-behind log costs before it is
/// trimmed, from scratch streams of packed entries (`MEMORY USAGE`). Then, for `--hot-phase`
/// seconds, zipf toggles on 1 % of the posts by `--hot-users` users (what a day's traffic looks
/// like after the history is written, by an audience of a bounded size: the phase measures the
/// hot set, not likes it adds — a new user per toggle would grow its posts' sets all along, and
/// those are hot by definition): Redis's `used_memory` above the empty baseline at its end shows what the node's
/// `--hot-idle` kept — run it against a node with `--hot-idle 60s` and one with `--hot-idle off`
/// to compare — and every pair it toggled is checked in PostgreSQL (lost, phantom, counts).
struct ScaleBench {
    let options: ScaleBenchOptions

    func run() async throws {
        let node = options.node
        let pool = PostgresPool(configuration: PostgresConfiguration(url: options.servers.postgresURL))
        let redisConfiguration = try RedisConfiguration(url: options.servers.redisURL)
        let redis = RedisConnection(configuration: redisConfiguration)
        try await redis.connect()
        let posts = Int64(options.posts)
        let firstPost = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        let total = posts * Int64(options.likesPerPost)
        print(
            "counter-bench scale: \(total) likes over \(posts) posts (\(options.likesPerPost) each) through \(node.endpoint), \(options.load.connections) connections"
        )
        try await pool.query(
            "INSERT INTO posts (id) SELECT generate_series($1::bigint, $1::bigint + $2::bigint - 1)",
            [.int64(firstPost), .int64(posts)])
        try await SeededPostsUpkeep.run(afterSeeding: Int(posts), pool: pool)
        let workload = SpreadLikesWorkload(
            firstPost: firstPost, posts: posts, userBase: Int64.random(in: 1...1_000_000) * 1_000_000_000,
            token: node.apiToken)
        do {
            try node.flush()
            let nodeBefore = try node.residentBytes()
            let redisBefore = try await usedMemory(redis)
            print(String(format: "  before: node %.1f MB, Redis %.1f MB", Double(nodeBefore) / 1e6, Double(redisBefore) / 1e6))
            try await drive(workload, until: posts, label: "the first like of every post")
            try node.flush()
            let redisOneEach = try await usedMemory(redis)
            try await drive(workload, until: total, label: "the other likes")
            try node.flush()
            let nodeAfter = try node.residentBytes()
            let redisAfter = try await usedMemory(redis)
            let rows = try await pool.query(
                "SELECT count(*) FROM likes WHERE post_id BETWEEN $1 AND $1 + $2 - 1", [.int64(firstPost), .int64(posts)])
            let likes = try rows.first?.int64(0) ?? 0
            let perLiker = Double(redisAfter - redisOneEach) / Double(max(1, likes - posts))
            let perPost = Double(redisOneEach - redisBefore) / Double(posts) - perLiker
            print(
                String(
                    format: "  after %d likes in PostgreSQL (%d sent): node %.1f MB resident (%+.1f MB); Redis %.1f MB (%+.1f MB)",
                    likes, workload.sent, Double(nodeAfter) / 1e6, Double(nodeAfter - nodeBefore) / 1e6,
                    Double(redisAfter) / 1e6, Double(redisAfter - redisBefore) / 1e6))
            print(
                String(
                    format: "  Redis: %.0f bytes per liker (a post's likers set grown from 1 to %d), %.0f bytes per post (its marker and set)",
                    perLiker, options.likesPerPost, perPost))
            try await logCosts(redis)
            if options.hotPhase > 0 {
                try await hotPhase(
                    node: node, pool: pool, redis: redis, firstPost: firstPost, posts: posts,
                    redisBefore: redisBefore, redisAfterLikes: redisAfter)
            }
        } catch {
            await cleanUp(node: node, pool: pool, firstPost: firstPost, posts: posts)
            await redis.close()
            throw error
        }
        await cleanUp(node: node, pool: pool, firstPost: firstPost, posts: posts)
        await redis.close()
        await pool.close()
    }

    /// Zipf toggles on the first 1 % of the posts for `--hot-phase` seconds, a minute at a time;
    /// then Redis's memory above `redisBefore`, against what it was after the likes, and the
    /// correctness of every pair toggled.
    private func hotPhase(
        node: NodeTarget, pool: PostgresPool, redis: RedisConnection, firstPost: Int64, posts: Int64,
        redisBefore: Int64, redisAfterLikes: Int64
    ) async throws {
        let hot = (0..<max(1, posts / 100)).map { firstPost + $0 }
        let usersPerConnection = max(1, options.hotUsers / options.load.connections)
        print(
            "  hot phase: zipf toggles on \(hot.count) posts (1 %) by \(usersPerConnection * options.load.connections) users for \(options.hotPhase) s"
        )
        let baseline = Set(try await PostgresLikes.pairs(of: hot, pool: pool))
        let workload = ScenarioWorkload(
            scenario: .zipf, operation: .toggle, posts: hot, zipfExponent: 0.99, readRatio: 0,
            token: node.apiToken, userBase: Int64.random(in: 1...1_000_000) * 1_000_000_000 + 500_000_000,
            usersPerConnection: Int64(usersPerConnection))
        var expectations: [CorrectnessCheck.Pair: CorrectnessCheck.Expectation] = [:]
        var left = options.hotPhase
        while left > 0 {
            var load = options.load
            load.duration = .seconds(min(60, left))
            left -= min(60, left)
            let result = await LoadGenerator(options: load, workload: workload).run { _, _, _, _ in }
            expectations.merge(result.expectations) { _, later in later }
            let used = try await usedMemory(redis)
            print(
                String(
                    format: "  hot phase: %.0f toggles/s, %d failures, %d s left; Redis %.1f MB above the baseline",
                    result.throughput, result.failures, left, Double(used - redisBefore) / 1e6))
            if result.successes == 0 { throw BenchCheckFailure(message: "the node answered nothing: \(result.statuses) \(result.errors)") }
        }
        let used = try await usedMemory(redis)
        print(
            String(
                format: "  after the hot phase: Redis %.1f MB above the empty baseline, %.1f %% of the %.1f MB after the likes",
                Double(used - redisBefore) / 1e6, Double(used - redisBefore) / Double(max(1, redisAfterLikes - redisBefore)) * 100,
                Double(redisAfterLikes - redisBefore) / 1e6))
        try node.flush()
        let likes = try await PostgresLikes.read(hot, pool: pool)
        let report = CorrectnessCheck.run(expected: expectations, baseline: baseline, members: Set(likes.pairs), counts: likes.counts)
        print(
            "  hot phase correctness: \(report.checkedPairs) pairs (\(report.undeterminedPairs) undetermined) — "
                + (report.passed
                    ? "PASSED" : "FAILED: \(report.lost.count) lost, \(report.phantom.count) phantom, \(report.drift.count) count drifts"))
        guard report.passed else { throw BenchCheckFailure(message: "the hot phase lost or invented likes") }
    }

    /// Runs the load until `workload` has sent `target` requests in all.
    private func drive(_ workload: SpreadLikesWorkload, until target: Int64, label: String) async throws {
        let started = ContinuousClock.now
        while workload.sent < target {
            var load = options.load
            // Rounds of about 10 s at 30,000/s; the last one short.
            load.duration = .seconds(max(1, min(10, Int((target - workload.sent) / 30_000) + 1)))
            let result = await LoadGenerator(options: load, workload: workload).run { _, _, _, _ in }
            let failures = result.failures
            print(String(format: "  %@: %d of %d sent, %.0f/s, %d failures", label, min(workload.sent, target), target, result.throughput, failures))
            if result.successes == 0 { throw BenchCheckFailure(message: "the node answered nothing: \(result.statuses) \(result.errors)") }
        }
        print(String(format: "  %@ took %.1f s", label, (ContinuousClock.now - started).inSeconds))
    }

    private func usedMemory(_ redis: RedisConnection) async throws -> Int64 {
        let text = try await redis.send(RedisCommand("INFO", "memory")).string ?? ""
        guard let line = text.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix("used_memory:") }),
            let value = Int64(line.dropFirst("used_memory:".count))
        else {
            throw BenchCheckFailure(message: "INFO memory did not give used_memory")
        }
        return value
    }

    /// What a log holds before the flusher trims it, per change: streams of packed entries of
    /// one change each (a quiet slot) and of 100 (a busy one), and of the one-change-per-entry
    /// form written before, measured with `MEMORY USAGE` on scratch keys deleted after.
    private func logCosts(_ redis: RedisConnection) async throws {
        let key = "bench-log:\(UInt64.random(in: 1...UInt64.max))"
        var parts: [String] = []
        for (label, perEntry, packed) in [("1 change per entry", 1, true), ("100 per entry", 100, true), ("format 1 (u, p, l per change)", 1, false)]
        {
            _ = try await redis.send(.del([key]))
            var commands: [RedisCommand] = []
            for entry in 0..<(10_000 / perEntry) {
                let changes = (0..<perEntry).map {
                    LikeChange(userID: 4_000_000_000_000 + Int64(entry * perEntry + $0), postID: 3_000_000_000_000 + Int64($0 % 7), liked: true)
                }
                commands.append(
                    packed
                        ? ChangeLogEntry.append(changes, to: key)
                        : .xadd(key, fields: ChangeLogEntry.fields(of: changes[0])))
            }
            _ = try await redis.pipeline(commands)
            let bytes = try await redis.send(RedisCommand("MEMORY", "USAGE", key, "SAMPLES", "0")).integer ?? 0
            parts.append(String(format: "%@ %.1f", label, Double(bytes) / 10_000))
        }
        _ = try await redis.send(.del([key]))
        print("  a log before trimming, bytes per change: " + parts.joined(separator: "; "))
    }

    private func cleanUp(node: NodeTarget, pool: PostgresPool, firstPost: Int64, posts: Int64) async {
        guard !options.keep else {
            print("  kept: posts \(firstPost)…\(firstPost + posts - 1)")
            return
        }
        print("  deleting the posts and their likes from PostgreSQL (Redis keeps their keys) …")
        try? node.flush()
        _ = try? await pool.query("DELETE FROM posts WHERE id BETWEEN $1 AND $1 + $2 - 1", [.int64(firstPost), .int64(posts)])
        await SeededPostsUpkeep.run(afterDeleting: Int(posts), pool: pool)
    }
}
