import Foundation
import PostgresDriver
import RedisDriver
import TestSupport
import Testing

/// Restarts servers of its own (started with scripts/services in a temporary folder), so the
/// shared test servers and the other tests are not disturbed.
@Suite("Recovery after a server restart", .serialized)
struct RestartRecoveryTests {
    @Test("idle clients reconnect by themselves after PostgreSQL and Redis restart")
    func restartWhileIdle() async throws {
        try await PrivateServers.with { servers in
            let postgres = PostgresConnection(configuration: PostgresConfiguration(url: servers.postgresURL))
            let pool = PostgresPool(configuration: PostgresConfiguration(url: servers.postgresURL))
            let redis = RedisConnection(configuration: try RedisConfiguration(url: servers.redisURL))
            let key = "restart:key"

            let backendBefore = try await postgres.query("SELECT pg_backend_pid()").first!.int64(0)
            _ = try await pool.query("SELECT 1")
            try await redis.send(.set(key, "kept"))

            try await servers.run("restart")

            // The same connection objects, idle across the restart, work on their next call.
            let backendAfter = try await postgres.query("SELECT pg_backend_pid()").first!.int64(0)
            #expect(backendAfter != backendBefore)
            #expect(try await pool.query("SELECT 41 + 1").first?.int64(0) == 42)
            // Redis kept the value through the restart (AOF), and the client reconnected to read it.
            #expect(try await redis.send(.get(key)).string == "kept")
        }
    }

    @Test("while Redis is down calls fail fast with a clear error, and work again once it is back")
    func redisDownThenBack() async throws {
        try await PrivateServers.with { servers in
            var configuration = try RedisConfiguration(url: servers.redisURL)
            configuration.reconnectInitialDelay = .milliseconds(50)
            configuration.reconnectMaximumDelay = .milliseconds(200)
            let redis = RedisConnection(configuration: configuration)
            try await redis.send(.set("k", "v"))

            try await servers.run("stop")
            let started = ContinuousClock.now
            let error = await #expect(throws: RedisError.self) { try await redis.send(.get("k")) }
            #expect(error?.code == .connectionFailed)
            #expect(ContinuousClock.now - started < .seconds(2))

            let postgres = PostgresConnection(configuration: PostgresConfiguration(url: servers.postgresURL))
            let down = await #expect(throws: PostgresError.self) { try await postgres.query("SELECT 1") }
            #expect(down?.code == .connectionFailed)

            try await servers.run("start")
            // Within a few backoff periods the same connection answers again.
            var answer: RedisReply?
            for _ in 0..<50 where answer == nil {
                answer = try? await redis.send(.get("k"))
                if answer == nil { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(answer?.string == "v")
            #expect(try await postgres.query("SELECT 1").first?.int64(0) == 1)
        }
    }

    @Test("a PostgreSQL backend ended by the server while idle: the next call reconnects")
    func backendTerminatedWhileIdle() async throws {
        let connection = PostgresConnection(configuration: TestEnvironment.postgres())
        let admin = PostgresConnection(configuration: TestEnvironment.postgres())
        let pid = try await connection.query("SELECT pg_backend_pid()").first!.int64(0)
        // The two-argument form returns once the backend has exited (its goodbye sent), so the
        // next call meets a closed session however slow the machine is.
        try await admin.query("SELECT pg_terminate_backend($1::int, 30000)", [.int64(pid)])
        let newPid = try await connection.query("SELECT pg_backend_pid()").first!.int64(0)
        #expect(newPid != pid)
    }

    @Test("a PostgreSQL backend ended during a call: that call fails as connectionLost, the next one works")
    func backendTerminatedDuringCall() async throws {
        let connection = PostgresConnection(configuration: TestEnvironment.postgres())
        let admin = PostgresConnection(configuration: TestEnvironment.postgres())
        let pid = try await connection.query("SELECT pg_backend_pid()").first!.int64(0)
        let slow = Task { try await connection.query("SELECT pg_sleep(10)") }
        // The terminate lands while the call runs: wait until the server shows it running.
        var running = false
        for _ in 0..<1_500 where !running {
            let rows = try await admin.query(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int AND state = 'active' AND query LIKE 'SELECT pg_sleep%'", [.int64(pid)])
            running = try rows.first?.int64(0) == 1
            if !running { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(running, "the slow call never started")
        try await admin.query("SELECT pg_terminate_backend($1::int)", [.int64(pid)])
        let error = await #expect(throws: PostgresError.self) { _ = try await slow.value }
        #expect(error?.code == .connectionLost)
        #expect(error?.isRetryable == true)
        #expect(try await connection.query("SELECT 1").first?.int64(0) == 1)
    }

    @Test("a Redis reply slower than the command timeout drops the connection with a clear error; the next call works")
    func redisCommandTimeout() async throws {
        var configuration = try TestEnvironment.redis()
        configuration.commandTimeout = .milliseconds(200)
        let redis = RedisConnection(configuration: configuration)
        let key = TestEnvironment.uniqueKeyPrefix("never-filled")
        let error = await #expect(throws: RedisError.self) { try await redis.send(RedisCommand("BLPOP", key, 1)) }
        #expect(error?.code == .connectionLost)
        #expect(error?.message.contains("may or may not have run") == true)
        #expect(try await redis.send(.ping()) == .status("PONG"))
    }
}
