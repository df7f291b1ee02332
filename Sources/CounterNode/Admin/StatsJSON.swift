import Foundation
import Persistence

/// `ShardStats` and the Redis nodes as the admin API's JSON:
/// `{"shards":[…],"total":{…},"redis":{…},"resident_memory_bytes":…}`.
enum StatsJSON {
    static func encode(_ shards: [ShardStats], redis topology: RedisTopology) -> [UInt8] {
        var writer = JSONWriter(capacity: 512 * (shards.count + 1))
        writer.objectStart()
        writer.key("shards")
        writer.arrayStart()
        for stats in shards { write(stats, into: &writer, shard: stats.shard) }
        writer.arrayEnd()
        writer.key("total")
        write(total(shards), into: &writer, shard: nil)
        writer.key("redis")
        write(topology, into: &writer)
        if let resident = residentMemoryBytes() { writer.field("resident_memory_bytes", resident) }
        writer.objectEnd()
        return writer.bytes
    }

    /// All shards added up (ages and largest sizes are maxima).
    static func total(_ shards: [ShardStats]) -> ShardStats {
        var sum = ShardStats()
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
        }
        return sum
    }

    private static func write(_ stats: ShardStats, into writer: inout JSONWriter, shard: Int?) {
        writer.objectStart()
        if let shard { writer.field("shard", shard) }
        writer.field("operations", stats.operations)
        writer.field("group_commits", stats.groupCommits)
        writer.field("group_committed_changes", stats.groupCommittedChanges)
        writer.field("average_group_commit", stats.averageGroupCommit)
        writer.field("largest_group_commit", stats.largestGroupCommit)
        writer.field("pending_changes", stats.pendingChanges)
        writer.field("oldest_pending_age_seconds", stats.oldestPendingAgeSeconds)
        writer.field("seconds_since_flush", stats.secondsSinceFlush)
        writer.field("flush_transactions", stats.flushTransactions)
        writer.field("flushed_entries", stats.flushedEntries)
        writer.field("largest_flush", stats.largestFlush)
        writer.field("flush_retries", stats.flushRetries)
        if let error = stats.lastFlushError { writer.field("last_flush_error", error) } else { writer.nullField("last_flush_error") }
        writer.field("dead_letters", stats.deadLetters)
        writer.field("redis_errors", stats.redisErrors)
        writer.field("postgres_errors", stats.postgresErrors)
        writer.field("lost_memory_acknowledgements", stats.lostMemoryAcknowledgements)
        writer.objectEnd()
    }

    /// The Redis deployment as this node sees it: per node (the masters, and nodes it has met),
    /// how many slots it serves, whether the last round trip worked, and its redirects and errors.
    private static func write(_ topology: RedisTopology, into writer: inout JSONWriter) {
        let refresh = topology.refreshState()
        writer.objectStart()
        writer.field("mode", topology.configuration.mode.rawValue)
        writer.field("map_refreshes", refresh.refreshes)
        if let seconds = refresh.secondsSinceRefresh { writer.field("seconds_since_map_refresh", seconds) } else { writer.nullField("seconds_since_map_refresh") }
        if let error = refresh.lastError { writer.field("last_map_error", error) } else { writer.nullField("last_map_error") }
        writer.key("nodes")
        writer.arrayStart()
        for node in topology.nodeStates() {
            writer.objectStart()
            writer.field("endpoint", node.endpoint.description)
            writer.field("slots", node.slots)
            writer.field("connected", node.connected)
            writer.field("pipelines", node.pipelines)
            writer.field("errors", node.errors)
            writer.field("moved", node.moved)
            writer.field("ask", node.ask)
            writer.field("try_again", node.tryAgain)
            writer.field("cluster_down", node.clusterDown)
            if let error = node.lastError { writer.field("last_error", error) } else { writer.nullField("last_error") }
            writer.objectEnd()
        }
        writer.arrayEnd()
        writer.objectEnd()
    }

    /// The node's resident memory (`/proc/self/statm`), or `nil` where that is not readable.
    static func residentMemoryBytes() -> Int64? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int64(fields[1]) else { return nil }
        return pages * Int64(sysconf(Int32(_SC_PAGESIZE)))
    }
}
