import BenchKit
import Persistence

/// What PostgreSQL holds of a bench's posts after a run, for its correctness check: every
/// `likes` row of them, and per post its `likes_count` beside the rows counted.
struct PostgresLikes {
    /// The (user, post) of every row, duplicates included.
    var pairs: [CorrectnessCheck.Pair]
    /// Per existing post: `likes_count`, and its rows among `pairs`.
    var counts: [Int64: (likesCount: Int64, rows: Int64)]

    /// The `likes` rows of `posts`. Joined to the list rather than `= ANY($1)`: with a million
    /// posts, a plan that filters a scan by `= ANY` compares every row with every id (seen:
    /// minutes instead of seconds).
    static func pairs(of posts: [Int64], pool: PostgresPool) async throws -> [CorrectnessCheck.Pair] {
        let rows = try await pool.query("""
            SELECT l.user_id, l.post_id FROM unnest($1::bigint[]) AS wanted(id) JOIN likes l ON l.post_id = wanted.id
            """, [.int64Array(posts)])
        return try rows.map { CorrectnessCheck.Pair(user: try $0.int64(0), post: try $0.int64(1)) }
    }

    /// The rows and counts of `posts`. Each post's rows are counted here, from every row read,
    /// not by a `count(*)` subquery per post: for a million posts PostgreSQL once planned that
    /// subquery as a scan of `likes` per post (seen: over 7 minutes instead of seconds).
    static func read(_ posts: [Int64], pool: PostgresPool) async throws -> PostgresLikes {
        let pairs = try await pairs(of: posts, pool: pool)
        var rowsPerPost: [Int64: Int64] = [:]
        for pair in pairs { rowsPerPost[pair.post, default: 0] += 1 }
        let countRows = try await pool.query("""
            SELECT p.id, p.likes_count FROM unnest($1::bigint[]) AS wanted(id) JOIN posts p ON p.id = wanted.id
            """, [.int64Array(posts)])
        var counts: [Int64: (likesCount: Int64, rows: Int64)] = [:]
        for row in countRows {
            let post = try row.int64(0)
            counts[post] = (try row.int64(1), rowsPerPost[post] ?? 0)
        }
        return PostgresLikes(pairs: pairs, counts: counts)
    }
}
