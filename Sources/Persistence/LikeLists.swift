import CounterCore
import PostgresDriver

/// The lists of likes as PostgreSQL has them, newest first: a post's likers
/// (`likes_post_id_created_at_index`) and a user's likes (`likes_user_id_created_at_index`),
/// one keyset page at a time.
public struct LikeLists: Sendable {
    /// A place in a list: the like's time (`created_at`, in microseconds since 1970, as
    /// PostgreSQL keeps it) and the id listed (the user in a post's likers, the post in a
    /// user's likes). A list is in the order of `precedes`: newer first, then the smaller id.
    public struct Position: Sendable, Hashable {
        public let microseconds: Int64
        public let id: Int64
        /// In a user's reactions (`Kind.reactions`), the reaction's kind (`like` for a like);
        /// empty in the other lists, whose items are all of one kind.
        public let kind: String

        public init(microseconds: Int64, id: Int64, kind: String = "") {
            self.microseconds = microseconds
            self.id = id
            self.kind = kind
        }

        /// Whether `self` comes before `other` in a list: newer first, then the smaller id, then
        /// the kind's name.
        public func precedes(_ other: Position) -> Bool {
            if microseconds != other.microseconds { return microseconds > other.microseconds }
            return id != other.id ? id < other.id : kind < other.kind
        }
    }

    private let pool: PostgresPool

    /// The lists, read on `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Which list.
    public enum Kind: Sendable {
        /// A post's likers: `id` is the post, the rows' ids are users.
        case likers
        /// A user's likes: `id` is the user, the rows' ids are posts.
        case likes
        /// A user's reactions of every kind (likes included): `id` is the user, the rows' ids are
        /// posts, each with its kind (`userReactionsPage`).
        case reactions
    }

    /// At most `limit` rows of `kind`'s list of `id` that come after `after` (from the start
    /// when `nil`), in order. `created_at` is read whole (microseconds): a position made from a
    /// rounded time would skip rows of the same millisecond. A row without `created_at` (made
    /// by hand: the flusher always writes it) has no place in the order and is not listed.
    public func page(_ kind: Kind, of id: Int64, after: Position?, limit: Int) async throws -> [Position] {
        precondition(limit > 0, "a page holds at least one row")
        if kind == .reactions { return try await userReactionsPage(of: id, after: after, limit: limit) }
        let statements = kind == .likers ? Self.likersPages : Self.likesPages
        let rows: PostgresRows
        if let after {
            rows = try await pool.query(prepared: statements.after, [.int64(id), .int64(after.microseconds), .int64(after.id), .int64(Int64(limit))])
        } else {
            rows = try await pool.query(prepared: statements.first, [.int64(id), .int64(Int64(limit))])
        }
        var page: [Position] = []
        page.reserveCapacity(rows.count)
        for row in rows { page.append(Position(microseconds: try row.int64(1), id: try row.int64(0))) }
        return page
    }

    /// At most `limit` of `post`'s users holding `kind` that come after `after`, newest first, as
    /// `page` lists likers (`like`: a page of the likers); read from `reactions` by
    /// `reactions_post_id_kind_created_at_index` for another kind.
    public func reactorsPage(of post: Int64, kind: ReactionKind, after: Position?, limit: Int) async throws -> [Position] {
        guard !kind.isLike else { return try await page(.likers, of: post, after: after, limit: limit) }
        precondition(limit > 0, "a page holds at least one row")
        let rows: PostgresRows
        if let after {
            rows = try await pool.query(
                prepared: Self.reactorsAfter, [.int64(post), .int64(after.microseconds), .int64(after.id), .int64(Int64(limit)), .text(kind.name)])
        } else {
            rows = try await pool.query(prepared: Self.reactorsFirst, [.int64(post), .int64(Int64(limit)), .text(kind.name)])
        }
        var page: [Position] = []
        page.reserveCapacity(rows.count)
        for row in rows { page.append(Position(microseconds: try row.int64(1), id: try row.int64(0))) }
        return page
    }

