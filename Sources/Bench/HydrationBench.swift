import BenchKit
import CounterCore
import Foundation
import Persistence
import ShardRouter
import Synchronization

/// Options of `counter-bench hydration`.
struct HydrationBenchOptions {
    var likers = 1_000_000
    var otherPosts = 16
    var load = LoadOptions()
    var apiToken: String?
    var adminToken: String?
    var servers: BenchServers

    init(arguments: [String], environment: [String: String]) throws {
        servers = BenchServers(environment: environment)
        apiToken = environment["COUNTER_API_TOKEN"]
        adminToken = environment["COUNTER_ADMIN_TOKEN"]
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
            case "--url":
                do {
                    load.endpoints = [try Endpoint(url: try reader.value(flag))]
                } catch let error as Endpoint.Invalid {
                    throw BenchUsageError(message: "--url \(error.message)")
                }
            case "--api-token": apiToken = try reader.value(flag)
            case "--admin-token": adminToken = try reader.value(flag)
            default: return try servers.take(flag, from: &reader)
            }
            return true
        }
    }
}

/// `counter-bench hydration`: the first touch of a post with `--likers` likers in PostgreSQL and
/// none in Redis, while toggles keep arriving on other posts of the same slot (so of the same
/// shard). Prints how long that first request took, the node's resident memory before, at its
/// peak during the load and after, and the other posts' latency meanwhile.
struct HydrationBench {
    let options: HydrationBenchOptions

    func run() async throws {
        let node = options.load.endpoints[0]
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
        print("counter-bench hydration: post \(post) (slot \(slot.rawValue)) with \(options.likers) likers in PostgreSQL; \(others.count) other posts of its slot under \(options.load.connections) connections")
        let created = ContinuousClock.now
        try await pool.query("INSERT INTO posts (id) SELECT unnest($1::bigint[])", [.int64Array([post] + others)])
        try await pool.query("""
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
    private func cleanUp(node: Endpoint, posts: [Int64], pool: PostgresPool) async {
        print("  deleting the posts and their likes …")
        _ = try? OneShotHTTP.send(to: node, method: "POST", path: "/admin/flush", token: options.adminToken)
        _ = try? await pool.query("DELETE FROM posts WHERE id = ANY($1::bigint[])", [.int64Array(posts)])
    }

    private func measure(node: Endpoint, post: Int64, others: [Int64], userBase: Int64) async throws {
        // The other posts are loaded before the measurement.
        for other in others {
            let (status, body) = try OneShotHTTP.send(to: node, method: "POST", path: "/v1/posts/\(other)/likes/1/toggle", token: options.apiToken)
            guard status == 200 else { throw BenchCheckFailure(message: "toggle on post \(other) answered \(status): \(body)") }
        }

        let rssBefore = try residentBytes(node)
        let peak = Mutex(rssBefore)
        let sampling = Atomic<Bool>(true)
        let sampler = Thread { [options] in
            while sampling.load(ordering: .relaxed) {
                if let bytes = try? HydrationBench.residentBytes(node, token: options.apiToken) { peak.withLock { $0 = max($0, bytes) } }
                usleep(20_000)
            }
        }
        sampler.start()
        var workload = ScenarioWorkload(scenario: .zipf, operation: .toggle, posts: others, zipfExponent: 0.99, readRatio: 0,
                                        token: options.apiToken, userBase: userBase + 1_000_000_000_000)
        workload.routing = .first
        let generator = LoadGenerator(options: options.load, workload: workload)
        // The first request on the large post, sent as the measured seconds begin.
        let first = Task.detached { [options] () -> (Double, Int, String) in
            try? await Task.sleep(for: options.load.warmup)
            let started = ContinuousClock.now
            let (status, body) = (try? OneShotHTTP.send(to: node, method: "POST", path: "/v1/posts/\(post)/likes/\(userBase)/toggle",
                                                         token: options.apiToken)) ?? (0, "no answer")
            return ((ContinuousClock.now - started).inSeconds, status, body)
        }
        let result = await generator.run { _, _, _, _ in }
        let (seconds, status, body) = await first.value
        sampling.store(false, ordering: .relaxed)
        let rssAfter = try residentBytes(node)
        let peakBytes = peak.withLock { $0 }
        let h = result.histogram
        print("  first request on the large post: \(String(format: "%.0f", seconds * 1_000)) ms, status \(status): \(body)")
        print(String(format: "  node resident memory: %.1f MB before, %.1f MB at the peak (+%.1f MB), %.1f MB after",
                     Double(rssBefore) / 1e6, Double(peakBytes) / 1e6, Double(peakBytes - rssBefore) / 1e6, Double(rssAfter) / 1e6))
        print(String(format: "  other posts of the slot meanwhile: %.0f toggles/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms, failures %d",
                     result.throughput, Double(h.percentile(0.5)) / 1_000, Double(h.percentile(0.99)) / 1_000,
                     Double(h.maximum) / 1_000, result.failures))
        print("  p99 per second (ms): " + result.p99Timeline.map { String(format: "%.1f", Double($0) / 1_000) }.joined(separator: " "))
        let expected = #""likes_count":\#(options.likers + 1)"#
        guard status == 200, body.contains(expected) else {
            throw BenchCheckFailure(message: "the first request on the large post should answer 200 with \(expected)")
        }
    }

    private func residentBytes(_ node: Endpoint) throws -> Int {
        try Self.residentBytes(node, token: options.apiToken)
    }

    static func residentBytes(_ node: Endpoint, token: String?) throws -> Int {
        let (status, body) = try OneShotHTTP.send(to: node, method: "GET", path: "/metrics", token: token, timeoutSeconds: 10)
        guard status == 200, let line = body.split(separator: "\n").first(where: { $0.hasPrefix("process_resident_memory_bytes ") }),
              let value = Double(line.dropFirst("process_resident_memory_bytes ".count)) else {
            throw BenchCheckFailure(message: "GET /metrics on \(node) did not give process_resident_memory_bytes")
        }
        return Int(value)
    }
}
