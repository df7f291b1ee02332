import Foundation
import NodeTestSupport
import RedisDriver
import ShardRouter
import TestSupport
import Testing

@testable import WritePath

/// Redis as a hot set over PostgreSQL, against real servers: posts from before a restart are
/// found and evicted once idle, a memory target evicts the least recently touched first, and a
/// full Redis refuses writes without losing any.
@Suite("Redis as a hot set: discovery, memory target, a full Redis")
struct HotSetTests {
    /// `used_memory` of the Redis behind `client` (one server).
    static func usedMemory(_ client: RedisClient) async throws -> Int {
        let reply = try await client.pipeline([RedisCommand("INFO", "memory")], toMaster: try #require(client.masters.first))[0]
        guard case .bulkString(let bytes) = reply, let memory = RedisMemoryInfo.parse(String(decoding: bytes, as: UTF8.self)) else {
            throw RedisError(code: .unexpectedReply, message: "INFO memory: \(reply)")
        }
        return memory.usedBytes
    }

    @Test("posts an earlier process left in Redis are found at start and evicted once idle, without a touch", arguments: RedisTarget.allCases)
    func postsFromBeforeAreEvicted(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 6, redis: redis) { $0.hotIdle = nil }
        for (index, post) in harness.posts.enumerated() { _ = try await harness.service.perform(.like, post: post, user: Int64(index + 1)) }
        await harness.stopService() // drains: PostgreSQL has everything
        for post in harness.posts { #expect(try await harness.isHot(post)) }

        let restarted = try await harness.restarted { $0.hotIdle = .milliseconds(200) }
        // The walk visits every key of the Redis (a shared development Redis may hold millions,
        // at about 1,000 per millisecond): allow it a minute.
        let started = ContinuousClock.now
        var evicted = 0
        while evicted < harness.posts.count && ContinuousClock.now - started < .seconds(60) {
            try await Task.sleep(for: .milliseconds(50))
            evicted = await restarted.service.stats().reduce(0) { $0 + $1.evictedPosts }
        }
        #expect(evicted == harness.posts.count, "\(evicted) evicted after \(ContinuousClock.now - started)")
        for post in harness.posts {
            #expect(try await !harness.isHot(post))
            #expect(try await restarted.service.perform(.count, post: post, user: 0).likesCount == 1)
        }
        await restarted.stopService()
        await harness.stop()
    }

    @Test("above the memory target, the least recently touched posts leave Redis first until it is below; the newest stay")
    func memoryTarget() async throws {
        try await PrivateServers.with { servers in
            let probe = RedisClient(configuration: try RedisConfiguration(url: servers.redisURL))
            // What the posts cost in Redis, apart from what eviction cannot free (each slot's
            // log, empty or not): loaded, then all evicted by a restart with a short idle time.
            let first = try await WritePathHarness.start(
                posts: 2_000, postgresURL: servers.postgresURL, redis: .single,
                redisURL: servers.redisURL
            ) { $0.hotIdle = nil }
            let posts = first.posts
            for (index, post) in posts.enumerated() { _ = try await first.service.perform(.like, post: post, user: Int64(index % 7 + 1)) }
            await first.stopService()
            let loaded = try await Self.usedMemory(probe)
            let emptied = try await first.restarted { $0.hotIdle = .milliseconds(100) }
            for _ in 0..<200 where await emptied.service.stats().reduce(0, { $0 + $1.evictedPosts }) < posts.count {
                try await Task.sleep(for: .milliseconds(50))
            }
            await emptied.stopService()
            let cold = try await Self.usedMemory(probe)
            #expect(cold < loaded)
            // A target that holds about half of them.
            let target = cold + (loaded - cold) / 2
            let harness = try await first.restarted { configuration in
                configuration.hotIdle = nil
                configuration.hotMemoryTarget = target
            }
            for (index, post) in posts.enumerated() {
                _ = try await harness.service.perform(.like, post: post, user: Int64(index % 7 + 10))
            }
            var used = try await Self.usedMemory(probe)
            for _ in 0..<300 where used > target {
                try await Task.sleep(for: .milliseconds(100))
                used = try await Self.usedMemory(probe)
            }
            let stats = await harness.service.stats()
            let evicted = stats.reduce(0) { $0 + $1.evictedForMemory }
            print(
                "memory target: posts loaded \(loaded) B, cold \(cold) B, target \(target) B; used \(used) B after \(evicted) of \(posts.count) posts evicted"
            )
            #expect(used <= target, "used_memory \(used) above the target \(target)")
            #expect(evicted > 0 && evicted < posts.count)
            #expect(stats.reduce(0) { $0 + $1.evictedPosts } == evicted)
            // Least recently touched first: the first posts liked are cold, the last still hot.
            #expect(try await !harness.isHot(posts[0]))
            #expect(try await harness.isHot(posts[posts.count - 1]))
            // Every post still reads exactly, hot or cold.
            for (index, post) in posts.enumerated() where index % 97 == 0 {
                #expect(try await harness.service.perform(.count, post: post, user: 0).likesCount == 2)
            }
            await harness.stopService()
            await first.stop()
            await probe.close()
        }
    }

    @Test("a full Redis (maxmemory, noeviction) refuses writes with a retryable 503 and loses none; writes go on once there is room")
    func fullRedis() async throws {
        try await PrivateServers.with { servers in
            let harness = try await WritePathHarness.start(
                posts: 4, postgresURL: servers.postgresURL, redis: .single,
                redisURL: servers.redisURL)
            let probe = RedisClient(configuration: try RedisConfiguration(url: servers.redisURL))
            let master = try #require(probe.masters.first)
            for post in harness.posts { _ = try await harness.service.perform(.like, post: post, user: 1) }
            let used = try await Self.usedMemory(probe)
            _ = try await probe.pipeline([RedisCommand("CONFIG", "SET", "maxmemory", String(used + 20_000))], toMaster: master)
            var acknowledged: Set<Pair> = []
            var refused: Set<Pair> = []
            var user: Int64 = 2
            while refused.count < 20 && user < 100_000 {
                let post = harness.posts[Int(user) % harness.posts.count]
                do {
                    _ = try await harness.service.perform(.like, post: post, user: user)
                    acknowledged.insert(Pair(user: user, post: post))
                } catch let error as CounterError {
                    #expect(error.code == .unavailable && error.retryAfterSeconds != nil, "\(error)")
                    refused.insert(Pair(user: user, post: post))
                }
                user += 1
            }
            #expect(refused.count == 20, "Redis never filled up: \(acknowledged.count) writes acknowledged")
            // Room again: writes go on, and everything acknowledged reaches PostgreSQL, nothing refused does.
            _ = try await probe.pipeline([RedisCommand("CONFIG", "SET", "maxmemory", "0")], toMaster: master)
            _ = try await harness.service.perform(.like, post: harness.posts[0], user: 999_999)
            acknowledged.insert(Pair(user: 999_999, post: harness.posts[0]))
            try await harness.service.flush()
            let members = try await harness.postgresMembers()
            #expect(acknowledged.subtracting(members).isEmpty, "acknowledged likes lost: \(acknowledged.subtracting(members).count)")
            #expect(refused.intersection(members).isEmpty, "refused likes applied: \(refused.intersection(members).count)")
            let counts = try await harness.postgresCounts()
            for post in harness.posts { #expect(counts[post].map { $0.count == $0.rows } == true) }
            await harness.stop()
            await probe.close()
        }
    }
}