    private static let reactorsFirst = PreparedStatement(
        name: "counter_reactors_page",
        sql: """
            SELECT user_id, (extract(epoch FROM created_at) * 1000000)::bigint FROM reactions
            WHERE post_id = $1 AND kind = $3 AND created_at IS NOT NULL ORDER BY created_at DESC, user_id LIMIT $2
            """)

    private static let reactorsAfter = PreparedStatement(
        name: "counter_reactors_page_after",
        sql: """
            SELECT user_id, (extract(epoch FROM created_at) * 1000000)::bigint FROM reactions
            WHERE post_id = $1 AND kind = $5
                AND created_at <= ('epoch'::timestamptz + ($2::bigint / 1000000) * interval '1 second' + ($2::bigint % 1000000) * interval '1 microsecond')
                AND (created_at < ('epoch'::timestamptz + ($2::bigint / 1000000) * interval '1 second' + ($2::bigint % 1000000) * interval '1 microsecond')
                     OR user_id > $3)
            ORDER BY created_at DESC, user_id LIMIT $4
            """)

    /// At most `limit` of `user`'s reactions of every kind that come after `after`, newest first
    /// (then by post, then by kind): its likes (`likes_user_id_created_at_index`) and its other
    /// kinds (`reactions_user_id_created_at_index`), each read up to `limit` and merged.
    public func userReactionsPage(of user: Int64, after: Position?, limit: Int) async throws -> [Position] {
        precondition(limit > 0, "a page holds at least one row")
        let rows: PostgresRows
        if let after {
            rows = try await pool.query(
                prepared: Self.userReactionsAfter,
                [.int64(user), .int64(after.microseconds), .int64(after.id), .int64(Int64(limit)), .text(after.kind)])
        } else {
            rows = try await pool.query(prepared: Self.userReactionsFirst, [.int64(user), .int64(Int64(limit))])
        }
        var page: [Position] = []
        page.reserveCapacity(rows.count)
        for row in rows { page.append(Position(microseconds: try row.int64(1), id: try row.int64(0), kind: row.string(2) ?? "")) }
        return page
    }

    private static let userReactionsFirst = PreparedStatement(
        name: "counter_user_reactions_page",
        sql: """
            SELECT post_id, us, kind FROM (
                (SELECT post_id, (extract(epoch FROM created_at) * 1000000)::bigint AS us, 'like'::text AS kind FROM likes
                 WHERE user_id = $1 AND created_at IS NOT NULL ORDER BY created_at DESC, post_id LIMIT $2)
                UNION ALL
                (SELECT post_id, (extract(epoch FROM created_at) * 1000000)::bigint, kind FROM reactions
                 WHERE user_id = $1 AND created_at IS NOT NULL ORDER BY created_at DESC, post_id, kind COLLATE "C" LIMIT $2)
            ) r
            ORDER BY us DESC, post_id, kind COLLATE "C" LIMIT $2
            """)

    /// After a position: the time bounds the index range; the ties of the cursor's microsecond
    /// are taken by post, then kind (a like's kind is `like`). Kinds compare bytewise
    /// (`COLLATE "C"`), as `Position.precedes` compares them.
    private static let userReactionsAfter: PreparedStatement = {
        let cursorTime =
            "('epoch'::timestamptz + ($2::bigint / 1000000) * interval '1 second' + ($2::bigint % 1000000) * interval '1 microsecond')"
        return PreparedStatement(
            name: "counter_user_reactions_page_after",
            sql: """
                SELECT post_id, us, kind FROM (
                    (SELECT post_id, (extract(epoch FROM created_at) * 1000000)::bigint AS us, 'like'::text AS kind FROM likes
                     WHERE user_id = $1 AND created_at <= \(cursorTime)
                         AND (created_at < \(cursorTime) OR post_id > $3 OR (post_id = $3 AND 'like' > $5::text COLLATE "C"))
                     ORDER BY created_at DESC, post_id LIMIT $4)
                    UNION ALL
                    (SELECT post_id, (extract(epoch FROM created_at) * 1000000)::bigint, kind FROM reactions
                     WHERE user_id = $1 AND created_at <= \(cursorTime)
                         AND (created_at < \(cursorTime) OR post_id > $3 OR (post_id = $3 AND kind > $5::text COLLATE "C"))
                     ORDER BY created_at DESC, post_id, kind COLLATE "C" LIMIT $4)
                ) r
                ORDER BY us DESC, post_id, kind COLLATE "C" LIMIT $4
                """)
    }()

