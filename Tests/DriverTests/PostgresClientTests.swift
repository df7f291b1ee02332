import PostgresDriver
import TestSupport
import Testing

@Suite("PostgreSQL client against a real server")
struct PostgresClientTests {
    @Test("parameters travel apart from the SQL: quotes and SQL in a value stay data")
    func parametersAreData() async throws {
        let pool = PostgresPool(configuration: TestEnvironment.postgres())
        let hostile = "'); DROP TABLE posts; --"
        let rows = try await pool.query(
            "SELECT $1::text AS value, $2::bigint + 1 AS next, $3::boolean AS flag, $4::text IS NULL AS missing",
            [.text(hostile), .int64(41), .bool(true), .null])
        let row = try #require(rows.first)
        #expect(row.string(0) == hostile)
        #expect(try row.int64(1) == 42)
        #expect(try row.bool(2))
        #expect(try row.bool(3))
        let arrays = try await pool.query(
            "SELECT array_length($1::bigint[], 1), ($2::text[])[2]",
            [.int64Array([1, 2, 3]), .textArray(["a", "b\"c\\d", "e"])])
        #expect(try arrays.first?.int64(0) == 3)
        #expect(arrays.first?.string(1) == "b\"c\\d")
        await pool.close()
    }

    @Test("a prepared statement is prepared once per session, and again on the new session after its backend was terminated")
    func preparedStatements() async throws {
        let connection = PostgresConnection(configuration: TestEnvironment.postgres())
        let statement = PreparedStatement(name: "test_prepared_\(Int.random(in: 0..<1_000_000))", sql: "SELECT $1::bigint * 2, pg_backend_pid()")
        let first = try #require(try await connection.query(prepared: statement, [.int64(21)]).first)
        #expect(try first.int64(0) == 42)
        #expect(try await connection.query(prepared: statement, [.int64(5)]).first?.int64(0) == 10)
        let held = try await connection.query("SELECT count(*) FROM pg_prepared_statements WHERE name = $1", [.text(statement.name)])
        #expect(try held.first?.int64(0) == 1, "prepared on this session once")
        // Another session ends this one's backend: the next call opens a new session, which has
        // no prepared statements, and prepares it there.
        let other = PostgresConnection(configuration: TestEnvironment.postgres())
        // The two-argument form returns once the backend has exited.
        try await other.query("SELECT pg_terminate_backend($1::int, 30000)", [.int64(try first.int64(1))])
        let again = try #require(try await connection.query(prepared: statement, [.int64(4)]).first)
        #expect(try again.int64(0) == 8 && again.int64(1) != first.int64(1))
        await connection.close()
        await other.close()
    }

    @Test("a unique violation is a typed error with SQLSTATE 23505, and the connection stays usable")
    func uniqueViolation() async throws {
        let connection = PostgresConnection(configuration: TestEnvironment.postgres())
        _ = try await TestEnvironment.migratedPool()
        let post = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        try await connection.query("INSERT INTO posts (id) VALUES ($1)", [.int64(post)])
        let error = await #expect(throws: PostgresError.self) {
            try await connection.query("INSERT INTO posts (id) VALUES ($1)", [.int64(post)])
        }
        #expect(error?.code == .server)
        #expect(error?.sqlState == "23505")
        #expect(error?.isUniqueViolation == true)
        #expect(error?.message.contains("posts_pkey") == true)
        let count = try await connection.query("SELECT count(*) FROM posts WHERE id = $1", [.int64(post)])
        #expect(try count.first?.int64(0) == 1)
    }

    @Test("a missing table is a typed error with SQLSTATE 42P01, and the connection stays usable")
    func undefinedTable() async throws {
        let connection = PostgresConnection(configuration: TestEnvironment.postgres())
        let error = await #expect(throws: PostgresError.self) {
            try await connection.query("SELECT * FROM no_such_table_here")
        }
        #expect(error?.sqlState == "42P01")
        #expect(error?.isUndefinedTable == true)
        #expect(error?.message.contains("no_such_table_here") == true)
        #expect(try await connection.query("SELECT 1").first?.int64(0) == 1)
    }

    @Test("an id beyond bigint's range is refused by PostgreSQL with SQLSTATE 22003, not a crash")
    func outOfRangeID() async throws {
        let connection = PostgresConnection(configuration: TestEnvironment.postgres())
        let error = await #expect(throws: PostgresError.self) {
            try await connection.query("SELECT $1::bigint", [.text("99999999999999999999")])
        }
        #expect(error?.sqlState == "22003")
        let notANumber = await #expect(throws: PostgresError.self) {
            try await connection.query("SELECT $1::bigint", [.text("abc")])
        }
        #expect(notANumber?.sqlState == "22P02")
        #expect(try await connection.query("SELECT 1").count == 1)
    }

    @Test("an empty statement is refused as invalid")
    func emptyStatement() async throws {
        let connection = PostgresConnection(configuration: TestEnvironment.postgres())
        let error = await #expect(throws: PostgresError.self) { try await connection.query("") }
        #expect(error?.code == .invalidArgument)
    }

    @Test("withTransaction commits on success and rolls back when the body throws")
    func transactions() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let posts = try await TestEnvironment.createPosts(2, in: pool)
        _ = try await pool.withTransaction { connection in
            try connection.query("UPDATE posts SET likes_count = 5 WHERE id = $1", [.int64(posts[0])])
        }
        struct Planned: Error {}
        await #expect(throws: Planned.self) {
            try await pool.withTransaction { connection in
                try connection.query("UPDATE posts SET likes_count = 7 WHERE id = $1", [.int64(posts[1])])
                throw Planned()
            }
        }
        // A server error inside the transaction rolls back the earlier statements too.
        await #expect(throws: PostgresError.self) {
            try await pool.withTransaction { connection in
                try connection.query("UPDATE posts SET likes_count = 9 WHERE id = $1", [.int64(posts[1])])
                try connection.query("INSERT INTO posts (id) VALUES ($1)", [.int64(posts[0])])
            }
        }
        let counts = try await pool.query(
            "SELECT id, likes_count FROM posts WHERE id = ANY($1::bigint[]) ORDER BY id",
            [.int64Array(posts)])
        #expect(try counts.map { try $0.int64(1) } == [5, 0])
        await pool.close()
    }

    @Test("the pool serves many concurrent callers with at most its size of connections")
    func poolBound() async throws {
        var configuration = TestEnvironment.postgres(poolSize: 3)
        configuration.applicationName = "pool-bound-\(Int.random(in: 0..<1_000_000))"
        let pool = PostgresPool(configuration: configuration)
        let name = configuration.applicationName
        let peaks = try await withThrowingTaskGroup(of: Int64.self) { group in
            for _ in 0..<60 {
                group.addTask {
                    try await pool.query(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND pg_sleep(0.01) IS NOT NULL",
                        [.text(name)]
                    ).first!.int64(0)
                }
            }
            return try await group.reduce(into: [Int64]()) { $0.append($1) }
        }
        #expect(peaks.count == 60)
        #expect(peaks.max()! <= 3)
        await pool.close()
        await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
    }

    @Test("an unreachable server gives a clear connection error")
    func unreachable() async throws {
        let connection = PostgresConnection(configuration: PostgresConfiguration(url: "postgresql://counter@127.0.0.1:1/counter"))
        let error = await #expect(throws: PostgresError.self) { try await connection.query("SELECT 1") }
        #expect(error?.code == .connectionFailed)
        #expect(error?.isRetryable == true)
        #expect(error?.message.contains("127.0.0.1") == true)
    }
}
