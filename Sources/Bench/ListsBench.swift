import BenchKit
import CounterCore
import Foundation
import PostgresDriver

/// Options of `counter-bench lists`.
struct ListsBenchOptions {
    var likers = 1_000_000
    var userLikes = 100_000
    var hotConnections = 64
    var load = LoadOptions()
    var node: NodeTarget
    var servers: BenchServers

    init(arguments: [String], environment: [String: String]) throws {
        servers = BenchServers(environment: environment)
        node = NodeTarget(environment: environment)
        load.connections = 64
        load.warmup = .seconds(2)
        load.duration = .seconds(10)
        var reader = BenchArguments(arguments)
        try reader.forEachFlag { flag, reader in
            switch flag {
            case "--likers": likers = try reader.number(flag, 1...20_000_000)
            case "--user-likes": userLikes = try reader.number(flag, 1...10_000_000)
            case "--connections": load.connections = try reader.number(flag, 1...20_000)
            case "--hot-connections": hotConnections = try reader.number(flag, 0...20_000)
            case "--rate": load.rate = Double(try reader.number(flag, 1...1_000_000))
            case "--duration": load.duration = .seconds(try reader.number(flag, 1...3_600))
            case "--warmup": load.warmup = .seconds(try reader.number(flag, 0...600))
            default: return try node.take(flag, from: &reader) || servers.take(flag, from: &reader)
            }
            return true
        }
        load.endpoints = [node.endpoint]
    }
}

/// `counter-bench lists`: list pages of a post with `--likers` likers and of a user with
/// `--user-likes` likes (all in PostgreSQL, made by the bench, one a millisecond apart), at
/// `--connections`, each while `hot` toggles run beside them at `--hot-connections` (on a post
/// of their own). Half the pages are first pages, half start at a cursor at a random time of
/// the list. Prints each phase's pages/s and latency, and hot's toggles/s meanwhile; checks the
/// first page of each list against PostgreSQL's newest rows. With `--rate R` the pages come in
/// open loop, R a second over the connections (closed loop otherwise: each connection sends its
/// next page when the last is answered, so latency is connections ÷ throughput).
struct ListsBench {
    let options: ListsBenchOptions

    func run() async throws {
        let node = options.node
        let pool = PostgresPool(configuration: PostgresConfiguration(url: options.servers.postgresURL))
        defer { Task { await pool.close() } }
        let giant = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        let hotPost = giant + 1
        let firstPost = giant + 2
        let userBase = Int64.random(in: 1...1_000_000) * 1_000_000_000
        let heavyUser = userBase
        print(
            "counter-bench lists: post \(giant) with \(options.likers) likers, user \(heavyUser) with \(options.userLikes) likes; "
                + "\(options.load.connections) connections of pages, \(options.hotConnections) of hot toggles beside them")
        let created = ContinuousClock.now
        let now = Int64(Date().timeIntervalSince1970 * 1_000) * 1_000
        try await pool.query("INSERT INTO posts (id) VALUES ($1), ($2)", [.int64(giant), .int64(hotPost)])
        try await pool.query(
            "INSERT INTO posts (id) SELECT $1 + g FROM generate_series(0, $2::bigint - 1) g",
            [.int64(firstPost), .int64(Int64(options.userLikes))])
        // The likes rows' foreign-key checks are planned on these statistics: planned on a posts
        // table that looked empty (after the last run's posts were deleted), each check scanned
        // the whole table and the 100,000 likes of the user took minutes instead of a second.
        try await pool.query("ANALYZE posts")
        // One like a millisecond, the newest now: likers base+1 (newest) … base+N.
        try await pool.query(
            """
            INSERT INTO likes (user_id, post_id, created_at, updated_at)
            SELECT $2 + g, $1, to_timestamp($4::bigint / 1000000.0) - g * interval '1 millisecond', now() FROM generate_series(1, $3::bigint) g
            """, [.int64(giant), .int64(userBase), .int64(Int64(options.likers)), .int64(now)])
        try await pool.query("UPDATE posts SET likes_count = $2 WHERE id = $1", [.int64(giant), .int64(Int64(options.likers))])
        try await pool.query(
            """
            INSERT INTO likes (user_id, post_id, created_at, updated_at)
            SELECT $1, $2 + g, to_timestamp($4::bigint / 1000000.0) - g * interval '1 millisecond', now() FROM generate_series(0, $3::bigint - 1) g
            """, [.int64(heavyUser), .int64(firstPost), .int64(Int64(options.userLikes)), .int64(now)])
        try await pool.query(
            "UPDATE posts SET likes_count = 1 WHERE id >= $1 AND id < $1 + $2::bigint",
            [.int64(firstPost), .int64(Int64(options.userLikes))])
        try await pool.query("ANALYZE likes")
        print(String(format: "  %d likes rows written in %.1f s", options.likers + options.userLikes, (ContinuousClock.now - created).inSeconds))
        let posts = [giant, hotPost] + (0..<Int64(options.userLikes)).map { firstPost + $0 }
        do {
            try checkFirstPages(giant: giant, heavyUser: heavyUser, userBase: userBase, firstPost: firstPost)
            let likersSpan = (now - Int64(options.likers) * 1_000)...now
            let likesSpan = (now - Int64(options.userLikes) * 1_000)...now
            try await phase(
                "a post's likers (\(options.likers) likers)",
                ListPagesWorkload(
                    targets: [.likers(post: giant)], microseconds: likersSpan,
                    token: node.apiToken), hotPost: hotPost, userBase: userBase)
            try await phase(
                "a user's likes (\(options.userLikes) likes)",
                ListPagesWorkload(
                    targets: [.likes(user: heavyUser)], microseconds: likesSpan,
                    token: node.apiToken), hotPost: hotPost, userBase: userBase)
        } catch {
            await cleanUp(node: node, posts: posts, pool: pool)
            throw error
        }
        await cleanUp(node: node, posts: posts, pool: pool)
    }

