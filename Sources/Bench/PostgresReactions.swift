import BenchKit
import PostgresDriver

/// What PostgreSQL holds of a reaction run's posts, for its check: the kinds each (user, post)
/// holds (a `likes` row is `like`), and per post and kind its count beside its rows — read by one
/// statement, from one snapshot.
struct PostgresReactions {
    var held: [CorrectnessCheck.Pair: Set<String>]
    var counts: [CorrectnessCheck.KindTally: (count: Int64, rows: Int64)]

    static func read(_ posts: [Int64], pool: PostgresPool) async throws -> PostgresReactions {
        let rows = try await pool.query(
            """
            SELECT 'row', l.user_id, l.post_id, 'like' FROM unnest($1::bigint[]) AS wanted(id) JOIN likes l ON l.post_id = wanted.id
            UNION ALL
            SELECT 'row', r.user_id, r.post_id, r.kind FROM unnest($1::bigint[]) AS wanted(id) JOIN reactions r ON r.post_id = wanted.id
            UNION ALL
            SELECT 'count', p.likes_count, p.id, 'like' FROM unnest($1::bigint[]) AS wanted(id) JOIN posts p ON p.id = wanted.id
            UNION ALL
            SELECT 'count', c.count, c.post_id, c.kind FROM unnest($1::bigint[]) AS wanted(id) JOIN reaction_counts c ON c.post_id = wanted.id
            """, [.int64Array(posts)])
        var held: [CorrectnessCheck.Pair: Set<String>] = [:]
        var kept: [CorrectnessCheck.KindTally: Int64] = [:]
        var counted: [CorrectnessCheck.KindTally: Int64] = [:]
        for row in rows {
            let kind = row.string(3) ?? ""
            let post = try row.int64(2)
            if row.string(0) == "row" {
                held[CorrectnessCheck.Pair(user: try row.int64(1), post: post), default: []].insert(kind)
                counted[CorrectnessCheck.KindTally(post: post, kind: kind), default: 0] += 1
            } else {
                kept[CorrectnessCheck.KindTally(post: post, kind: kind)] = try row.int64(1)
            }
        }
        var counts: [CorrectnessCheck.KindTally: (count: Int64, rows: Int64)] = [:]
        for tally in Set(kept.keys).union(counted.keys) { counts[tally] = (kept[tally] ?? 0, counted[tally] ?? 0) }
        return PostgresReactions(held: held, counts: counts)
    }
}
