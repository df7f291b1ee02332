/// `POST /admin/flush`: whether it waited for PostgreSQL, and what still waits.
public struct FlushResult: Sendable, Equatable, Decodable {
    public let flushed: Bool
    public let pendingChanges: Int64

    enum CodingKeys: String, CodingKey { case flushed, pendingChanges = "pending_changes" }
}

/// One shard's figures (or the total) from `GET /admin/stats`.
public struct ShardStatistics: Sendable, Equatable, Decodable {
    public let shard: Int?
    public let operations: Int64
    public let groupCommits: Int64
    public let averageGroupCommit: Double
    public let pendingChanges: Int64
    public let oldestPendingAgeSeconds: Double
    public let secondsSinceFlush: Double?
    public let flushTransactions: Int64
    public let flushedEntries: Int64
    public let flushRetries: Int64
    public let deadLetters: Int64

    enum CodingKeys: String, CodingKey {
        case shard, operations, groupCommits = "group_commits",
             averageGroupCommit = "average_group_commit", pendingChanges = "pending_changes",
             oldestPendingAgeSeconds = "oldest_pending_age_seconds", secondsSinceFlush = "seconds_since_flush",
             flushTransactions = "flush_transactions", flushedEntries = "flushed_entries",
             flushRetries = "flush_retries", deadLetters = "dead_letters"
    }
}

/// `GET /admin/stats`.
public struct ServiceStatistics: Sendable, Equatable, Decodable {
    public let shards: [ShardStatistics]
    public let total: ShardStatistics
}

/// `GET /admin/posts/{post}`: a post in Redis and PostgreSQL, and the verdict
/// (`agree`, `pending`, `drift`, `unknown_post`, `not_in_redis`).
public struct PostInspection: Sendable, Equatable, Decodable {
    public struct Redis: Sendable, Equatable, Decodable {
        public let hydrated: Bool
        public let likesCount: Int64
        public let pendingChanges: Int64
        public let isLiked: Bool?
        enum CodingKeys: String, CodingKey {
            case hydrated, likesCount = "likes_count", pendingChanges = "pending_changes", isLiked = "is_liked"
        }
    }
    public struct Postgres: Sendable, Equatable, Decodable {
        public let exists: Bool
        public let likesCount: Int64?
        public let likesRows: Int64
        public let isLiked: Bool?
        enum CodingKeys: String, CodingKey { case exists, likesCount = "likes_count", likesRows = "likes_rows", isLiked = "is_liked" }
    }

    public let postID: Int64
    public let verdict: String
    public let redis: Redis
    public let postgres: Postgres

    enum CodingKeys: String, CodingKey { case postID = "post_id", verdict, redis, postgres }
}

/// `POST /admin/reconcile`.
public struct ReconcileReport: Sendable, Equatable, Decodable {
    public struct Drift: Sendable, Equatable, Decodable {
        public let postID: Int64
        public let likesCount: Int64
        public let likesRows: Int64
        enum CodingKeys: String, CodingKey { case postID = "post_id", likesCount = "likes_count", likesRows = "likes_rows" }
    }
    public struct RedisDrift: Sendable, Equatable, Decodable {
        public let postID: Int64
        public let redisCount: Int64
        public let likesRows: Int64
        enum CodingKeys: String, CodingKey { case postID = "post_id", redisCount = "redis_count", likesRows = "likes_rows" }
    }

    public let checked: Int
    public let drifted: [Drift]
    public let redisDrifted: [RedisDrift]
    public let redisPending: Int
    public let repaired: Int
    /// For paging through all posts: pass it as `after` to continue; `nil` when done.
    public let nextAfter: Int64?

    enum CodingKeys: String, CodingKey {
        case checked, drifted, redisDrifted = "redis_drifted", redisPending = "redis_pending", repaired, nextAfter = "next_after"
    }
}

/// A change PostgreSQL refused for good, with its fields (`u`, `p`, `l`, `reason`, `log`,
/// `entry`, `at`).
public struct DeadLetter: Sendable, Equatable {
    public let id: String
    public let fields: [String: String]

    public var reason: String? { fields["reason"] }
}

/// `POST /admin/dead-letters/replay`.
public struct ReplayResult: Sendable, Equatable, Decodable {
    public struct Failure: Sendable, Equatable, Decodable {
        public let id: String
        public let reason: String
    }
    public let replayed: [String]
    public let failed: [Failure]
}
