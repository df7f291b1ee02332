import CounterCore
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import Synchronization
import TestSupport
import WritePath

/// A write path on the test servers with a key prefix of its own, and ways to look at what
/// memory, Redis and PostgreSQL hold.
package struct WritePathHarness {
    package let pool: PostgresPool
    /// A client of the service's own slot map, for looking at what Redis holds.
    package let redis: RedisClient
    package let layout: RedisKeyLayout
    package let service: CounterService
    package let posts: [Int64]
    /// What the service logged (every level).
    package let log: LogLines
    /// The service, running.
    package let running: RunningServices

    /// Creates `postCount` posts and starts a service over them.
    package static func start(
        posts postCount: Int, postgresURL: String = TestEnvironment.postgresURL,
        redis target: RedisTarget = .single,
        redisURL: String? = nil,
        configure: (inout WritePathConfiguration) -> Void = { _ in }
    ) async throws -> WritePathHarness {
        var postgres = PostgresConfiguration(url: postgresURL)
        postgres.maximumConnections = 4
        let pool = PostgresPool(configuration: postgres)
        _ = try await SchemaMigrator.migrate(pool)
        let posts = try await TestEnvironment.createPosts(postCount, in: pool)
        var configuration = WritePathConfiguration()
        configuration.keyPrefix = TestEnvironment.uniqueKeyPrefix("wp")
        configuration.shardCount = 2
        configure(&configuration)
        let redisConfiguration = try RedisConfiguration(url: redisURL ?? target.url)
        let log = LogLines()
        let service = try CounterService(configuration: configuration, postgres: pool, redis: redisConfiguration, log: log.nodeLog)
        let running = try await RunningServices.start([service])
        return WritePathHarness(
            pool: pool, redis: RedisClient(topology: service.redisTopology),
            layout: RedisKeyLayout(prefix: configuration.keyPrefix), service: service, posts: posts, log: log,
            running: running)
    }

    /// A second service over the same prefix (a restart).
    package func restarted(configure: (inout WritePathConfiguration) -> Void = { _ in }) async throws -> WritePathHarness {
        var configuration = service.configuration
        configure(&configuration)
        let service = try CounterService(configuration: configuration, postgres: pool, redis: redis.topology.configuration, log: log.nodeLog)
        let running = try await RunningServices.start([service])
        return WritePathHarness(pool: pool, redis: redis, layout: layout, service: service, posts: posts, log: log, running: running)
    }

    /// The same service, looking at `posts` instead.
    package func with(posts: [Int64]) -> WritePathHarness {
        WritePathHarness(pool: pool, redis: redis, layout: layout, service: service, posts: posts, log: log, running: running)
    }

    /// (user, post) pairs with a `likes` row, for `posts`.
    package func postgresMembers(_ posts: [Int64]? = nil) async throws -> Set<Pair> {
        let rows = try await pool.query(
            "SELECT user_id, post_id FROM likes WHERE post_id = ANY($1::bigint[])",
            [.int64Array(posts ?? self.posts)])
        return Set(try rows.map { Pair(user: try $0.int64(0), post: try $0.int64(1)) })
    }

    /// Gives `post` the likers 1…`count` in PostgreSQL: their `likes` rows and its `likes_count`.
    package func addLikers(_ count: Int, to post: Int64) async throws {
        try await pool.query(
            "INSERT INTO likes (user_id, post_id) SELECT u, $1 FROM generate_series(1, $2::bigint) u",
            [.int64(post), .int64(Int64(count))])
        try await pool.query("UPDATE posts SET likes_count = $2 WHERE id = $1", [.int64(post), .int64(Int64(count))])
    }

    /// `likes_count` per post, and the number of `likes` rows per post.
    package func postgresCounts() async throws -> [Int64: (count: Int64, rows: Int64)] {
        let rows = try await pool.query(
            """
            SELECT p.id, p.likes_count, (SELECT count(*) FROM likes l WHERE l.post_id = p.id)
            FROM posts p WHERE p.id = ANY($1::bigint[])
            """, [.int64Array(posts)])
        var result: [Int64: (count: Int64, rows: Int64)] = [:]
        for row in rows { result[try row.int64(0)] = (try row.int64(1), try row.int64(2)) }
        return result
    }

    package func redisCount(_ post: Int64) async throws -> Int64 {
        try await redis.send(.scard(layout.likers(ofPost: post)), slot: HashSlot(post: post)).integer ?? -1
    }

    /// Whether Redis holds the post (its hydration marker is set): the post is hot.
    package func isHot(_ post: Int64) async throws -> Bool {
        try await redis.send(.exists([layout.hydratedMarker(ofPost: post)]), slot: HashSlot(post: post)).integer == 1
    }

    /// Waits (up to `timeout`, however busy the machine) until Redis holds nothing of `post`
    /// (its tier marker is gone: evicted); whether it was.
    package func waitUntilEvicted(_ post: Int64, timeout: Duration = .seconds(30)) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await !isHot(post) { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await !isHot(post)
    }

    package func redisIsMember(_ post: Int64, _ user: Int64) async throws -> Bool {
        try await redis.send(.sismember(layout.likers(ofPost: post), user), slot: HashSlot(post: post)).integer == 1
    }

    /// Transactions the flushers committed, summed over shards.
    /// What each shard's statistics and the log say of its flushes, for a failure's message.
    package func flushReport() async -> String {
        let shards = await service.stats().map { shard in
            "shard \(shard.shard ?? -1): pending \(shard.pendingChanges), oldest \(shard.oldestPendingAgeSeconds) s, "
                + "since flush \(shard.secondsSinceFlush) s, transactions \(shard.flushTransactions), retries \(shard.flushRetries), "
                + "hot posts \(shard.hotPosts), evicted \(shard.evictedPosts), last error \(shard.lastFlushError ?? "none"), Redis errors \(shard.redisErrors), PostgreSQL errors \(shard.postgresErrors)"
        }
        let lines = log.all.suffix(30)
        return (shards + ["log:"] + lines).joined(separator: "\n")
    }

    package func flushTransactions() async -> Int {
        await service.stats().reduce(0) { $0 + $1.flushTransactions }
    }

    /// Stops the service only: with `drain`, after flushing everything; without, after the
    /// flush under way (what waits stays in the Redis logs, as after a crash).
    package func stopService(drain: Bool = true) async {
        if !drain { await service.abandonDrain() }
        try? await running.stop()
    }

    package func stop() async {
        await stopService()
        await redis.close()
        await pool.close()
    }
}

