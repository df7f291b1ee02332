import PostgresDriver

/// What PostgreSQL holds of posts, as the operators' checks read and repair it (`/admin/inspect`,
/// `/admin/reconcile` and their cluster-wide forms): `posts.likes_count` against the `likes` rows
/// it counts, a post's likers, pages of all posts.
public struct PostRecords: Sendable {
    /// A post's count against its rows.
    public struct CountCheck: Sendable, Equatable {
        public let postID: Int64
        /// `posts.likes_count`.
        public let likesCount: Int64
        /// The post's rows in `likes`.
        public let likesRows: Int64

        public init(postID: Int64, likesCount: Int64, likesRows: Int64) {
            self.postID = postID
            self.likesCount = likesCount
            self.likesRows = likesRows
        }
    }

    /// One post as an inspection sees it.
    public struct Inspection: Sendable, Equatable {
        /// `posts.likes_count`.
        public let likesCount: Int64
        /// The post's rows in `likes`.
        public let likesRows: Int64
        /// Whether the user asked about has a row; `nil` when none was asked about.
        public let isLiked: Bool?

        public init(likesCount: Int64, likesRows: Int64, isLiked: Bool?) {
            self.likesCount = likesCount
            self.likesRows = likesRows
            self.isLiked = isLiked
        }
    }

    private let pool: PostgresPool

    /// Reads and repairs on `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// `post`'s count, its rows and, for `user`, whether that user has a row; `nil` when the post
    /// does not exist.
    public func inspect(post: Int64, user: Int64?) async throws -> Inspection? {
        let rows = try await pool.query(
            """
            SELECT p.likes_count, (SELECT count(*) FROM likes l WHERE l.post_id = $1),
                   (SELECT count(*) FROM likes l WHERE l.post_id = $1 AND l.user_id = $2)
            FROM posts p WHERE p.id = $1
            """, [.int64(post), user.map { .int64($0) } ?? .null])
        guard let row = rows.first else { return nil }
        let userRows = try row.int64(2)
        return Inspection(likesCount: try row.int64(0), likesRows: try row.int64(1), isLiked: user == nil ? nil : userRows > 0)
    }

    /// The count and rows of each of `posts` that exists, in id order.
    public func counts(of posts: [Int64]) async throws -> [CountCheck] {
        try Self.checks(
            await pool.query(
                """
                SELECT p.id, p.likes_count, (SELECT count(*) FROM likes l WHERE l.post_id = p.id)
                FROM posts p WHERE p.id = ANY($1::bigint[]) ORDER BY p.id
                """, [.int64Array(posts)]))
    }

    /// The count and rows of the first `limit` posts with ids above `after`, in id order.
    public func counts(after: Int64, limit: Int) async throws -> [CountCheck] {
        try Self.checks(
            await pool.query(
                """
                SELECT p.id, p.likes_count, (SELECT count(*) FROM likes l WHERE l.post_id = p.id)
                FROM posts p WHERE p.id > $1 ORDER BY p.id LIMIT $2
                """, [.int64(after), .int64(Int64(limit))]))
    }

    private static func checks(_ rows: PostgresRows) throws -> [CountCheck] {
        try rows.map { CountCheck(postID: try $0.int64(0), likesCount: try $0.int64(1), likesRows: try $0.int64(2)) }
    }

    /// Sets `post`'s `likes_count` to its rows — safely while the node runs: the post's row is
    /// locked first, so a flush transaction for the post either committed before (its rows are
    /// counted) or waits and then moves the repaired count by its own delta.
    /// - Returns: whether the post exists (a post deleted meanwhile has nothing to repair).
    @discardableResult
    public func repairCount(of post: Int64) async throws -> Bool {
        try await pool.withTransaction { connection in
            let locked = try connection.query("SELECT id FROM posts WHERE id = $1 FOR UPDATE", [.int64(post)])
            guard !locked.isEmpty else { return false }
            try connection.query(
                "UPDATE posts SET likes_count = (SELECT count(*) FROM likes WHERE post_id = $1) WHERE id = $1",
                [.int64(post)])
            return true
        }
    }

    /// One post's count of one kind other than `like` (`reaction_counts`) against its rows
    /// (`reactions`); a post without a count row for a kind counts 0 of it.
    public struct KindCheck: Sendable, Equatable {
        public let postID: Int64
        public let kind: String
        /// `reaction_counts.count` (0 when there is no row).
        public let count: Int64
        /// The post's rows of the kind in `reactions`.
        public let rows: Int64

