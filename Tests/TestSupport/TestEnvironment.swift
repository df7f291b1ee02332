import Foundation
import Persistence
import PostgresDriver
import RedisDriver

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

    /// Runs `body` with a database of its own on the test server (a pool on it, nothing migrated,
    /// and its URL), created before and dropped after, also when `body` throws: for tests that
    /// change tables in ways other tests must not see (a trigger, a dropped column).
    public static func withScratchDatabase<T>(_ body: (PostgresPool, String) async throws -> T) async throws -> T {
        let admin = PostgresConnection(configuration: postgres())
        let name = "counter_scratch_\(UInt32.random(in: 0...UInt32.max))"
        // Database names cannot be parameters; this one is made of a constant and digits only.
        try await admin.query("CREATE DATABASE \(name)")
        let url = postgresURL.replacingLastPathComponent(with: name)
        let pool = PostgresPool(configuration: PostgresConfiguration(url: url))
        do {
            let value = try await body(pool, url)
            await pool.close()
            try await admin.query("DROP DATABASE \(name) WITH (FORCE)")
            await admin.close()
            return value
        } catch {
            await pool.close()
            _ = try? await admin.query("DROP DATABASE \(name) WITH (FORCE)")
            await admin.close()
            throw error
        }
    }

    /// Runs `body` with a migrated database of its own (`withScratchDatabase`) where a trigger,
    /// `refuse_banned`, raises `user 666 is banned` (SQLSTATE `P0001`) for every row of user 666
    /// inserted into or deleted from `likes`: a change PostgreSQL refuses on its own.
    public static func withUser666Refused<T>(_ body: (PostgresPool, String) async throws -> T) async throws -> T {
        try await withScratchDatabase { pool, url in
            _ = try await SchemaMigrator.migrate(pool)
            try await pool.withConnection { connection in
                try await connection.runScript(
                    """
                    CREATE FUNCTION refuse_banned() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        IF COALESCE(NEW.user_id, OLD.user_id) = 666 THEN RAISE EXCEPTION 'user 666 is banned'; END IF;
                        RETURN COALESCE(NEW, OLD);
                    END $$;
                    CREATE TRIGGER refuse_banned BEFORE INSERT OR DELETE ON likes FOR EACH ROW EXECUTE FUNCTION refuse_banned();
                    """)
            }
            return try await body(pool, url)
        }
    }

    /// A key prefix no other test uses.
    public static func uniqueKeyPrefix(_ label: String) -> String {
        "test:\(label):\(UUID().uuidString.prefix(8))"
    }

    /// The database of the tests that write reactions of other kinds than `like`: the test
    /// database's name with `_reactions`, on the same server, made and migrated once per process
    /// (`reactionsDatabase()`). A node started with likes only refuses a database holding other
    /// kinds, so those rows stay out of the database every other test shares.
    public static var reactionsPostgresURL: String { postgresURL.replacingLastPathComponent(with: databaseName("_reactions")) }

    /// The test database's name with `suffix`.
    private static func databaseName(_ suffix: String) -> String {
        let name = postgresURL.split(separator: "/").last.map { String($0.split(separator: "?").first ?? $0) } ?? "counter_test"
        return name + suffix
    }

    /// `reactionsPostgresURL`, its database made and migrated (once per process).
    public static func reactionsDatabase() async throws -> String {
        try await reactionsDatabaseReady.value
        return reactionsPostgresURL
    }

    /// The database of the node processes started with one kind per user: the test database's
    /// name with `_reactions_one`. A node refuses `--reactions-per-user one` over rows where a
    /// user holds several kinds of a post, which `reactionsDatabase()` has (its tests hold many).
    public static func onePerUserReactionsDatabase() async throws -> String {
        try await onePerUserDatabaseReady.value
        return postgresURL.replacingLastPathComponent(with: databaseName("_reactions_one"))
    }

    private static let reactionsDatabaseReady = Task { try await makeDatabase(databaseName("_reactions")) }
    private static let onePerUserDatabaseReady = Task { try await makeDatabase(databaseName("_reactions_one")) }

    /// Makes database `name` on the test server, if it is not there, and migrates it.
    private static func makeDatabase(_ name: String) async throws {
        let admin = PostgresConnection(configuration: postgres())
        do {
            // A name of letters, digits and _ only (the test database's, and a suffix).
            try await admin.query("CREATE DATABASE \(name)")
        } catch {
            // Made by an earlier run, or by another test process just now: fine.
            let sqlState = error.sqlState
            guard sqlState == "42P04" || sqlState == "23505" else {
                await admin.close()
                throw error
            }
        }
        await admin.close()
        let pool = PostgresPool(configuration: PostgresConfiguration(url: postgresURL.replacingLastPathComponent(with: name)))
        _ = try await SchemaMigrator.migrate(pool)
        await pool.close()
    }

    /// The repository's root folder (where `scripts/` is).
    public static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }
}

extension String {
    /// The URL with its last path component (the database name) replaced.
    public func replacingLastPathComponent(with component: String) -> String {
        guard let slash = lastIndex(of: "/") else { return self }
        let query = self[slash...].firstIndex(of: "?").map { String(self[$0...]) } ?? ""
        return String(self[...slash]) + component + query
    }
}
