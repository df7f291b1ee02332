/// The answer of `GET /admin/stats`: per shard, their total, the Redis nodes, and the node's
/// resident memory.
public struct ServiceStatistics: Sendable, Equatable, Codable {
    public var shards: [ShardStatistics]
    /// All shards added up (ages and largest sizes are maxima; `shard` is `nil`).
    public var total: ShardStatistics
    public var redis: RedisStatistics
    /// The node process's resident memory, where the platform tells it.
    public var residentMemoryBytes: Int64?

    public init(shards: [ShardStatistics], total: ShardStatistics, redis: RedisStatistics, residentMemoryBytes: Int64?) {
        self.shards = shards
        self.total = total
        self.redis = redis
        self.residentMemoryBytes = residentMemoryBytes
    }

    enum CodingKeys: String, CodingKey {
        case shards, total, redis
        case residentMemoryBytes = "resident_memory_bytes"
    }
}

/// What one shard and its flusher have done (or all of them, in `ServiceStatistics.total`).
public struct ShardStatistics: Sendable, Equatable, Codable {
    /// The shard's index; `nil` for the total.
    public var shard: Int?
    /// Operations answered (successfully or not).
    public var operations = 0
    /// Redis write round trips (group commits), the changes they carried, their average and largest.
    public var groupCommits = 0
    public var groupCommittedChanges = 0
    public var averageGroupCommit = 0.0
    public var largestGroupCommit = 0
    /// Changes waiting for PostgreSQL, and how long the oldest has waited.
    public var pendingChanges = 0
    public var oldestPendingAgeSeconds = 0.0
    /// Seconds since the flusher last committed (or, before its first flush, since it started).
    public var secondsSinceFlush = 0.0
    /// Flush transactions committed, the log entries they covered, the largest.
    public var flushTransactions = 0
    public var flushedEntries = 0
    public var largestFlush = 0
    /// Flush attempts that failed and were retried, and the last reason.
    public var flushRetries = 0
    public var lastFlushError: String?
    /// Changes moved to the dead-letter stream.
    public var deadLetters = 0
    /// Calls to Redis and PostgreSQL that failed (shard and flusher together).
    public var redisErrors = 0
    public var postgresErrors = 0
    /// Changes acknowledged in `memory` mode whose Redis write then failed (lost).
    public var lostMemoryAcknowledgements = 0
    /// With `--ack replicated`: writes answered `not_replicated` (written on the master, not
    /// confirmed on enough replicas in time).
    public var unreplicatedWrites = 0
    /// Slots repaired after their Redis master failed over (drained, their posts dropped from
    /// Redis), and the acknowledged changes the repairs found lost with the failed master.
    public var failoverRepairs = 0
    public var failoverLostChanges = 0
    /// Read-only requests (a like's state, a count, a feed entry) answered from Redis, and from
    /// PostgreSQL because their post was cold: `hot ÷ (hot + cold)` is the read hit ratio.
    public var hotReads = 0
    public var coldReads = 0
    /// Posts the shard holds in Redis as it knows them (those it answered from Redis since it
    /// started), and posts it evicted (idle, with PostgreSQL holding all of them).
    public var hotPosts = 0
    public var evictedPosts = 0
    /// Of `evictedPosts`, those evicted before they were idle because Redis was above its
    /// memory target.
    public var evictedForMemory = 0
    /// Writes decided on PostgreSQL's rows because their post was cold (it was then loaded in
    /// passing, or turned warm), cold posts a write turned warm, and warm posts promoted to a
    /// whole likers set.
    public var coldWrites = 0
    public var turnedWarm = 0
    public var promotedPosts = 0

    public init(shard: Int? = nil) {
        self.shard = shard
    }

    enum CodingKeys: String, CodingKey {
        case shard, operations
        case groupCommits = "group_commits"
        case groupCommittedChanges = "group_committed_changes"
        case
            averageGroupCommit = "average_group_commit"
        case largestGroupCommit = "largest_group_commit"
        case
            pendingChanges = "pending_changes"
        case oldestPendingAgeSeconds = "oldest_pending_age_seconds"
        case
            secondsSinceFlush = "seconds_since_flush"
        case flushTransactions = "flush_transactions"
        case
            flushedEntries = "flushed_entries"
        case largestFlush = "largest_flush"
        case flushRetries = "flush_retries"
        case
            lastFlushError = "last_flush_error"
        case deadLetters = "dead_letters"
        case redisErrors = "redis_errors"
        case
            postgresErrors = "postgres_errors"
        case lostMemoryAcknowledgements = "lost_memory_acknowledgements"
        case
            unreplicatedWrites = "unreplicated_writes"
        case failoverRepairs = "failover_repairs"
        case
            failoverLostChanges = "failover_lost_changes"
        case
            hotReads = "hot_reads"
        case coldReads = "cold_reads"
        case hotPosts = "hot_posts"
        case evictedPosts = "evicted_posts"
        case
            evictedForMemory = "evicted_for_memory"
        case coldWrites = "cold_writes"
        case turnedWarm = "turned_warm"
        case
            promotedPosts = "promoted_posts"
    }
}

/// The Redis deployment as the node sees it.
public struct RedisStatistics: Sendable, Equatable, Codable {
    /// `single` or `cluster`.
    public var mode: String
    /// Times the slot map was read again, how long ago the last was, and the last failure.
    public var mapRefreshes: Int
    public var secondsSinceMapRefresh: Double?
    public var lastMapError: String?
    /// The masters, and nodes the node has met.
    public var nodes: [RedisNodeStatistics]

    public init(mode: String, mapRefreshes: Int, secondsSinceMapRefresh: Double?, lastMapError: String?, nodes: [RedisNodeStatistics]) {
        self.mode = mode
        self.mapRefreshes = mapRefreshes
        self.secondsSinceMapRefresh = secondsSinceMapRefresh
        self.lastMapError = lastMapError
        self.nodes = nodes
    }

    enum CodingKeys: String, CodingKey {
        case mode
        case mapRefreshes = "map_refreshes"
        case secondsSinceMapRefresh = "seconds_since_map_refresh"
        case
            lastMapError = "last_map_error"
        case nodes
    }
}

/// One Redis node: the slots it serves, whether the last round trip worked, its redirects and errors.
public struct RedisNodeStatistics: Sendable, Equatable, Codable {
    public var endpoint: String
    public var slots: Int
    public var connected: Bool
    public var pipelines: Int
    public var errors: Int
    public var moved: Int
    public var ask: Int
    public var tryAgain: Int
    public var clusterDown: Int
    public var lastError: String?

    public init(
        endpoint: String, slots: Int, connected: Bool, pipelines: Int, errors: Int, moved: Int, ask: Int,
        tryAgain: Int, clusterDown: Int, lastError: String?
    ) {
        self.endpoint = endpoint
        self.slots = slots
        self.connected = connected
        self.pipelines = pipelines
        self.errors = errors
        self.moved = moved
        self.ask = ask
        self.tryAgain = tryAgain
        self.clusterDown = clusterDown
        self.lastError = lastError
    }

    enum CodingKeys: String, CodingKey {
        case endpoint, slots, connected, pipelines, errors, moved, ask
        case tryAgain = "try_again"
        case
            clusterDown = "cluster_down"
        case lastError = "last_error"
    }
}
