import CounterWire

/// What one shard and its flusher have done, for `stats`, `/metrics` and tests: the admin API's
/// `ShardStatistics` itself, so its figures are defined once.
public typealias ShardStats = ShardStatistics

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
