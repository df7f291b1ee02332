/// What one shard and its flusher have done (or all of them, added up), for `stats`, `/metrics`
/// and tests. The admin API answers with it in its own shape (the wire's `ShardStatistics`).
public struct ShardStats: Sendable, Equatable {
    /// The shard's index; `nil` for a total.
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
}

extension ShardStats {
    /// Adds what one batch did: its write is a group commit when any change of it committed.
    mutating func record(_ batch: BatchStateMachine.Statistics) {
        redisErrors += batch.redisErrors
        postgresErrors += batch.postgresErrors
        lostMemoryAcknowledgements += batch.lostMemoryAcknowledgements
        hotReads += batch.hotReads
        coldReads += batch.coldReads
        coldWrites += batch.coldWrites
        turnedWarm += batch.turnedWarm
        guard batch.committedChanges > 0 else { return }
        groupCommits += 1
        groupCommittedChanges += batch.committedChanges
        largestGroupCommit = max(largestGroupCommit, batch.committedChanges)
        averageGroupCommit = Double(groupCommittedChanges) / Double(groupCommits)
    }
}