    /// The first page of each list is PostgreSQL's newest rows (nothing of them waits).
    private func checkFirstPages(giant: Int64, heavyUser: Int64, userBase: Int64, firstPost: Int64) throws {
        let node = options.node
        let (status, body) = try OneShotHTTP.send(to: node.endpoint, method: "GET", path: "/v1/posts/\(giant)/likers?limit=3", token: node.apiToken)
        let users = (1...min(3, Int64(options.likers))).map { "{\"user_id\":\(userBase + $0)," }
        guard status == 200, users.allSatisfy(body.contains) else {
            throw BenchCheckFailure(message: "the first likers page should list \(users): \(status) \(body)")
        }
        let (likesStatus, likesBody) = try OneShotHTTP.send(
            to: node.endpoint, method: "GET", path: "/v1/users/\(heavyUser)/likes?limit=3", token: node.apiToken)
        let posts = (0..<min(3, Int64(options.userLikes))).map { "{\"post_id\":\(firstPost + $0)," }
        guard likesStatus == 200, posts.allSatisfy(likesBody.contains) else {
            throw BenchCheckFailure(message: "the first likes page should list \(posts): \(likesStatus) \(likesBody)")
        }
        print("  first pages: \(body.prefix(120))… and \(likesBody.prefix(120))…")
    }

    private func phase(_ name: String, _ pages: ListPagesWorkload, hotPost: Int64, userBase: Int64) async throws {
        let loop = options.load.rate.map { "open loop at \(Int($0))/s over" } ?? "closed loop,"
        print(
            "  \(name): \(loop) \(options.load.connections) connections for \(Int(options.load.duration.inSeconds)) s, hot beside at \(options.hotConnections) …"
        )
        let quiet: @Sendable (Int, Int, Int, UInt64) -> Void = { _, _, _, _ in }
        var hotOptions = options.load
        hotOptions.rate = nil
        hotOptions.connections = max(1, options.hotConnections)
        let hot = ScenarioWorkload(
            scenario: .hot, operation: .toggle, posts: [hotPost], zipfExponent: 0.99, readRatio: 0,
            token: options.node.apiToken, userBase: userBase + 500_000_000)
        let hotRun: Task<LoadResult?, Never> = Task { [options] in
            guard options.hotConnections > 0 else { return nil }
            return await LoadGenerator(options: hotOptions, workload: hot).run(progress: quiet)
        }
        let result = await LoadGenerator(options: options.load, workload: pages).run(progress: quiet)
        let beside = await hotRun.value
        let h = result.histogram
        print(
            String(
                format: "    pages: %.0f/s, p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms, failures %d",
                result.throughput, Double(h.percentile(0.5)) / 1_000, Double(h.percentile(0.9)) / 1_000,
                Double(h.percentile(0.99)) / 1_000, Double(h.maximum) / 1_000, result.failures))
        if let beside {
            let b = beside.histogram
            print(
                String(
                    format: "    hot beside: %.0f toggles/s, p50 %.2f ms, p99 %.2f ms, failures %d",
                    beside.throughput, Double(b.percentile(0.5)) / 1_000, Double(b.percentile(0.99)) / 1_000, beside.failures))
        }
        guard result.failures == 0 else {
            let statuses = result.statusesText
            let errors = result.errorsText
            throw BenchCheckFailure(
                message: "\(result.failures) list pages failed (answers by status: \(statuses.isEmpty ? "none" : statuses); "
                    + "without an answer: \(errors.isEmpty ? "none" : errors))")
        }
    }

    private func cleanUp(node: NodeTarget, posts: [Int64], pool: PostgresPool) async {
        print("  deleting the posts and their likes …")
        try? node.flush()
        _ = try? await pool.query("DELETE FROM posts WHERE id = ANY($1::bigint[])", [.int64Array(posts)])
        // The statistics were taken with a post holding most of the table's likes: left so, they
        // make PostgreSQL expect half of likes for any post and plan the next bench's cold
        // lookups as scans of the whole table (seen: zipf over a million posts answered nothing
        // for 10 s after a lists run).
        _ = try? await pool.query("ANALYZE likes")
        _ = try? await pool.query("ANALYZE posts")
    }
}