        public init(postID: Int64, kind: String, count: Int64, rows: Int64) {
            self.postID = postID
            self.kind = kind
            self.count = count
            self.rows = rows
        }
    }

    /// Every (post, kind other than `like`) of `posts` whose `reaction_counts` row disagrees with
    /// its `reactions` rows, in post and kind order. A deployment of likes only has none.
    public func kindDrifts(of posts: [Int64]) async throws -> [KindCheck] {
        let rows = try await pool.query(
            """
            SELECT coalesce(c.post_id, r.post_id) AS post_id, coalesce(c.kind, r.kind) AS kind,
                   coalesce(c.count, 0), coalesce(r.rows, 0)
            FROM (SELECT post_id, kind, count FROM reaction_counts WHERE post_id = ANY($1::bigint[])) c
            FULL JOIN (
                SELECT post_id, kind, count(*) AS rows FROM reactions WHERE post_id = ANY($1::bigint[]) GROUP BY post_id, kind
            ) r ON r.post_id = c.post_id AND r.kind = c.kind
            WHERE coalesce(c.count, 0) <> coalesce(r.rows, 0)
            ORDER BY 1, 2
            """, [.int64Array(posts)])
        return try rows.map { KindCheck(postID: try $0.int64(0), kind: $0.string(1) ?? "", count: try $0.int64(2), rows: try $0.int64(3)) }
    }

    /// The rows of each kind other than `like` that each of `posts` holds (kinds without rows are
    /// left out; posts without any have no entry).
    public func kindRows(of posts: [Int64]) async throws -> [Int64: [String: Int64]] {
        let rows = try await pool.query(
            "SELECT post_id, kind, count(*) FROM reactions WHERE post_id = ANY($1::bigint[]) GROUP BY post_id, kind",
            [.int64Array(posts)])
        var held: [Int64: [String: Int64]] = [:]
        for row in rows { held[try row.int64(0), default: [:]][row.string(1) ?? ""] = try row.int64(2) }
        return held
    }

    /// Sets each of `post`'s `reaction_counts` to its `reactions` rows (0 for a kind without
    /// rows) — safely while the node runs, as `repairCount(of:)`: the post's row is locked first,
    /// and every flush that writes the post's reactions locks it too.
    /// - Returns: whether the post exists.
    @discardableResult
    public func repairKindCounts(of post: Int64) async throws -> Bool {
        try await pool.withTransaction { connection in
            let locked = try connection.query("SELECT id FROM posts WHERE id = $1 FOR UPDATE", [.int64(post)])
            guard !locked.isEmpty else { return false }
            try connection.query(
                """
                UPDATE reaction_counts c SET count = 0
                WHERE c.post_id = $1 AND NOT EXISTS (SELECT 1 FROM reactions r WHERE r.post_id = $1 AND r.kind = c.kind)
                """, [.int64(post)])
            try connection.query(
                """
                INSERT INTO reaction_counts AS c (post_id, kind, count)
                SELECT post_id, kind, count(*) FROM reactions WHERE post_id = $1 GROUP BY post_id, kind
                ON CONFLICT (post_id, kind) DO UPDATE SET count = EXCLUDED.count
                """, [.int64(post)])
            return true
        }
    }

    /// How many rows `post` has in `likes`.
    public func rowCount(of post: Int64) async throws -> Int64 {
        let rows = try await pool.query("SELECT count(*) FROM likes WHERE post_id = $1", [.int64(post)])
        return try rows.first?.int64(0) ?? 0
    }

    /// The users with a `likes` row for `post`.
    public func likers(of post: Int64) async throws -> Set<Int64> {
        let rows = try await pool.query("SELECT user_id FROM likes WHERE post_id = $1", [.int64(post)])
        return Set(try rows.map { try $0.int64(0) })
    }

    /// The ids of the first `limit` posts above `after`, ascending: a page of all posts.
    public func postIDs(after: Int64, limit: Int) async throws -> [Int64] {
        let rows = try await pool.query("SELECT id FROM posts WHERE id > $1 ORDER BY id LIMIT $2", [.int64(after), .int64(Int64(limit))])
        return try rows.map { try $0.int64(0) }
    }
}
