/// What one shard and its flusher have done, for `stats`, `/metrics` and tests.
public struct ShardStats: Sendable, Equatable {
    public var shard: Int = 0
    /// Operations answered (successfully or not).
    public var operations: Int = 0
    /// Redis write round trips (group commits) and the changes they carried.
    public var groupCommits: Int = 0
    public var groupCommittedChanges: Int = 0
    public var largestGroupCommit: Int = 0
    /// Changes waiting for PostgreSQL, and how long the oldest has waited (seconds).
    public var pendingChanges: Int = 0
    public var oldestPendingAgeSeconds: Double = 0
    /// Flush transactions committed, the log entries they covered, the largest.
    public var flushTransactions: Int = 0
    public var flushedEntries: Int = 0
    public var largestFlush: Int = 0
    /// Seconds since the flusher last committed (or, before its first flush, since it started).
    public var secondsSinceFlush: Double = 0
    /// Flush attempts that failed and were retried, and the last reason.
    public var flushRetries: Int = 0
    public var lastFlushError: String? = nil
    /// Calls to Redis and PostgreSQL that failed (shard and flusher together).
    public var redisErrors: Int = 0
    public var postgresErrors: Int = 0
    /// Changes moved to the dead-letter stream.
    public var deadLetters: Int = 0
    /// Changes acknowledged in `memory` mode whose Redis write then failed (lost).
    public var lostMemoryAcknowledgements: Int = 0

    public init() {}

    /// Average changes per group commit.
    public var averageGroupCommit: Double {
        groupCommits == 0 ? 0 : Double(groupCommittedChanges) / Double(groupCommits)
    }
}

extension ShardStats {
    /// Adds what one batch did: its write is a group commit when any change of it committed.
    mutating func record(_ batch: BatchStateMachine.Statistics) {
        redisErrors += batch.redisErrors
        postgresErrors += batch.postgresErrors
        lostMemoryAcknowledgements += batch.lostMemoryAcknowledgements
        guard batch.committedChanges > 0 else { return }
        groupCommits += 1
        groupCommittedChanges += batch.committedChanges
        largestGroupCommit = max(largestGroupCommit, batch.committedChanges)
    }
}
