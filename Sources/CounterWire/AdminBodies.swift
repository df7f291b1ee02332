/// The answer of `POST /admin/flush`: whether it waited for PostgreSQL, and what still waits.
public struct FlushResult: Sendable, Equatable, Codable {
    /// `true` when the answer came after PostgreSQL had every change acknowledged before the
    /// request; `false` for `?wait=false`, which only starts the flush.
    public var flushed: Bool
    /// Changes waiting for PostgreSQL when the answer was made.
    public var pendingChanges: Int

    public init(flushed: Bool, pendingChanges: Int) {
        self.flushed = flushed
        self.pendingChanges = pendingChanges
    }

    enum CodingKeys: String, CodingKey {
        case flushed
        case pendingChanges = "pending_changes"
    }
}

/// The body of `POST /admin/reconcile`: some posts (`{"post_ids":[1,2]}`) or a page of all
/// posts (`{"after":0,"limit":1000}`), and `"repair":true` to fix what drifted.
public struct ReconcileRequest: Sendable, Equatable, Codable {
    public var postIDs: [Int64]?
    /// Check posts with ids above this one (paging); defaults to 0.
    public var after: Int64?
    /// Posts per page; defaults to 1,000.
    public var limit: Int?
    public var repair: Bool?

    public init(postIDs: [Int64]? = nil, after: Int64? = nil, limit: Int? = nil, repair: Bool? = nil) {
        self.postIDs = postIDs
        self.after = after
        self.limit = limit
        self.repair = repair
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case postIDs = "post_ids"
        case after, limit, repair
    }

    public init(from decoder: any Decoder) throws {
        try UnknownMembers.refuse(in: decoder, allowed: CodingKeys.allCases)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        postIDs = try container.decodeUnlessAbsent([WireInteger].self, forKey: .postIDs)?.map(\.value)
        after = try container.decodeUnlessAbsent(WireInteger.self, forKey: .after)?.value
        limit = try container.decodeUnlessAbsent(WireInteger.self, forKey: .limit).map { Int($0.value) }
        repair = try container.decodeUnlessAbsent(Bool.self, forKey: .repair)
    }

    /// Absent members are left out (a request's `null` is refused, see `init(from:)`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if let postIDs { try container.encode(postIDs, forKey: .postIDs) }
        if let after { try container.encode(after, forKey: .after) }
        if let limit { try container.encode(limit, forKey: .limit) }
        if let repair { try container.encode(repair, forKey: .repair) }
    }
}

/// The answer of `POST /admin/reconcile`.
public struct ReconcileReport: Sendable, Equatable, Codable {
    /// A post whose `likes_count` disagrees with its `likes` rows.
    public struct Drift: Sendable, Equatable, Codable {
        public var postID: Int64
        public var likesCount: Int64
        public var likesRows: Int64

        public init(postID: Int64, likesCount: Int64, likesRows: Int64) {
            self.postID = postID
            self.likesCount = likesCount
            self.likesRows = likesRows
        }

        enum CodingKeys: String, CodingKey {
            case postID = "post_id"
            case likesCount = "likes_count"
            case likesRows = "likes_rows"
        }
    }

    /// A post whose Redis count differs from its `likes` rows with nothing pending.
    public struct RedisDrift: Sendable, Equatable, Codable {
        public var postID: Int64
        public var redisCount: Int64
        public var likesRows: Int64

        public init(postID: Int64, redisCount: Int64, likesRows: Int64) {
            self.postID = postID
            self.redisCount = redisCount
            self.likesRows = likesRows
        }

        enum CodingKeys: String, CodingKey {
            case postID = "post_id"
            case redisCount = "redis_count"
            case likesRows = "likes_rows"
        }
    }

    /// A post's count of a kind other than `like` (`reaction_counts`) that disagrees with its
    /// `reactions` rows of the kind.
    public struct KindDrift: Sendable, Equatable, Codable {
        public var postID: Int64
        public var kind: String
        public var count: Int64
        public var rows: Int64

        public init(postID: Int64, kind: String, count: Int64, rows: Int64) {
            self.postID = postID
            self.kind = kind
            self.count = count
            self.rows = rows
        }

        enum CodingKeys: String, CodingKey {
            case postID = "post_id"
            case kind, count, rows
        }
    }

    /// A post whose Redis count of a kind other than `like` differs from its rows of the kind
    /// with nothing pending.
    public struct RedisKindDrift: Sendable, Equatable, Codable {
        public var postID: Int64
        public var kind: String
        public var redisCount: Int64
        public var rows: Int64

        public init(postID: Int64, kind: String, redisCount: Int64, rows: Int64) {
            self.postID = postID
            self.kind = kind
            self.redisCount = redisCount
            self.rows = rows
        }

        enum CodingKeys: String, CodingKey {
            case postID = "post_id"
            case kind
            case redisCount = "redis_count"
            case rows
        }
    }

    public var checked = 0
    public var drifted: [Drift] = []
    public var redisDrifted: [RedisDrift] = []
    /// With reactions of other kinds than `like` (else absent): the posts' kinds whose
    /// `reaction_counts` disagree with their rows.
    public var kindsDrifted: [KindDrift]?
    /// With reactions of other kinds (else absent): the kinds whose Redis count differs from the
    /// rows with nothing pending. Their posts are loaded again with `repair`, as `redisDrifted`'s.
    public var redisKindsDrifted: [RedisKindDrift]?
    /// With reactions of other kinds (else absent): posts whose `reaction_counts` were set from
    /// the rows (with `repair`).
    public var kindsRepaired: Int?
    /// Posts whose Redis count differs from the rows only because changes are still pending.
    public var redisPending = 0
    /// Posts whose `likes_count` was set from the rows (with `repair`).
    public var repaired = 0
    /// Posts with Redis drift that Redis now loads from PostgreSQL again (with `repair`).
    public var redisRepaired = 0
    /// For paging through all posts: pass it as `after` to continue; `nil` when done.
    public var nextAfter: Int64?

