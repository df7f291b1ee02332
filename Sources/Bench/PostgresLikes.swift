import BenchKit
import PostgresDriver

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
        let rows = try await pool.query(
            """
            SELECT l.user_id, l.post_id FROM unnest($1::bigint[]) AS wanted(id) JOIN likes l ON l.post_id = wanted.id
            """, [.int64Array(posts)])
        return try rows.map { CorrectnessCheck.Pair(user: try $0.int64(0), post: try $0.int64(1)) }
    }

    /// The rows and counts of `posts`, read by one statement, so from one snapshot: a write
    /// that commits meanwhile (a request still in flight when the load stopped) is in both or in
    /// neither, never a row without its count. Each post's rows are counted here, from every row
    /// read, not by a `count(*)` subquery per post: for a million posts PostgreSQL once planned
    /// that subquery as a scan of `likes` per post (seen: over 7 minutes instead of seconds).
    static func read(_ posts: [Int64], pool: PostgresPool) async throws -> PostgresLikes {
        let rows = try await pool.query(
            """
            SELECT true, l.user_id, l.post_id FROM unnest($1::bigint[]) AS wanted(id) JOIN likes l ON l.post_id = wanted.id
            UNION ALL
            SELECT false, p.likes_count, p.id FROM unnest($1::bigint[]) AS wanted(id) JOIN posts p ON p.id = wanted.id
            """, [.int64Array(posts)])
        var pairs: [CorrectnessCheck.Pair] = []
        var likesCounts: [Int64: Int64] = [:]
        for row in rows {
            if try row.bool(0) {
                pairs.append(CorrectnessCheck.Pair(user: try row.int64(1), post: try row.int64(2)))
            } else {
                likesCounts[try row.int64(2)] = try row.int64(1)
            }
        }
        var rowsPerPost: [Int64: Int64] = [:]
        for pair in pairs { rowsPerPost[pair.post, default: 0] += 1 }
        var counts: [Int64: (likesCount: Int64, rows: Int64)] = [:]
        for (post, likesCount) in likesCounts { counts[post] = (likesCount, rowsPerPost[post] ?? 0) }
        return PostgresLikes(pairs: pairs, counts: counts)
    }
}
