import Foundation
import Persistence

/// Where the integration tests find their servers: `COUNTER_TEST_POSTGRES_URL`,
/// `COUNTER_TEST_REDIS_URL` and `COUNTER_TEST_REDIS_CLUSTER_URL`, defaulting to the local servers
/// `scripts/services start` runs (the cluster with `COUNTER_REDIS_MODE=cluster`).
public enum TestEnvironment {
    public static var postgresURL: String {
        ProcessInfo.processInfo.environment["COUNTER_TEST_POSTGRES_URL"]
            ?? "postgresql://counter@127.0.0.1:55432/counter_test"
    }

    public static var redisURL: String {
        ProcessInfo.processInfo.environment["COUNTER_TEST_REDIS_URL"] ?? "redis://127.0.0.1:56379"
    }

    /// The seed nodes of the test Redis Cluster.
    public static var redisClusterURL: String {
        ProcessInfo.processInfo.environment["COUNTER_TEST_REDIS_CLUSTER_URL"]
            ?? "redis-cluster://127.0.0.1:45001,127.0.0.1:45002,127.0.0.1:45003"
    }

    public static func postgres(poolSize: Int = 4) -> PostgresConfiguration {
        var configuration = PostgresConfiguration(url: postgresURL)
        configuration.maximumConnections = poolSize
        configuration.applicationName = "counter-tests"
        return configuration
    }

    public static func redis() throws -> RedisConfiguration {
        try RedisConfiguration(url: redisURL)
    }

    /// A pool on the test database with the schema migrated.
    public static func migratedPool(poolSize: Int = 4) async throws -> PostgresPool {
        let pool = PostgresPool(configuration: postgres(poolSize: poolSize))
        _ = try await SchemaMigrator.migrate(pool)
        return pool
    }

    /// A block of `count` post ids no other test uses, created in `posts` with `likes_count` 0.
    public static func createPosts(_ count: Int, in pool: PostgresPool) async throws -> [Int64] {
        let base = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        let ids = (0..<Int64(count)).map { base + $0 }
        try await pool.query("INSERT INTO posts (id, likes_count) SELECT unnest($1::bigint[]), 0", [.int64Array(ids)])
        return ids
    }

    /// A key prefix no other test uses.
    public static func uniqueKeyPrefix(_ label: String) -> String {
        "test:\(label):\(UUID().uuidString.prefix(8))"
    }

    /// The repository's root folder (where `scripts/` is).
    public static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }
}