    public init() {}

    enum CodingKeys: String, CodingKey {
        case checked, drifted
        case redisDrifted = "redis_drifted"
        case kindsDrifted = "kinds_drifted"
        case redisKindsDrifted = "redis_kinds_drifted"
        case kindsRepaired = "kinds_repaired"
        case redisPending = "redis_pending"
        case repaired
        case redisRepaired = "redis_repaired"
        case nextAfter = "next_after"
    }

    /// A deployment of likes only leaves the kinds' members out (the report it always sent); one
    /// with other kinds sends them all.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(checked, forKey: .checked)
        try container.encode(drifted, forKey: .drifted)
        try container.encode(redisDrifted, forKey: .redisDrifted)
        try container.encode(redisPending, forKey: .redisPending)
        try container.encode(repaired, forKey: .repaired)
        try container.encode(redisRepaired, forKey: .redisRepaired)
        try container.encodeIfPresent(nextAfter, forKey: .nextAfter)
        if let kindsDrifted { try container.encode(kindsDrifted, forKey: .kindsDrifted) }
        if let redisKindsDrifted { try container.encode(redisKindsDrifted, forKey: .redisKindsDrifted) }
        if let kindsRepaired { try container.encode(kindsRepaired, forKey: .kindsRepaired) }
    }
}

/// The answer of `GET /admin/posts/{post}[?user=U]`: the post in Redis and PostgreSQL side by
/// side, and the verdict.
public struct PostInspection: Sendable, Equatable, Codable {
    /// What the verdicts mean.
    public enum Verdict {
        /// Redis and PostgreSQL show the same count (and membership of the user).
        public static let agree = "agree"
        /// They differ only by changes waiting for the flusher.
        public static let pending = "pending"
        /// They differ with nothing pending, or `likes_count` differs from the rows.
        public static let drift = "drift"
        /// PostgreSQL has no such post.
        public static let unknownPost = "unknown_post"
        /// The post is cold: Redis holds nothing of it, PostgreSQL answers for it.
        public static let notInRedis = "not_in_redis"
    }

    /// Where a post's state is kept (`Redis.tier`).
    public enum Tier {
        /// Count and whole likers set in Redis: reads and writes are answered from Redis.
        public static let hot = "hot"
        /// Count and the memberships seen since it turned warm in Redis (a large post written
        /// while cold): a user Redis does not know is looked up in PostgreSQL.
        public static let warm = "warm"
        /// Nothing in Redis: PostgreSQL is the truth, and answers reads.
        public static let cold = "cold"
    }

    /// The post in Redis.
    public struct Redis: Sendable, Equatable, Codable {
        /// `Tier.hot`, `Tier.warm` or `Tier.cold`.
        public var tier: String
        /// Whether Redis holds the post's count (`tier` is hot or warm).
        public var hydrated: Bool
        public var likesCount: Int64
        /// Changes to the post still waiting in its slot's log (read up to 10,000 entries).
        public var pendingChanges: Int
        /// Seconds since the flusher of the post's shard last committed.
        public var secondsSinceFlush: Double
        /// Whether Redis has the user asked about as a liker (`nil` without `?user=`, or for a
        /// warm post that does not know the user).
        public var isLiked: Bool?

        public init(hydrated: Bool, warm: Bool = false, likesCount: Int64, pendingChanges: Int, secondsSinceFlush: Double, isLiked: Bool?) {
            self.tier = warm ? Tier.warm : hydrated ? Tier.hot : Tier.cold
            self.hydrated = hydrated
            self.likesCount = likesCount
            self.pendingChanges = pendingChanges
            self.secondsSinceFlush = secondsSinceFlush
            self.isLiked = isLiked
        }

        enum CodingKeys: String, CodingKey {
            case tier, hydrated
            case likesCount = "likes_count"
            case pendingChanges = "pending_changes"
            case
                secondsSinceFlush = "seconds_since_flush"
            case isLiked = "is_liked"
        }
    }

    /// The post in PostgreSQL.
    public struct Postgres: Sendable, Equatable, Codable {
        public var exists: Bool
        /// `posts.likes_count` (`nil` when the post does not exist).
        public var likesCount: Int64?
        /// Rows in `likes` for the post.
        public var likesRows: Int64
        /// Whether the user asked about has a row (`nil` without `?user=`).
        public var isLiked: Bool?

        public init(exists: Bool, likesCount: Int64?, likesRows: Int64, isLiked: Bool?) {
            self.exists = exists
            self.likesCount = likesCount
            self.likesRows = likesRows
            self.isLiked = isLiked
        }

        enum CodingKeys: String, CodingKey {
            case exists
            case likesCount = "likes_count"
            case likesRows = "likes_rows"
            case isLiked = "is_liked"
        }
    }

    public var postID: Int64
    /// One of `Verdict`'s values.
    public var verdict: String
    public var redis: Redis
    public var postgres: Postgres
    /// The user asked about, if any.
    public var userID: Int64?

    public init(postID: Int64, verdict: String, redis: Redis, postgres: Postgres, userID: Int64?) {
        self.postID = postID
        self.verdict = verdict
        self.redis = redis
        self.postgres = postgres
        self.userID = userID
    }

    enum CodingKeys: String, CodingKey {
        case postID = "post_id"
        case verdict, redis, postgres
        case userID = "user_id"
    }
}
