import CounterCore

/// The shard's statistics: what its machines counted, read, never changed.
extension ShardStateMachine {
    // MARK: - Statistics

    /// The statistics with the backlog figures of `now`.
    func currentStats(now: ContinuousClock.Instant) -> ShardStats {
        var current = countedStats
        current.secondsSinceFlush = (now - flushes.lastFlush).inSeconds
        if let oldest = flushes.oldestDirtySince { current.oldestPendingAgeSeconds = (now - oldest).inSeconds }
        return current
    }

    /// What the machines have counted (without the figures of the moment).
    var countedStats: ShardStats {
        var stats = lane.counters.batches
        stats.shard = index
        stats.operations = lane.counters.operations
        stats.unreplicatedWrites = lane.counters.unreplicatedWrites
        let flushed = flushes.counters
        stats.pendingChanges = flushes.pendingTotal
        stats.flushTransactions = flushed.flushTransactions
        stats.flushedEntries = flushed.flushedEntries
        stats.largestFlush = flushed.largestFlush
        stats.flushRetries = flushed.flushRetries
        stats.lastFlushError = flushed.lastFlushError
        stats.deadLetters = flushed.deadLetters
        stats.failoverLostChanges = flushed.failoverLostChanges
        stats.failoverRepairs = ownership.failoverRepairs
        let hot = hotSet.counters
        stats.hotPosts = hotSet.count
        stats.evictedPosts = hot.evictedPosts
        stats.evictedForMemory = hot.evictedForMemory
        stats.promotedPosts = hot.promotedPosts
        stats.redisErrors += flushed.redisErrors + hot.redisErrors
        stats.postgresErrors += flushed.postgresErrors + hot.postgresErrors
        return stats
    }
}
