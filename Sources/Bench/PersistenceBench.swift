import CounterCore
import Foundation
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter

/// Options of `counter-bench persistence`.
struct PersistenceBenchOptions {
    var changes = 10_000
    var posts = 100
    var repetitions = 5
    var servers: BenchServers

    init(arguments: [String], environment: [String: String]) throws {
        servers = BenchServers(environment: environment)
        var reader = BenchArguments(arguments)
        try reader.forEachFlag { flag, reader in
            switch flag {
            case "--changes": changes = try reader.number(flag, 1...1_000_000)
            case "--posts": posts = try reader.number(flag, 1...100_000)
            case "--repeat": repetitions = try reader.number(flag, 1...1_000)
            default: return try servers.take(flag, from: &reader)
            }
            return true
        }
    }
}

/// Times one batch-apply transaction and one Redis pipeline, each of `changes` items.
struct PersistenceBench {
    let options: PersistenceBenchOptions

    func run() async throws {
        let pool = PostgresPool(configuration: PostgresConfiguration(url: options.servers.postgresURL))
        let redis = RedisClient(configuration: try RedisConfiguration(url: options.servers.redisURL))
        try await redis.topology.discover()
        _ = try await SchemaMigrator.migrate(pool)
        let base = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        let posts = (0..<Int64(options.posts)).map { base + $0 }
        try await pool.query("INSERT INTO posts (id) SELECT unnest($1::bigint[])", [.int64Array(posts)])
        let layout = RedisKeyLayout(prefix: "bench-\(UInt32.random(in: 0...UInt32.max))")
        do {
            try await measure(posts: posts, layout: layout, pool: pool, redis: redis)
        } catch {
            try? await cleanUp(posts: posts, layout: layout, pool: pool, redis: redis)
            throw error
        }
        try await cleanUp(posts: posts, layout: layout, pool: pool, redis: redis)
        await redis.close()
        await redis.topology.close()
        await pool.close()
    }

    private func measure(posts: [Int64], layout: RedisKeyLayout, pool: PostgresPool, redis: RedisClient) async throws {
        print("counter-bench persistence: \(options.changes) changes over \(options.posts) posts, \(options.repetitions) timed runs after 1 warm-up")

        // Users drawn from a range about as large as the batch, so pairs repeat within a batch.
        let userRange: ClosedRange<Int64> = 1...Int64(max(1, options.changes))
        func batch() -> [LikeChange] {
            (0..<options.changes).map { _ in
                LikeChange(userID: Int64.random(in: userRange), postID: posts.randomElement()!, liked: Bool.random())
            }
        }

        // Inputs are prepared before the clock starts: the figures are the I/O and the server's work.
        let apply = try await time("PostgreSQL batch apply (one transaction)", prepare: batch) { changes in
            _ = try await LikeBatchApplier.apply(changes, pool: pool)
        }
        // On a Redis Cluster the pipeline is split by master, one pipeline to each at once.
        let plain = try await time(
            "Redis pipeline, SADD/SREM only",
            prepare: {
                batch().map { change -> SlotCommands in
                    let key = layout.likers(ofPost: change.postID)
                    return SlotCommands(
                        slot: HashSlot(post: change.postID),
                        commands: [change.liked ? .sadd(key, [change.userID]) : .srem(key, [change.userID])])
                }
            }
        ) { groups in
            _ = try await redis.executeAll(groups)
        }
        // As the shards write: one MULTI/EXEC per slot, in one pipeline (per master).
        let logged = try await time(
            "Redis MULTI/EXEC per slot, SADD/SREM per change + one packed XADD per slot",
            prepare: {
                Dictionary(grouping: batch()) { HashSlot(post: $0.postID) }.map { slot, changes in
                    SlotCommands(
                        slot: slot,
                        commands: changes.map { change -> RedisCommand in
                            let key = layout.likers(ofPost: change.postID)
                            return change.liked ? .sadd(key, [change.userID]) : .srem(key, [change.userID])
                        } + [ChangeLogEntry.append(changes, to: layout.changeLog(of: slot))], atomic: true)
                }
            }
        ) { groups in
            _ = try await redis.executeAll(groups)
        }
        print(
            String(
                format: "per change: batch apply %.2f µs, pipeline %.2f µs, logged transaction %.2f µs (medians)",
                apply * 1e6 / Double(options.changes), plain * 1e6 / Double(options.changes),
                logged * 1e6 / Double(options.changes)))

    }

    /// Removes the run's posts (their likes go with them) and Redis keys.
    private func cleanUp(posts: [Int64], layout: RedisKeyLayout, pool: PostgresPool, redis: RedisClient) async throws {
        try await pool.query("DELETE FROM posts WHERE id = ANY($1::bigint[])", [.int64Array(posts)])
        _ = try await redis.executeAll(
            posts.map { post in
                SlotCommands(
                    slot: HashSlot(post: post), commands: [.del([layout.likers(ofPost: post)]), .del([layout.changeLog(of: HashSlot(post: post))])])
            })
    }

    /// Runs `work` once to warm up, then `repetitions` times, each on a fresh input from
    /// `prepare` made before the clock starts; prints and returns the median seconds.
    private func time<Input>(_ label: String, prepare: () -> Input, _ work: (Input) async throws -> Void) async throws -> Double {
        try await work(prepare())
        var seconds: [Double] = []
        for _ in 0..<options.repetitions {
            let input = prepare()
            let start = ContinuousClock.now
            try await work(input)
            let elapsed = ContinuousClock.now - start
            seconds.append(elapsed.inSeconds)
        }
        seconds.sort()
        let median = seconds[seconds.count / 2]
        print(String(format: "  %@: median %.1f ms, min %.1f ms, max %.1f ms", label, median * 1e3, seconds.first! * 1e3, seconds.last! * 1e3))
        return median
    }
}
