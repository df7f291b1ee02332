import CounterCore
import Persistence
import PostgresDriver

/// What PostgreSQL holds of reactions, for the reaction tests' checks.
public enum ReactionTallies {
    /// Per post and kind, the rows held and the count kept (`like`: `likes` and `likes_count`),
    /// read in one statement.
    public static func of(_ posts: [Int64], in pool: PostgresPool) async throws -> [PostKind: (rows: Int64, count: Int64)] {
        let rows = try await pool.query(
            """
            SELECT p.id, 'like', (SELECT count(*) FROM likes l WHERE l.post_id = p.id), p.likes_count
            FROM posts p WHERE p.id = ANY($1::bigint[])
            UNION ALL
            SELECT k.post_id, k.kind,
                   (SELECT count(*) FROM reactions r WHERE r.post_id = k.post_id AND r.kind = k.kind),
                   coalesce((SELECT count FROM reaction_counts c WHERE c.post_id = k.post_id AND c.kind = k.kind), 0)
            FROM (SELECT post_id, kind FROM reactions WHERE post_id = ANY($1::bigint[])
                  UNION SELECT post_id, kind FROM reaction_counts WHERE post_id = ANY($1::bigint[])) k
            """, [.int64Array(posts)])
        var result: [PostKind: (rows: Int64, count: Int64)] = [:]
        for row in rows {
            guard let kind = ReactionKind(row.string(1) ?? "") else {
                throw PostgresError(code: .unexpectedResult, message: "a reaction of kind \(row.string(1) ?? "NULL"), which is no kind")
            }
            result[PostKind(postID: try row.int64(0), kind: kind)] = (try row.int64(2), try row.int64(3))
        }
        return result
    }
}
