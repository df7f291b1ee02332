import CounterCore
import Foundation
import PostgresDriver

/// What a bench does to PostgreSQL around the posts it seeds, when they are many, so that each
/// run meets a database as a production one would be:
/// - after seeding, `ANALYZE posts`: the run starts on statistics that know the posts, not on
///   those of whatever the table held before (left to autovacuum, they were those of a nearly
///   empty table, on which PostgreSQL plans look-ups of `posts` as sequential scans);
/// - after deleting them, `VACUUM (ANALYZE)` of the tables the deletion left dead rows in,
///   instead of a million dead `posts` rows and their likes' index entries left to the next run —
///   also after a run of few posts with many likes (`hot` leaves one post with 200,000–300,000):
///   the next run's look-ups walked their dead index entries (a zipf1m run after 231,000 such
///   likes: PostgreSQL 106.5 µs per request and lag p99 1,052 ms; after `VACUUM`, 65.2 µs and
///   499 ms).
enum SeededPostsUpkeep {
    /// Seeded posts (or, after a deletion, rows deleted: posts and their likes) from which a bench
    /// does either (below it, autovacuum's own pace is enough).
    static let threshold = 10_000

    /// Analyzes `posts` after `seeded` posts were inserted, when `seeded` reaches `threshold`.
    static func run(afterSeeding seeded: Int, pool: PostgresPool) async throws {
        guard seeded >= threshold else { return }
        _ = try await pool.query("ANALYZE posts")
    }

    /// The tables a deletion of posts leaves dead rows in (their rows cascade); those of
    /// reactions only where the schema has them.
    static let tables = ["posts", "likes", "reactions", "reaction_counts"]

    /// Vacuums and analyzes `tables` (those that exist) after `deleted` posts went with `likes`
    /// likes, when together they reach `threshold`, saying so on standard output. A failure is
    /// reported, not thrown: the run's figures are already taken.
    static func run(afterDeleting deleted: Int, likes: Int64 = 0, pool: PostgresPool) async {
        guard Int64(deleted) + likes >= Int64(threshold) else { return }
        let started = ContinuousClock.now
        print("  vacuuming what deleting \(deleted) posts and \(likes) likes left (VACUUM (ANALYZE) of their tables) …")
        do {
            // A row deleted is only reclaimed once no snapshot taken before the deletion is
            // left: transactions that started before now (a node's flush, an autovacuum's
            // ANALYZE of the same tables) are waited for, at most 30 s.
            let deletedBy = try await pool.query("SELECT clock_timestamp()::text").first?.string(0) ?? ""
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline {
                let older = try await pool.query(
                    """
                    SELECT count(*) FROM pg_stat_activity
                    WHERE pid <> pg_backend_pid() AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND xact_start < $1::timestamptz
                    """, [.text(deletedBy)])
                if try older.first?.int64(0) == 0 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            var present: [String] = []
            for table in tables {
                let rows = try await pool.query("SELECT to_regclass($1) IS NOT NULL", [.text(table)])
                if try rows.first?.bool(0) == true { present.append(table) }
            }
            _ = try await pool.query("VACUUM (ANALYZE) " + present.joined(separator: ", "))
            print(String(format: "  vacuumed %@ in %.1f s", present.joined(separator: ", "), (ContinuousClock.now - started).inSeconds))
        } catch {
            print("  the vacuum after the run failed (the figures stand; autovacuum will get to it): \(error)")
        }
    }
}
