import CounterWire
import Foundation
import Persistence
import WritePath

/// The shards' figures, their total and the Redis nodes as the admin API's `ServiceStatistics`.
enum StatisticsAnswer {
    static func make(_ shards: [ShardStats], redis: RedisReport) -> ServiceStatistics {
        let bodies = shards.map(ShardStatistics.init)
        return ServiceStatistics(shards: bodies, total: total(bodies), redis: wire(redis), residentMemoryBytes: residentMemoryBytes())
    }

    /// All shards added up (ages and largest sizes are maxima; `shard` is `nil`).
    static func total(_ shards: [ShardStatistics]) -> ShardStatistics {
        var sum = ShardStatistics(shard: nil)
        for stats in shards {
            sum.operations += stats.operations
            sum.groupCommits += stats.groupCommits
            sum.groupCommittedChanges += stats.groupCommittedChanges
            sum.largestGroupCommit = max(sum.largestGroupCommit, stats.largestGroupCommit)
            sum.pendingChanges += stats.pendingChanges
            sum.oldestPendingAgeSeconds = max(sum.oldestPendingAgeSeconds, stats.oldestPendingAgeSeconds)
            sum.flushTransactions += stats.flushTransactions
            sum.flushedEntries += stats.flushedEntries
            sum.largestFlush = max(sum.largestFlush, stats.largestFlush)
            sum.secondsSinceFlush = max(sum.secondsSinceFlush, stats.secondsSinceFlush)
            sum.flushRetries += stats.flushRetries
            sum.lastFlushError = sum.lastFlushError ?? stats.lastFlushError
            sum.deadLetters += stats.deadLetters
            sum.redisErrors += stats.redisErrors
            sum.postgresErrors += stats.postgresErrors
            sum.lostMemoryAcknowledgements += stats.lostMemoryAcknowledgements
            sum.unreplicatedWrites += stats.unreplicatedWrites
            sum.failoverRepairs += stats.failoverRepairs
            sum.failoverLostChanges += stats.failoverLostChanges
            sum.hotReads += stats.hotReads
            sum.coldReads += stats.coldReads
            sum.hotPosts += stats.hotPosts
            sum.evictedPosts += stats.evictedPosts
            sum.evictedForMemory += stats.evictedForMemory
            sum.coldWrites += stats.coldWrites
            sum.turnedWarm += stats.turnedWarm
            sum.promotedPosts += stats.promotedPosts
        }
        sum.averageGroupCommit = sum.groupCommits == 0 ? 0 : Double(sum.groupCommittedChanges) / Double(sum.groupCommits)
        return sum
    }

    /// The Redis deployment as this node sees it: per node (the masters, and nodes it has met),
    /// how many slots it serves, whether the last round trip worked, and its redirects and errors.
    private static func wire(_ redis: RedisReport) -> RedisStatistics {
        RedisStatistics(
            mode: redis.mode, mapRefreshes: redis.mapRefreshes,
            secondsSinceMapRefresh: redis.secondsSinceMapRefresh, lastMapError: redis.lastMapError,
            nodes: redis.nodes.map { node in
                RedisNodeStatistics(
                    endpoint: node.endpoint.description, slots: node.slots, connected: node.connected,
                    pipelines: node.pipelines, errors: node.errors, moved: node.moved, ask: node.ask,
                    tryAgain: node.tryAgain, clusterDown: node.clusterDown, lastError: node.lastError)
            })
    }

    /// The node's resident memory (`/proc/self/statm`), or `nil` where that is not readable.
    static func residentMemoryBytes() -> Int64? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int64(fields[1]) else { return nil }
        return pages * Int64(sysconf(Int32(_SC_PAGESIZE)))
    }
}
