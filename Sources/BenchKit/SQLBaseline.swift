import CounterCore
import Foundation
import PostgresDriver
import Synchronization

/// The baselines the node must beat, run directly on PostgreSQL with one connection per
/// simulated client, closed loop, each request a new user on one hot post.
public enum SQLBaseline: String, CaseIterable, Sendable {
    /// The seed's Laravel transaction: find the post, lock the like row, insert or delete it,
    /// move `likes_count` by one, read the count back, commit.
    case seedSQL = "seed-sql"
    /// The best single-statement toggle (`baselines/upsert_toggle.pgbench.sql`).
    case sqlUpsert = "sql-upsert"

    static let upsertToggle = """
        WITH del AS (DELETE FROM likes WHERE user_id = $1 AND post_id = $2 RETURNING 1),
        ins AS (INSERT INTO likes (user_id, post_id, created_at, updated_at)
                SELECT $1, $2, now(), now() WHERE NOT EXISTS (SELECT 1 FROM del)
                ON CONFLICT DO NOTHING RETURNING 1)
        UPDATE posts SET likes_count = likes_count + (SELECT count(*) FROM ins) - (SELECT count(*) FROM del)
        WHERE id = $2 RETURNING likes_count
        """

    /// One toggle of `user` on `post`, the baseline's way.
    static func toggle(_ baseline: SQLBaseline, user: Int64, post: Int64, on connection: PostgresConnection) async throws {
        switch baseline {
        case .sqlUpsert:
            try await connection.query(upsertToggle, [.int64(user), .int64(post)])
        case .seedSQL:
            _ = try await connection.seedToggle(user: user, post: post)
        }
    }

    /// Runs `clients` connections for `warmup + duration`, toggling new users on `post`.
    public func run(
        postgresURL: String, post: Int64, clients: Int, duration: Duration, warmup: Duration,
        progress: @escaping @Sendable (Int, Int) -> Void
    ) async throws -> LoadResult {
        let started = ContinuousClock.now
        let measureFrom = started + warmup
        let end = measureFrom + duration
        let collector = BaselineCollector()
        var configuration = PostgresConfiguration(url: postgresURL)
        configuration.applicationName = "counter-bench-\(rawValue)"
        let connections = (0..<clients).map { _ in PostgresConnection(configuration: configuration) }
        // Requests still waiting for a lock when the run ends are cut off rather than waited for.
        let limit = Int((warmup + duration).inSeconds * 1_000) + 2_000
        for connection in connections {
            try await connection.query(
                "SELECT set_config('statement_timeout', $1, false), set_config('lock_timeout', $1, false)",
                [.text(String(limit))])
        }
        let baseline = self
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, connection) in connections.enumerated() {
                group.addTask {
                    var user = Int64.random(in: 1...1_000_000) * 1_000_000_000 + Int64(index) * 10_000_000
                    var local = LatencyHistogram()
                    var statuses: [Int: Int] = [:]
                    var errors: [String: Int] = [:]
                    while ContinuousClock.now < end {
                        user += 1
                        let sent = ContinuousClock.now
                        do {
                            try await SQLBaseline.toggle(baseline, user: user, post: post, on: connection)
                            // Only answers inside the measured window count, as for HTTP targets.
                            if ContinuousClock.now > end {
                                if sent >= measureFrom { errors["unfinished at the end of the run", default: 0] += 1 }
                            } else if sent >= measureFrom {
                                let latency = ContinuousClock.now - sent
                                local.record(UInt64(latency.components.seconds * 1_000_000 + latency.components.attoseconds / 1_000_000_000_000))
                                statuses[200, default: 0] += 1
                                collector.perSecond.add(1, ordering: .relaxed)
                            }
                        } catch {
                            if sent >= measureFrom { errors["\(error)".prefix(60).description, default: 0] += 1 }
                        }
                    }
                    let histogram = local
                    let answered = statuses
                    let failed = errors
                    collector.result.withLock { result in
                        result.histogram.merge(histogram)
                        result.statuses.merge(answered, uniquingKeysWith: +)
                        result.errors.merge(failed, uniquingKeysWith: +)
                    }
                    await connection.close()
                }
            }
            group.addTask {
                var second = 0
                while ContinuousClock.now < end {
                    try await Task.sleep(for: .seconds(1))
                    second += 1
                    let count = collector.perSecond.exchange(0, ordering: .relaxed)
                    if started + .seconds(second - 1) >= measureFrom { collector.result.withLock { $0.throughputTimeline.append(count) } }
                    progress(second, count)
                }
            }
            try await group.waitForAll()
        }
        return collector.result.withLock { result in
            var final = result
            final.measuredSeconds = duration.inSeconds
            return final
        }
    }
}

/// What the baseline's clients gather, shared among them.
private final class BaselineCollector: Sendable {
    let result = Mutex(LoadResult())
    let perSecond = Atomic<Int>(0)
}

extension PostgresConnection {
    /// The seed's Laravel toggle as one transaction on this connection; returns the new count.
    func seedToggle(user: Int64, post: Int64) throws -> Int64 {
        try query("BEGIN")
        do {
            guard !(try query("SELECT id FROM posts WHERE id = $1", [.int64(post)])).isEmpty else {
                throw PostgresError(code: .unexpectedResult, message: "post \(post) not found")
            }
            let existing = try query("SELECT 1 FROM likes WHERE user_id = $1 AND post_id = $2 FOR UPDATE", [.int64(user), .int64(post)])
            if existing.isEmpty {
                try query(
                    "INSERT INTO likes (user_id, post_id, created_at, updated_at) VALUES ($1, $2, now(), now())",
                    [.int64(user), .int64(post)])
                try query("UPDATE posts SET likes_count = likes_count + 1 WHERE id = $1", [.int64(post)])
            } else {
                try query("DELETE FROM likes WHERE user_id = $1 AND post_id = $2", [.int64(user), .int64(post)])
                try query("UPDATE posts SET likes_count = likes_count - 1 WHERE id = $1", [.int64(post)])
            }
            let count = try query("SELECT likes_count FROM posts WHERE id = $1", [.int64(post)]).first?.int64(0) ?? 0
            try query("COMMIT")
            return count
        } catch {
            _ = try? query("ROLLBACK")
            throw error
        }
    }
}
