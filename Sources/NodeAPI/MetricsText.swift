import Persistence
import WritePath

/// The write path's figures in Prometheus text format.
enum MetricsText {
    /// One family of a single unlabelled sample: its help, type and value.
    static func single(_ name: String, _ type: String, _ help: String, _ value: String, into text: inout String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
    }

    /// Per Redis node (one server, or each cluster node this process has met): up, slots served,
    /// pipelines, errors, redirects by kind; and how often the slot map was read.
    static func renderRedis(_ redis: RedisReport, into text: inout String) {
        let nodes = redis.nodes
        func family(_ name: String, _ type: String, _ help: String, _ value: (RedisReport.Node) -> String) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for node in nodes { text += "\(name){endpoint=\"\(node.endpoint)\"} \(value(node))\n" }
        }
        family("counter_redis_node_up", "gauge", "1 when the last round trip to this Redis node worked.") { $0.connected ? "1" : "0" }
        family("counter_redis_node_slots", "gauge", "Hash slots this Redis node serves in the node's slot map.") { "\($0.slots)" }
        family("counter_redis_node_pipelines_total", "counter", "Pipelines sent to this Redis node.") { "\($0.pipelines)" }
        family("counter_redis_node_errors_total", "counter", "Round trips to this Redis node that failed.") { "\($0.errors)" }
        let measured = nodes.filter { $0.usedMemoryBytes != nil }
        if !measured.isEmpty {
            text +=
                "# HELP counter_redis_node_used_memory_bytes used_memory of this Redis master, as last read (every few seconds).\n# TYPE counter_redis_node_used_memory_bytes gauge\n"
            for node in measured { text += "counter_redis_node_used_memory_bytes{endpoint=\"\(node.endpoint)\"} \(node.usedMemoryBytes!)\n" }
            text +=
                "# HELP counter_redis_node_maxmemory_bytes maxmemory of this Redis master (0: no limit).\n# TYPE counter_redis_node_maxmemory_bytes gauge\n"
            for node in measured { text += "counter_redis_node_maxmemory_bytes{endpoint=\"\(node.endpoint)\"} \(node.maximumMemoryBytes ?? 0)\n" }
        }
        text +=
            "# HELP counter_redis_redirects_total Redis Cluster answers that sent commands elsewhere or back: moved, ask, tryagain, clusterdown.\n# TYPE counter_redis_redirects_total counter\n"
        for node in nodes {
            for (kind, count) in [("moved", node.moved), ("ask", node.ask), ("tryagain", node.tryAgain), ("clusterdown", node.clusterDown)] {
                text += "counter_redis_redirects_total{endpoint=\"\(node.endpoint)\",kind=\"\(kind)\"} \(count)\n"
            }
        }
        text +=
            "# HELP counter_redis_map_refreshes_total Times the Redis Cluster slot map was read.\n# TYPE counter_redis_map_refreshes_total counter\n"
        text += "counter_redis_map_refreshes_total \(redis.mapRefreshes)\n"
    }

    static func renderShards(_ shards: [ShardStats], into text: inout String) {
        func family(_ name: String, _ type: String, _ help: String, _ value: (ShardStats) -> String) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for stats in shards { text += "\(name){shard=\"\(stats.shard.map(String.init) ?? "")\"} \(value(stats))\n" }
        }
        family("counter_operations_total", "counter", "Operations the shard answered.") { "\($0.operations)" }
        family("counter_group_commits_total", "counter", "Redis write round trips (group commits).") { "\($0.groupCommits)" }
        family("counter_group_committed_changes_total", "counter", "Changes carried by group commits.") { "\($0.groupCommittedChanges)" }
        family("counter_group_commit_largest", "gauge", "Largest group commit so far, in changes.") { "\($0.largestGroupCommit)" }
        family("counter_backlog_changes", "gauge", "Changes in Redis not yet in PostgreSQL.") { "\($0.pendingChanges)" }
        family("counter_backlog_oldest_age_seconds", "gauge", "How long the oldest waiting change has waited.") { "\($0.oldestPendingAgeSeconds)" }
        family("counter_flush_transactions_total", "counter", "Flush transactions committed.") { "\($0.flushTransactions)" }
        family("counter_flushed_entries_total", "counter", "Log entries covered by committed flushes.") { "\($0.flushedEntries)" }
        family("counter_flush_largest", "gauge", "Largest flush so far, in changes.") { "\($0.largestFlush)" }
        family("counter_flush_retries_total", "counter", "Flush attempts that failed (PostgreSQL or Redis errors) and were retried.") {
            "\($0.flushRetries)"
        }
        family("counter_dead_letters_total", "counter", "Changes moved to the dead-letter stream.") { "\($0.deadLetters)" }
        family("counter_redis_errors_total", "counter", "Redis calls that failed.") { "\($0.redisErrors)" }
        family("counter_postgres_errors_total", "counter", "PostgreSQL calls that failed.") { "\($0.postgresErrors)" }
        family(
            "counter_failover_repairs_total", "counter",
            "Slots repaired after their Redis master failed over: drained to PostgreSQL, their posts dropped from Redis."
        ) { "\($0.failoverRepairs)" }
        family(
            "counter_failover_lost_changes_total", "counter",
            "Acknowledged changes a Redis failover lost (their master died before a replica had them): found by the repair, gone from Redis and PostgreSQL."
        ) { "\($0.failoverLostChanges)" }
        family(
            "counter_unreplicated_writes_total", "counter",
            "With --ack replicated: writes answered not_replicated (on the Redis master, not confirmed on enough replicas in time)."
        ) { "\($0.unreplicatedWrites)" }
        family("counter_hot_reads_total", "counter", "Read-only requests answered from Redis (the post was hot).") { "\($0.hotReads)" }
        family("counter_cold_reads_total", "counter", "Read-only requests answered from PostgreSQL (the post was cold).") { "\($0.coldReads)" }
        family("counter_hot_posts", "gauge", "Posts the shard holds in Redis, as far as it answered them since it started.") { "\($0.hotPosts)" }
        family(
            "counter_cold_writes_total", "counter", "Writes decided on PostgreSQL's rows (the post was cold: then loaded in passing, or turned warm)."
        ) { "\($0.coldWrites)" }
        family(
            "counter_posts_turned_warm_total", "counter",
            "Cold posts of 10,000 likers or more that a write turned warm (count and the memberships seen in Redis)."
        ) { "\($0.turnedWarm)" }
        family("counter_promoted_posts_total", "counter", "Warm posts loaded whole into Redis (promoted to hot).") { "\($0.promotedPosts)" }
        text +=
            "# HELP counter_evicted_posts_total Posts evicted from Redis with PostgreSQL holding all of them: idle, or Redis above its memory target.\n# TYPE counter_evicted_posts_total counter\n"
        for stats in shards {
            let shard = stats.shard.map(String.init) ?? ""
            text += "counter_evicted_posts_total{shard=\"\(shard)\",reason=\"idle\"} \(stats.evictedPosts - stats.evictedForMemory)\n"
            text += "counter_evicted_posts_total{shard=\"\(shard)\",reason=\"memory\"} \(stats.evictedForMemory)\n"
        }
    }

    /// `counter_write_behind_lag_seconds`: acknowledgement → PostgreSQL commit, per change.
    static func renderLag(_ lag: WriteBehindLag.Snapshot, into text: inout String) {
        text +=
            "# HELP counter_write_behind_lag_seconds Time from a change's write to Redis (its acknowledgement) to the commit that put it in PostgreSQL, per change.\n"
        text += "# TYPE counter_write_behind_lag_seconds histogram\n"
        histogramSamples(
            "counter_write_behind_lag_seconds", labels: "", bounds: WriteBehindLag.bucketBounds, buckets: lag.buckets,
            count: lag.count, sum: lag.sumSeconds, into: &text)
    }

    /// One histogram's samples (after its `# HELP`/`# TYPE`): cumulative `_bucket`s from
    /// per-bucket counts, `+Inf`, `_sum`, `_count`. `labels` (`route="/x"`, or empty) go first.
    static func histogramSamples(
        _ name: String, labels: String, bounds: [Double], buckets: [Int], count: Int, sum: Double,
        into text: inout String
    ) {
        let prefix = labels.isEmpty ? "" : labels + ","
        let own = labels.isEmpty ? "" : "{\(labels)}"
        var cumulative = 0
        for (bound, bucket) in zip(bounds, buckets) {
            cumulative += bucket
            text += "\(name)_bucket{\(prefix)le=\"\(bound)\"} \(cumulative)\n"
        }
        text += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(count)\n"
        text += "\(name)_sum\(own) \(sum)\n"
        text += "\(name)_count\(own) \(count)\n"
    }
}
