import CounterWire
import WritePath

extension ShardStatistics {
    /// A shard's figures (or their total) as the admin API's body.
    init(_ stats: ShardStats) {
        self.init(shard: stats.shard)
        operations = stats.operations
        groupCommits = stats.groupCommits
        groupCommittedChanges = stats.groupCommittedChanges
        averageGroupCommit = stats.averageGroupCommit
        largestGroupCommit = stats.largestGroupCommit
        pendingChanges = stats.pendingChanges
        oldestPendingAgeSeconds = stats.oldestPendingAgeSeconds
        secondsSinceFlush = stats.secondsSinceFlush
        flushTransactions = stats.flushTransactions
        flushedEntries = stats.flushedEntries
        largestFlush = stats.largestFlush
        flushRetries = stats.flushRetries
        lastFlushError = stats.lastFlushError
        deadLetters = stats.deadLetters
        redisErrors = stats.redisErrors
        postgresErrors = stats.postgresErrors
        lostMemoryAcknowledgements = stats.lostMemoryAcknowledgements
        unreplicatedWrites = stats.unreplicatedWrites
        failoverRepairs = stats.failoverRepairs
        failoverLostChanges = stats.failoverLostChanges
        hotReads = stats.hotReads
        coldReads = stats.coldReads
        hotPosts = stats.hotPosts
        evictedPosts = stats.evictedPosts
        evictedForMemory = stats.evictedForMemory
        coldWrites = stats.coldWrites
        turnedWarm = stats.turnedWarm
        promotedPosts = stats.promotedPosts
    }
}