    /// A list's two page statements: the first page, and a page after a position. Prepared: a
    /// page is a short index range scan, cheaper to run than to plan, and its one good plan
    /// (the list's index, which matches the `WHERE` and the `ORDER BY`) needs no values.
    private static let likersPages = PageStatements(owner: "post_id", listed: "user_id", name: "counter_likers_page")
    private static let likesPages = PageStatements(owner: "user_id", listed: "post_id", name: "counter_likes_page")

    private struct PageStatements {
        let first: PreparedStatement
        let after: PreparedStatement

        init(owner: String, listed: String, name: String) {
            // Served by `likes_post_id_created_at_index` or `likes_user_id_created_at_index`.
            // Whole seconds, then the microseconds within: an interval times a number goes through a
            // double, exact for each part up to year 9999 (a product of all the microseconds would
            // round from 2⁵³ µs, in year 2255, on).
            let cursorTime =
                "('epoch'::timestamptz + ($2::bigint / 1000000) * interval '1 second' + ($2::bigint % 1000000) * interval '1 microsecond')"
            first = PreparedStatement(
                name: name,
                sql: """
                    SELECT \(listed), (extract(epoch FROM created_at) * 1000000)::bigint FROM likes
                    WHERE \(owner) = $1 AND created_at IS NOT NULL ORDER BY created_at DESC, \(listed) LIMIT $2
                    """)
            // The order mixes directions (time descending, id ascending), so the index bounds the
            // time and the filter takes the ties of the cursor's own microsecond.
            after = PreparedStatement(
                name: name + "_after",
                sql: """
                    SELECT \(listed), (extract(epoch FROM created_at) * 1000000)::bigint FROM likes
                    WHERE \(owner) = $1 AND created_at <= \(cursorTime)
                        AND (created_at < \(cursorTime) OR \(listed) > $3)
                    ORDER BY created_at DESC, \(listed) LIMIT $4
                    """)
        }
    }

    /// A feed page's previews: per post (`$1`), its first `$2` likers.
    private static let firstLikersStatement = PreparedStatement(
        name: "counter_first_likers",
        sql: """
            SELECT p.id, l.user_id, (extract(epoch FROM l.created_at) * 1000000)::bigint
            FROM unnest($1::bigint[], $2::bigint[]) AS p(id, n)
            CROSS JOIN LATERAL (
                SELECT user_id, created_at FROM likes
                WHERE post_id = p.id AND created_at IS NOT NULL ORDER BY created_at DESC, user_id LIMIT p.n
            ) l
            ORDER BY p.id, l.created_at DESC, l.user_id
            """)

    /// The first likers of each post of `limits`, as many as its limit, in order, in one
    /// statement (a feed page's previews): by post, posts without likers absent.
    public func firstLikers(limits: [Int64: Int]) async throws -> [Int64: [Position]] {
        precondition(limits.values.allSatisfy { $0 > 0 }, "a page holds at least one row")
        guard !limits.isEmpty else { return [:] }
        let posts = Array(limits.keys)
        let rows = try await pool.query(prepared: Self.firstLikersStatement, [.int64Array(posts), .int64Array(posts.map { Int64(limits[$0]!) })])
        var byPost: [Int64: [Position]] = [:]
        for row in rows { byPost[try row.int64(0), default: []].append(Position(microseconds: try row.int64(2), id: try row.int64(1))) }
        return byPost
    }
}