/// Log lines a test reads back.
package final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])

    /// A log at every level that writes here.
    package var nodeLog: NodeLog { NodeLog(minimum: .debug) { line in self.lines.withLock { $0.append(line) } } }

    /// Every line so far.
    package var all: [String] { lines.withLock { $0 } }

    /// The lines of `event`.
    package func lines(of event: String) -> [String] {
        lines.withLock { $0.filter { $0.contains(" event=\(event) ") || $0.hasSuffix(" event=\(event)") } }
    }
}

package struct Pair: Hashable, CustomStringConvertible {
    package let user: Int64
    package let post: Int64
    package var description: String { "(user \(user), post \(post))" }

    package init(user: Int64, post: Int64) {
        self.user = user
        self.post = post
    }
}

extension WritePathConfiguration {
    /// No flush starts on its own (interval, age and size far out of reach): changes wait in the
    /// logs until a test asks (`flush()`, `/admin/flush`, `counter-node flush`, shutdown).
    package mutating func flushOnlyWhenAsked() {
        // An hour, not a minute: a loaded test process was seen stalled for over a minute, and
        // the interval then flushed what a test expected to still wait.
        flushInterval = .seconds(3_600)
        flushMaxAge = .seconds(3_600)
        flushBatchSize = 1_000_000
    }
}
