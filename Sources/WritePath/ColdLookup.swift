import CounterCore
import PostgresDriver

/// What a batch asks PostgreSQL of the posts Redis does not hold (cold posts), as plain values:
/// one statement, in one round trip and one snapshot, that says which posts exist with their
/// `likes_count`, which of the batch's (post, user) pairs are likes, and — for the cold posts the
/// batch writes that are small enough to load in passing — all their likers. No I/O.
///
/// A cold post has nothing pending (a post leaves Redis only once its changes are in
/// PostgreSQL, and a post never written through Redis had none), so PostgreSQL is its truth: a
/// read of it is answered from these rows, and nothing is loaded into Redis for it; a small post
/// the batch writes is decided on its likers from these rows, which the batch's write puts into
/// Redis together with its changes (`BatchWrite`).
///
/// In a deployment with other kinds than `like` (`reactions`), the same statement also reads
/// each post's other kinds' counts (`reaction_counts`), the asked pairs' other kinds
/// (`reactions`, by its unique `(user_id, post_id, kind)` index) and the other kinds' rows of
/// the posts loaded whole; a post is small enough to load when all its reactions together are.
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
        /// Per post, the users of its rows in `likes` that came back: the pairs asked that are
        /// likes, or — for a post loaded whole — every liker.
        var likers: [Int64: [Int64]] = [:]
        /// With reactions: per post, its other kinds' counts (kinds above zero).
        var kindCounts: [Int64: [ReactionKind: Int64]] = [:]
        /// With reactions: per post, the other kinds of its rows in `reactions` that came back,
        /// by user (sorted), as `likers`.
        var reactors: [Int64: [Int64: [ReactionKind]]] = [:]

        /// The posts that exist.
        var existing: Set<Int64> { Set(counts.keys) }

        /// The view of `post` for a decision: its `likes_count` and the membership of `users`
        /// (all asked). `nil` when the post does not exist.
        func view(of post: Int64, users: some Sequence<Int64>) -> ShardDecider.PostView? {
            guard let count = counts[post] else { return nil }
            let liked = Set(likers[post] ?? [])
            var members: [Int64: Bool] = [:]
            var others: [Int64: [ReactionKind]] = [:]
            let reacted = reactors[post] ?? [:]
            for user in users {
                members[user] = liked.contains(user)
                if let kinds = reacted[user] { others[user] = kinds }
            }
            return ShardDecider.PostView(likesCount: count, members: members, kindCounts: KindCounts(kindCounts[post] ?? [:]), others: others)
        }

        /// The view of a post loaded whole: its count is its likers, and every user's membership
        /// is known. `nil` when the post does not exist.
        func wholeView(of post: Int64, users: some Sequence<Int64>) -> ShardDecider.PostView? {
            guard counts[post] != nil else { return nil }
            let all = likers[post] ?? []
            let liked = Set(all)
            var members: [Int64: Bool] = [:]
            var others: [Int64: [ReactionKind]] = [:]
            let reacted = reactors[post] ?? [:]
            for user in users {
                members[user] = liked.contains(user)
                if let kinds = reacted[user] { others[user] = kinds }
            }
            var counts: [ReactionKind: Int64] = [:]
            for kinds in reacted.values { for kind in kinds { counts[kind, default: 0] += 1 } }
            return ShardDecider.PostView(likesCount: Int64(liked.count), members: members, kindCounts: KindCounts(counts), others: others)
        }
    }

    /// The posts looked up, in order.
    let posts: [Int64]
    /// The pairs whose membership is asked, in order (each once).
    let pairs: [Pair]
    /// The posts whose likers all come back when their `likes_count` is below `loadBelow`.
    let loading: [Int64]
    let loadBelow: Int64
    /// Whether the deployment has other kinds than `like`.
    let reactions: Bool

    init(posts: [Int64], pairs: [Pair] = [], loading: [Int64] = [], loadBelow: Int64 = 0, reactions: Bool = false) {
        self.reactions = reactions
        self.posts = posts
        var seen: Set<Pair> = []
        self.pairs = pairs.filter { seen.insert($0).inserted }
        self.loading = loading
        self.loadBelow = loadBelow
    }

    /// The rows `(id, likes_count, NULL)` of the existing posts.
    static let postsPart = "SELECT id, likes_count, NULL::bigint FROM posts WHERE id = ANY($1::bigint[])"

    /// The rows `(post_id, NULL, user_id)` of the likes among the pairs `$a[i], $b[i]`: a point
    /// lookup each by the `(user_id, post_id)` unique index, whatever the post's size.
    ///
    /// Written as a lateral subquery with `LIMIT 1` (the pair is unique) so that PostgreSQL
    /// cannot plan it as a join over `likes`: with a small or freshly grown table it chose a
    /// hash join over a scan of all of `likes` (seen: 4 ms a lookup at 50,000 rows, on every batch).
    static func pairsPart(_ a: Int, _ b: Int) -> String {
        """
        SELECT asked.post_id, NULL::bigint, l.user_id
        FROM unnest($\(a)::bigint[], $\(b)::bigint[]) AS asked(post_id, user_id)
        CROSS JOIN LATERAL (
          SELECT user_id FROM likes WHERE user_id = asked.user_id AND post_id = asked.post_id LIMIT 1
        ) l
        """
    }

    /// The rows `(post_id, NULL, user_id)` of every like of the posts of `$a` whose
    /// `likes_count` is below `$b`: the posts filtered first, then each one's likes by the
    /// `likes (post_id)` index, so a large post's rows are never read.
    ///
    /// The likes are a lateral subquery behind `OFFSET 0` (which keeps PostgreSQL from folding
    /// it into a join, and cuts nothing) so that they are read post by post by the index: as a
    /// join, a small or freshly grown `likes` was planned as a hash join over a scan of all of it
    /// (seen: 4 ms a lookup at 50,000 rows, 0.8 ms this way, on every batch).
    static func loadingPart(_ a: Int, _ b: Int) -> String {
        """
        SELECT p.id, NULL::bigint, l.user_id
        FROM posts p
        CROSS JOIN LATERAL (SELECT user_id FROM likes WHERE post_id = p.id OFFSET 0) l
        WHERE p.id = ANY($\(a)::bigint[]) AND p.likes_count < $\(b)
        """
    }

    /// With reactions, every part's rows are `(post_id, count, user_id, kind)`: the posts (kind
    /// `NULL`), their other kinds' counts, and the likes (kind `NULL`) and other kinds of the
    /// pairs asked and of the posts loaded whole.
    static let reactionPostsPart = """
        SELECT id, likes_count, NULL::bigint, NULL::text FROM posts WHERE id = ANY($1::bigint[])
        UNION ALL
        SELECT post_id, count, NULL::bigint, kind FROM reaction_counts WHERE post_id = ANY($1::bigint[]) AND count > 0
        """

    static func reactionPairsPart(_ a: Int, _ b: Int) -> String {
        """
        SELECT asked.post_id, NULL::bigint, l.user_id, NULL::text
        FROM unnest($\(a)::bigint[], $\(b)::bigint[]) AS asked(post_id, user_id)
        CROSS JOIN LATERAL (
          SELECT user_id FROM likes WHERE user_id = asked.user_id AND post_id = asked.post_id LIMIT 1
        ) l
        UNION ALL
        SELECT asked.post_id, NULL::bigint, r.user_id, r.kind
        FROM unnest($\(a)::bigint[], $\(b)::bigint[]) AS asked(post_id, user_id)
        CROSS JOIN LATERAL (
          SELECT user_id, kind FROM reactions WHERE user_id = asked.user_id AND post_id = asked.post_id
        ) r
        """
    }

    static func reactionLoadingPart(_ a: Int, _ b: Int) -> String {
        """
        SELECT p.id, NULL::bigint, l.user_id, l.kind
        FROM posts p
        CROSS JOIN LATERAL (
          SELECT user_id, NULL::text AS kind FROM likes WHERE post_id = p.id
          UNION ALL
          SELECT user_id, kind FROM reactions WHERE post_id = p.id
          OFFSET 0
        ) l
        WHERE p.id = ANY($\(a)::bigint[])
          AND p.likes_count + coalesce((SELECT sum(c.count) FROM reaction_counts c WHERE c.post_id = p.id), 0) < $\(b)
        """
    }

    /// The statement to run: the posts, and the parts that are asked for.
    var query: String {
        if reactions {
            var parts = [Self.reactionPostsPart]
            var next = 2
            if !pairs.isEmpty {
                parts.append(Self.reactionPairsPart(next, next + 1))
                next += 2
            }
            if !loading.isEmpty { parts.append(Self.reactionLoadingPart(next, next + 1)) }
            return parts.joined(separator: "\nUNION ALL\n")
        }
        var parts = [Self.postsPart]
        var next = 2
        if !pairs.isEmpty {
            parts.append(Self.pairsPart(next, next + 1))
            next += 2
        }
        if !loading.isEmpty { parts.append(Self.loadingPart(next, next + 1)) }
        return parts.joined(separator: "\nUNION ALL\n")
    }

    /// The parameters of `query`.
    var parameters: [PostgresValue] {
        var values: [PostgresValue] = [.int64Array(posts)]
        if !pairs.isEmpty { values += [.int64Array(pairs.map(\.post)), .int64Array(pairs.map(\.user))] }
        if !loading.isEmpty { values += [.int64Array(loading), .int64(loadBelow)] }
        return values
    }

    /// Reads the rows of `query`.
    /// - Throws: `PostgresError(.unexpectedResult)` for a row that is neither kind.
    static func found(in rows: PostgresRows) throws -> Found {
        var found = Found()
        for row in rows {
            let post = try row.int64(0)
            if row.values.count > 3, let name = row.string(3) {
                guard let kind = ReactionKind(name), !kind.isLike else {
                    throw PostgresError(code: .unexpectedResult, message: "post \(post) has a reaction of kind '\(name)', which is no kind")
                }
                if let count = try row.optionalInt64(1) {
                    found.kindCounts[post, default: [:]][kind] = count
                } else if let user = try row.optionalInt64(2) {
                    // A pair asked of a post loaded whole comes back twice: kept once.
                    var kinds = found.reactors[post]?[user] ?? []
                    guard !kinds.contains(kind) else { continue }
                    kinds.append(kind)
                    kinds.sort()
                    found.reactors[post, default: [:]][user] = kinds
                } else {
                    throw PostgresError(code: .unexpectedResult, message: "a row of the cold lookup of post \(post) has neither a count nor a user")
                }
                continue
            }
            if let count = try row.optionalInt64(1) {
                found.counts[post] = count
            } else if let user = try row.optionalInt64(2) {
                found.likers[post, default: []].append(user)
            } else {
                throw PostgresError(code: .unexpectedResult, message: "a row of the cold lookup of post \(post) has neither a count nor a user")
            }
        }
        return found
    }
}
