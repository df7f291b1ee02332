import PostgresDriver
import TestSupport

/// A post's row held locked (`SELECT … FOR UPDATE` in a transaction left open) on a connection of
/// its own: whatever must lock the row — a reconcile's repair, a flush that writes the post's
/// likes — waits until `release()`. A test holds an operation in its middle this way, and acts
/// while it is sure the operation is under way and not done.
package final class PostRowHold: Sendable {
    private let connection: PostgresConnection
    /// The holding session's backend, which the waiting ones name in `pg_blocking_pids`.
    private let backend: Int64

    private init(connection: PostgresConnection, backend: Int64) {
        self.connection = connection
        self.backend = backend
    }

    /// Locks `post`'s row in `posts` on a new connection to `url`, until `release()`.
    package static func hold(post: Int64, postgresURL url: String) async throws -> PostRowHold {
        let connection = PostgresConnection(configuration: PostgresConfiguration(url: url))
        try await connection.query("BEGIN")
        let locked = try await connection.query("SELECT id FROM posts WHERE id = $1 FOR UPDATE", [.int64(post)])
        guard !locked.isEmpty else { throw HarnessError("post \(post) has no row to hold") }
        let backend = try await connection.query("SELECT pg_backend_pid()").first?.int64(0) ?? 0
        return PostRowHold(connection: connection, backend: backend)
    }

    /// How many sessions wait for a lock this hold has, asked on `pool` (a session inside a
    /// transaction would see `pg_stat_activity` as it was when the transaction first read it).
    package func waiting(asking pool: PostgresPool) async throws -> Int64 {
        try await pool.query(
            "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))",
            [.int64(backend)]
        ).first?.int64(0) ?? 0
    }

    /// Waits (up to 30 s, however busy the machine) until at least `count` sessions wait for this
    /// hold; returns how many do.
    @discardableResult
    package func waitForWaiters(_ count: Int64 = 1, asking pool: PostgresPool) async throws -> Int64 {
        let deadline = ContinuousClock.now + .seconds(30)
        var waiting = try await self.waiting(asking: pool)
        while waiting < count && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
            waiting = try await self.waiting(asking: pool)
        }
        return waiting
    }

    /// Ends the transaction (nothing was changed) and closes the connection: the waiting go on.
    package func release() async {
        _ = try? await connection.query("ROLLBACK")
        await connection.close()
    }
}
