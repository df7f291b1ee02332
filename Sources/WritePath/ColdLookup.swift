import Persistence

/// What a batch asks PostgreSQL of the posts Redis does not hold (cold posts), as plain values:
/// one statement, in one round trip, that says which posts exist with their `likes_count`, and
/// which of the batch's (post, user) pairs are likes. No I/O.
///
/// A cold post has nothing pending (a post leaves Redis only once its changes are in
/// PostgreSQL, and a post never written through Redis had none), so PostgreSQL is its truth: a
/// read of it is answered from these rows, and nothing is loaded into Redis for it.
struct ColdLookup: Equatable {
    /// A user of a post whose membership is asked.
    struct Pair: Hashable {
        let post: Int64
        let user: Int64
    }

    /// What the rows say.
    struct Found: Equatable, Sendable {
        /// The posts that exist, with their `likes_count`.
        var counts: [Int64: Int64] = [:]
        /// The pairs, among those asked, that are likes.
        var liked: Set<Pair> = []

        /// The posts that exist.
        var existing: Set<Int64> { Set(counts.keys) }

        /// The view of `post` for a decision: its count and the membership of `users` (all
        /// asked). `nil` when the post does not exist.
        func view(of post: Int64, users: some Sequence<Int64>) -> ShardDecider.PostView? {
            guard let count = counts[post] else { return nil }
            var members: [Int64: Bool] = [:]
            for user in users { members[user] = liked.contains(Pair(post: post, user: user)) }
            return ShardDecider.PostView(likesCount: count, members: members)
        }
    }

    /// The posts looked up, in order.
    let posts: [Int64]
    /// The pairs whose membership is asked, in order (each once).
    let pairs: [Pair]

    init(posts: [Int64], pairs: [Pair] = []) {
        self.posts = posts
        var seen: Set<Pair> = []
        self.pairs = pairs.filter { seen.insert($0).inserted }
    }

    /// One statement: a row `(id, likes_count, NULL)` per existing post of `$1`, and a row
    /// `(post_id, NULL, user_id)` per like among the pairs `$2[i], $3[i]` (found by the
    /// `(user_id, post_id)` unique index: a point lookup each, whatever the post's size).
    static let postsAndLikesQuery = """
        SELECT id, likes_count, NULL::bigint FROM posts WHERE id = ANY($1::bigint[])
        UNION ALL
        SELECT l.post_id, NULL::bigint, l.user_id
        FROM likes l JOIN unnest($2::bigint[], $3::bigint[]) AS asked(post_id, user_id)
          ON l.user_id = asked.user_id AND l.post_id = asked.post_id
        """

    /// Without pairs: the rows of the posts alone (`likes` is not read).
    static let postsQuery = "SELECT id, likes_count, NULL::bigint FROM posts WHERE id = ANY($1::bigint[])"

    /// The statement to run.
    var query: String { pairs.isEmpty ? Self.postsQuery : Self.postsAndLikesQuery }

    /// The parameters of `query`.
    var parameters: [PostgresValue] {
        pairs.isEmpty ? [.int64Array(posts)] : [.int64Array(posts), .int64Array(pairs.map(\.post)), .int64Array(pairs.map(\.user))]
    }

    /// Reads the rows of `query`.
    /// - Throws: `PostgresError(.unexpectedResult)` for a row that is neither kind.
    static func found(in rows: PostgresRows) throws -> Found {
        var found = Found()
        for row in rows {
            let post = try row.int64(0)
            if let count = try row.optionalInt64(1) {
                found.counts[post] = count
            } else if let user = try row.optionalInt64(2) {
                found.liked.insert(Pair(post: post, user: user))
            } else {
                throw PostgresError(code: .unexpectedResult, message: "a row of the cold lookup of post \(post) has neither a count nor a user")
            }
        }
        return found
    }
}
