import BenchKit
import CounterCore
import Foundation
import PostgresDriver
import ShardRouter
import Synchronization

/// Options of `counter-bench hydration`.
struct HydrationBenchOptions {
    var likers = 1_000_000
    var otherPosts = 16
    var load = LoadOptions()
    var node: NodeTarget
    var servers: BenchServers

    init(arguments: [String], environment: [String: String]) throws {
        servers = BenchServers(environment: environment)
        node = NodeTarget(environment: environment)
        load.connections = 64
        load.warmup = .seconds(1)
        load.duration = .seconds(4)
        var reader = BenchArguments(arguments)
        try reader.forEachFlag { flag, reader in
            switch flag {
            case "--likers": likers = try reader.number(flag, 1...20_000_000)
            case "--other-posts": otherPosts = try reader.number(flag, 1...1_000)
            case "--connections": load.connections = try reader.number(flag, 1...20_000)
            case "--duration": load.duration = .seconds(try reader.number(flag, 2...3_600))
            default: return try node.take(flag, from: &reader) || servers.take(flag, from: &reader)
            }
            return true
        }
        load.endpoints = [node.endpoint]
    }
}

/// `counter-bench hydration`: the first touch of a post with `--likers` likers in PostgreSQL and
/// none in Redis, while toggles keep arriving on other posts of the same slot (so of the same
/// shard). Prints how long that first request took, the node's resident memory before, at its
/// peak during the load and after, and the other posts' latency meanwhile.
struct HydrationBench {
    let options: HydrationBenchOptions

    func run() async throws {
        let node = options.node
        let pool = PostgresPool(configuration: PostgresConfiguration(url: options.servers.postgresURL))
        defer { Task { await pool.close() } }
        let post = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        let slot = HashSlot(post: post)
        var others: [Int64] = []
        var candidate = post
        while others.count < options.otherPosts {
            candidate += 1
            if HashSlot(post: candidate) == slot { others.append(candidate) }
        }
        let userBase = Int64.random(in: 1...1_000_000) * 1_000_000_000
        print(
            "counter-bench hydration: post \(post) (slot \(slot.rawValue)) with \(options.likers) likers in PostgreSQL; \(others.count) other posts of its slot under \(options.load.connections) connections"
        )
        let created = ContinuousClock.now
        try await pool.query("INSERT INTO posts (id) SELECT unnest($1::bigint[])", [.int64Array([post] + others)])
        try await pool.query(
            """
            INSERT INTO likes (user_id, post_id, created_at, updated_at)
            SELECT $2 + g, $1, now(), now() FROM generate_series(1, $3::bigint) g
            """, [.int64(post), .int64(userBase), .int64(Int64(options.likers))])
        try await pool.query("UPDATE posts SET likes_count = $2 WHERE id = $1", [.int64(post), .int64(Int64(options.likers))])
        print(String(format: "  %d likes rows written in %.1f s", options.likers, (ContinuousClock.now - created).inSeconds))
        do {
            try await measure(node: node, post: post, others: others, userBase: userBase)
        } catch {
            await cleanUp(node: node, posts: [post] + others, pool: pool)
            throw error
        }
        await cleanUp(node: node, posts: [post] + others, pool: pool)
    }

    /// Flushes the node (deleting posts it is still writing deadlocks with its flush), then
    /// deletes the posts and their likes.
    private func cleanUp(node: NodeTarget, posts: [Int64], pool: PostgresPool) async {
        print("  deleting the posts and their likes …")
        try? node.flush()
        _ = try? await pool.query("DELETE FROM posts WHERE id = ANY($1::bigint[])", [.int64Array(posts)])
    }

    private func measure(node: NodeTarget, post: Int64, others: [Int64], userBase: Int64) async throws {
        // The other posts are loaded before the measurement.
        for other in others {
            let (status, body) = try OneShotHTTP.send(
                to: node.endpoint, method: "POST", path: "/v1/posts/\(other)/likes/1/toggle", token: node.apiToken)
            guard status == 200 else { throw BenchCheckFailure(message: "toggle on post \(other) answered \(status): \(body)") }
        }

        let rssBefore = try node.residentBytes()
        let peak = Mutex(rssBefore)
        let sampling = Atomic<Bool>(true)
        let sampler = Thread {
            while sampling.load(ordering: .relaxed) {
                if let bytes = try? node.residentBytes() { peak.withLock { $0 = max($0, bytes) } }
                usleep(20_000)
            }
        }
        sampler.start()
        var workload = ScenarioWorkload(
            scenario: .zipf, operation: .toggle, posts: others, zipfExponent: 0.99, readRatio: 0,
            token: node.apiToken, userBase: userBase + 1_000_000_000_000)
        workload.routing = .first
        let generator = LoadGenerator(options: options.load, workload: workload)
        // The first request on the large post, sent as the measured seconds begin.
        let first = Task.detached { [options] () -> (Double, Int, String) in
            try? await Task.sleep(for: options.load.warmup)
            let started = ContinuousClock.now
            let (status, body) =
                (try? OneShotHTTP.send(
                    to: node.endpoint, method: "POST", path: "/v1/posts/\(post)/likes/\(userBase)/toggle",
                    token: node.apiToken)) ?? (0, "no answer")
            return ((ContinuousClock.now - started).inSeconds, status, body)
        }
        let result = await generator.run { _, _, _, _ in }
        let (seconds, status, body) = await first.value
        sampling.store(false, ordering: .relaxed)
        let rssAfter = try node.residentBytes()
        let peakBytes = peak.withLock { $0 }
        let h = result.histogram
        print("  first request on the large post: \(String(format: "%.0f", seconds * 1_000)) ms, status \(status): \(body)")
        print(
            String(
                format: "  node resident memory: %.1f MB before, %.1f MB at the peak (+%.1f MB), %.1f MB after",
                Double(rssBefore) / 1e6, Double(peakBytes) / 1e6, Double(peakBytes - rssBefore) / 1e6, Double(rssAfter) / 1e6))
        print(
            String(
                format: "  other posts of the slot meanwhile: %.0f toggles/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms, failures %d",
                result.throughput, Double(h.percentile(0.5)) / 1_000, Double(h.percentile(0.99)) / 1_000,
                Double(h.maximum) / 1_000, result.failures))
        print("  p99 per second (ms): " + result.p99Timeline.map { String(format: "%.1f", Double($0) / 1_000) }.joined(separator: " "))
        let expected = #""likes_count":\#(options.likers + 1)"#
        guard status == 200, body.contains(expected) else {
            throw BenchCheckFailure(message: "the first request on the large post should answer 200 with \(expected)")
        }
    }
}
