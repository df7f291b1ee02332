import CounterCore
import CounterNode
import Foundation
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import WritePath

/// Options of `counter-bench writepath`.
struct WritePathBenchOptions {
    var callers = 1_000
    var seconds = 5.0
    var shards = 4
    var spreadPosts = 10_000
    var servers: BenchServers

    init(arguments: [String], environment: [String: String]) throws {
        servers = BenchServers(environment: environment)
        var reader = BenchArguments(arguments)
        try reader.forEachFlag { flag, reader in
            switch flag {
            case "--callers": callers = try reader.number(flag, 1...100_000)
            case "--seconds": seconds = Double(try reader.number(flag, 1...3_600))
            case "--shards": shards = try reader.number(flag, 1...256)
            case "--posts": spreadPosts = try reader.number(flag, 1...1_000_000)
            default: return try servers.take(flag, from: &reader)
            }
            return true
        }
    }
}

/// Drives the write path in-process (no HTTP): many concurrent callers, each liking with a
/// fresh user every time so that every operation is a change. Two runs: every caller on one hot
/// post (one shard does all the work), then callers spread over many posts (all shards).
struct WritePathBench {
    let options: WritePathBenchOptions

    func run() async throws {
        let pool = PostgresPool(configuration: PostgresConfiguration(url: options.servers.postgresURL))
        _ = try await SchemaMigrator.migrate(pool)
        let redis = try RedisConfiguration(url: options.servers.redisURL)
        print(
            "counter-bench writepath: \(options.callers) concurrent callers, \(Int(options.seconds)) s per run, \(options.shards) shards, release build expected"
        )
        try await scenario("hot: one post (one shard)", posts: 1, pool: pool, redis: redis)
        try await scenario("spread: \(options.spreadPosts) posts (all shards)", posts: options.spreadPosts, pool: pool, redis: redis)
        await pool.close()
    }

    private func scenario(_ title: String, posts postCount: Int, pool: PostgresPool, redis: RedisConfiguration) async throws {
        let base = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        let posts = (0..<Int64(postCount)).map { base + $0 }
        try await pool.query("INSERT INTO posts (id) SELECT unnest($1::bigint[])", [.int64Array(posts)])
        var configuration = WritePathConfiguration()
        configuration.shardCount = options.shards
        configuration.keyPrefix = "bench-\(UInt32.random(in: 0...UInt32.max))"
        let service = try CounterService(configuration: configuration, postgres: pool, redis: redis)
        do {
            try await ServiceGroup.withRunning([service]) {
                try await measure(title, service: service, posts: posts, pool: pool)
            }
        } catch {
            try? await cleanUp(posts: posts, prefix: configuration.keyPrefix, pool: pool, redis: redis)
            throw error
        }
        try await cleanUp(posts: posts, prefix: configuration.keyPrefix, pool: pool, redis: redis)
    }

    private func measure(_ title: String, service: CounterService, posts: [Int64], pool: PostgresPool) async throws {
        // Hydrate the posts before timing.
        for chunk in stride(from: 0, to: posts.count, by: 1_000) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for post in posts[chunk..<min(chunk + 1_000, posts.count)] {
                    group.addTask { _ = try await service.perform(.read, post: post, user: 1) }
                }
                try await group.waitForAll()
            }
        }
        let before = await service.stats()
        let deadline = ContinuousClock.now + .milliseconds(Int(options.seconds * 1_000))
        let started = ContinuousClock.now
        let callers = options.callers
        let completed = try await withThrowingTaskGroup(of: Int.self) { group in
            for caller in 0..<callers {
                group.addTask {
                    var done = 0
                    var user = Int64(caller + 1)
                    while ContinuousClock.now < deadline {
                        let post = posts[(caller + done) % posts.count]
                        _ = try await service.perform(.like, post: post, user: user)
                        user += Int64(callers)
                        done += 1
                    }
                    return done
                }
            }
            return try await group.reduce(0, +)
        }
        let elapsed = (ContinuousClock.now - started).inSeconds
        let flushStarted = ContinuousClock.now
        try await service.flush()
        let flushSeconds = (ContinuousClock.now - flushStarted).inSeconds
        let after = await service.stats()
        func total(_ key: KeyPath<ShardStats, Int>, _ stats: [ShardStats]) -> Int { stats.reduce(0) { $0 + $1[keyPath: key] } }
        let commits = total(\.groupCommits, after) - total(\.groupCommits, before)
        let changes = total(\.groupCommittedChanges, after) - total(\.groupCommittedChanges, before)
        let transactions = total(\.flushTransactions, after) - total(\.flushTransactions, before)
        let busiest = zip(after, before).map { $0.groupCommittedChanges - $1.groupCommittedChanges }.max() ?? 0

        // Sanity: PostgreSQL agrees with what was acknowledged.
        let check = try await pool.query(
            """
            SELECT coalesce(sum(likes_count), 0), (SELECT count(*) FROM likes WHERE post_id = ANY($1::bigint[]))
            FROM posts WHERE id = ANY($1::bigint[])
            """, [.int64Array(posts)])
        let (countSum, rowSum) = (try check.first!.int64(0), try check.first!.int64(1))

        print("  \(title)")
        print(
            String(
                format: "    %d changes in %.2f s: %.0f changes/s (busiest shard %d changes)", completed, elapsed, Double(completed) / elapsed,
                busiest))
        print(String(format: "    group commits: %d, average %.1f changes each", commits, commits == 0 ? 0 : Double(changes) / Double(commits)))
        print(
            String(
                format: "    PostgreSQL transactions: %d, %.1f per 10,000 changes; final flush %.2f s", transactions,
                changes == 0 ? 0 : Double(transactions) * 10_000 / Double(changes), flushSeconds))
        print(
            "    check: likes_count sum \(countSum), likes rows \(rowSum), acknowledged \(completed) — \(countSum == rowSum && rowSum == completed ? "agree" : "DISAGREE")"
        )

        guard countSum == rowSum && rowSum == completed else {
            throw BenchCheckFailure(message: "correctness check failed: counts and acknowledgements disagree")
        }
    }

    private func cleanUp(posts: [Int64], prefix: String, pool: PostgresPool, redis: RedisConfiguration) async throws {
        try await pool.query("DELETE FROM posts WHERE id = ANY($1::bigint[])", [.int64Array(posts)])
        try await pool.query("DELETE FROM counter_flush_progress WHERE starts_with(log, $1)", [.text(prefix + ":")])
        let client = RedisClient(configuration: redis)
        try await client.topology.discover()
        let layout = RedisKeyLayout(prefix: prefix)
        var groups = posts.map { post in
            SlotCommands(slot: HashSlot(post: post), commands: [.del([layout.likers(ofPost: post)]), .del([layout.hydratedMarker(ofPost: post)])])
        }
        groups += Set(posts.map { HashSlot(post: $0) }).map { SlotCommands(slot: $0, commands: [.del([layout.changeLog(of: $0)])]) }
        _ = try await client.executeAll(groups)
        await client.close()
        await client.topology.close()
    }

}
