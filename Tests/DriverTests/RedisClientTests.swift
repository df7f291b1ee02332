import RedisDriver
import ShardRouter
import TestSupport
import Testing

@Suite("Redis client against a real server")
struct RedisClientTests {
    @Test(
        "WAIT asks on the opening of the connection that carried the writes: once that connection was reopened it sends nothing and fails, instead of confirming at once writes the new one never carried"
    )
    func waitOnTheOpeningThatWrote() async throws {
        let client = RedisClient(configuration: try TestEnvironment.redis())
        try await client.topology.discover()
        let key = TestEnvironment.uniqueKeyPrefix("wait-opening")
        let slot = HashSlot(key: Array(key.utf8))
        let master = try #require(client.topology.map.master(of: slot))
        let first = await client.executeNotingOpenings([
            SlotCommands(slot: slot, commands: [RedisCommand("SET", key, "1"), RedisCommand("CLIENT", "ID")])
        ])
        let clientID = try #require(try first.results[0].get()[1].integer)
        // On the opening that wrote, WAIT runs (no replicas here: it counts 0, as asked).
        #expect(try await client.waitForReplicas(master: master, replicas: 0, timeout: .milliseconds(100), carriedBy: first.openings).get() == 0)
        // The connection is cut; the next write reopens it.
        let killer = RedisConnection(configuration: try TestEnvironment.redis())
        try await killer.send(RedisCommand("CLIENT", "KILL", "ID", String(clientID)))
        let second = await client.executeNotingOpenings([SlotCommands(slot: slot, commands: [RedisCommand("SET", key, "2")])])
        _ = try second.results[0].get()
        #expect(second.openings.opening(of: master) != first.openings.opening(of: master))
        let refused = await #expect(throws: RedisError.self) {
            try await client.waitForReplicas(master: master, replicas: 0, timeout: .milliseconds(100), carriedBy: first.openings).get()
        }
        #expect(refused?.code == .connectionLost, "\(String(describing: refused))")
        #expect(refused?.message.contains("nothing sent") == true, "\(String(describing: refused))")
        #expect(try await client.waitForReplicas(master: master, replicas: 0, timeout: .milliseconds(100), carriedBy: second.openings).get() == 0)
        // Writes that went on two openings cannot be vouched for by either.
        var both = first.openings
        both.merge(second.openings)
        #expect(both.opening(of: master) == nil)
        await #expect(throws: RedisError.self) {
            try await client.waitForReplicas(master: master, replicas: 0, timeout: .milliseconds(100), carriedBy: both).get()
        }
        try await killer.send(.del([key]))
    }

    @Test("a pipeline of 10,000 commands returns 10,000 replies in order")
    func tenThousandCommandPipeline() async throws {
        let redis = RedisConnection(configuration: try TestEnvironment.redis())
        let key = TestEnvironment.uniqueKeyPrefix("pipeline")
        let replies = try await redis.pipeline((0..<10_000).map { _ in RedisCommand.incrBy(key, 1) })
        #expect(replies.count == 10_000)
        #expect(replies.map(\.integer) == (1...10_000).map { Int64($0) })
        try await redis.send(.del([key]))
    }

    @Test("an error reply keeps its place and Redis's text; the other replies are intact")
    func errorInPipeline() async throws {
        let redis = RedisConnection(configuration: try TestEnvironment.redis())
        let key = TestEnvironment.uniqueKeyPrefix("errors")
        let replies = try await redis.pipeline([
            .set(key, "text"),
            .sadd(key, ["member"]),
            .get(key),
        ])
        #expect(replies[0] == .status("OK"))
        guard case .error(let text) = replies[1] else {
            Issue.record("expected an error, got \(replies[1])")
            return
        }
        #expect(text.hasPrefix("WRONGTYPE"))
        #expect(replies[2].string == "text")
        let thrown = await #expect(throws: RedisError.self) { try await redis.send(.sadd(key, ["member"])) }
        #expect(thrown?.code == .server)
        #expect(thrown?.message.hasPrefix("(Redis) WRONGTYPE") == true)
        try await redis.send(.del([key]))
    }

    @Test("MULTI/EXEC runs a batch atomically and returns each command's reply")
    func transaction() async throws {
        let redis = RedisConnection(configuration: try TestEnvironment.redis())
        let set = TestEnvironment.uniqueKeyPrefix("tx-set")
        let counter = TestEnvironment.uniqueKeyPrefix("tx-count")
        let replies = try await redis.transaction([
            .sadd(set, [7, 8, 9]),
            .srem(set, [8]),
            .incrBy(counter, 2),
            .smismember(set, [7, 8, 9, 10]),
        ])
        #expect(replies.count == 4)
        #expect(replies[0].integer == 3)
        #expect(replies[1].integer == 1)
        #expect(replies[2].integer == 2)
        #expect(replies[3].array?.map(\.integer) == [1, 0, 1, 0])
        #expect(try await redis.send(.scard(set)).integer == 2)
        try await redis.send(.del([set, counter]))
    }

    @Test("a transaction with a refused command runs nothing and reports Redis's text")
    func abortedTransaction() async throws {
        let redis = RedisConnection(configuration: try TestEnvironment.redis())
        let key = TestEnvironment.uniqueKeyPrefix("tx-abort")
        let error = await #expect(throws: RedisError.self) {
            try await redis.transaction([.incrBy(key, 1), RedisCommand("NOSUCHCOMMAND", "x")])
        }
        #expect(error?.code == .server)
        #expect(error?.message.contains("EXECABORT") == true)
        #expect(error?.message.contains("unknown command") == true)
        #expect(try await redis.send(.exists([key])).integer == 0)
        #expect(try await redis.send(.ping()) == .status("PONG"))
    }

    @Test("a stream with a consumer group: add, read, re-read pending, acknowledge")
    func streams() async throws {
        let redis = RedisConnection(configuration: try TestEnvironment.redis())
        let key = TestEnvironment.uniqueKeyPrefix("stream")
        try await redis.send(.xgroupCreate(key, group: "flusher"))
        var ids: [StreamEntryID] = []
        for user in 1...3 {
            let reply = try await redis.send(.xadd(key, fields: [("u", Int64(user)), ("p", "42"), ("l", "1")]))
            ids.append(try #require(reply.string.flatMap(StreamEntryID.init)))
        }
        #expect(ids == ids.sorted())
        let fresh = try await redis.send(.xreadgroup(group: "flusher", consumer: "c1", count: 10, key: key)).streamEntries()
        #expect(fresh.map(\.id) == ids)
        #expect(fresh.map { $0.string("u") } == ["1", "2", "3"])
        #expect(try await redis.send(.xreadgroup(group: "flusher", consumer: "c1", count: 10, key: key)).streamEntries().isEmpty)
        let pending = try await redis.send(.xreadgroup(group: "flusher", consumer: "c1", count: 10, key: key, id: "0")).streamEntries()
        #expect(pending.map(\.id) == ids)
        #expect(try await redis.send(.xack(key, group: "flusher", ids: Array(ids.prefix(2)))).integer == 2)
        let stillPending = try await redis.send(.xreadgroup(group: "flusher", consumer: "c1", count: 10, key: key, id: "0")).streamEntries()
        #expect(stillPending.map(\.id) == [ids[2]])
        #expect(try await redis.send(.xdel(key, ids: ids)).integer == 3)
        #expect(try await redis.send(.xlen(key)).integer == 0)
        try await redis.send(.del([key]))
    }

    @Test("a script loaded once runs by its hash")
    func scripts() async throws {
        let redis = RedisConnection(configuration: try TestEnvironment.redis())
        let key = TestEnvironment.uniqueKeyPrefix("script")
        let sha = try #require(try await redis.send(.scriptLoad("return redis.call('SADD', KEYS[1], ARGV[1])")).string)
        #expect(try await redis.send(.evalsha(sha, keys: [key], arguments: [5])).integer == 1)
        #expect(try await redis.send(.evalsha(sha, keys: [key], arguments: [5])).integer == 0)
        try await redis.send(.del([key]))
    }

    @Test("empty and oversized pipelines are refused before anything is sent")
    func badPipelines() async throws {
        var configuration = try TestEnvironment.redis()
        configuration.maximumPipelineCommands = 100
        configuration.maximumPipelineBytes = 4096
        let redis = RedisConnection(configuration: configuration)
        let key = TestEnvironment.uniqueKeyPrefix("limits")
        let empty = await #expect(throws: RedisError.self) { try await redis.pipeline([]) }
        #expect(empty?.code == .invalidArgument)
        let tooMany = await #expect(throws: RedisError.self) {
            try await redis.pipeline((0..<101).map { _ in .incrBy(key, 1) })
        }
        #expect(tooMany?.message.contains("exceeds the limit of 100") == true)
        let tooLarge = await #expect(throws: RedisError.self) {
            try await redis.pipeline([.set(key, String(repeating: "x", count: 5000))])
        }
        #expect(tooLarge?.message.contains("bytes") == true)
        let emptyTransaction = await #expect(throws: RedisError.self) { try await redis.transaction([]) }
        #expect(emptyTransaction?.code == .invalidArgument)
        #expect(try await redis.send(.exists([key])).integer == 0)
    }

    @Test("the default limit refuses a pipeline of more than 100,000 commands")
    func defaultLimit() async throws {
        let redis = RedisConnection(configuration: try TestEnvironment.redis())
        let error = await #expect(throws: RedisError.self) {
            try await redis.pipeline([RedisCommand](repeating: .ping(), count: 100_001))
        }
        #expect(error?.code == .invalidArgument)
    }

    @Test(
        "bad Redis URLs are refused with a reason",
        arguments: [
            "http://localhost", "redis://", "redis://host:0", "redis://host:99999", "redis://host:6379/x",
        ])
    func badURLs(url: String) {
        #expect(throws: RedisError.self) { try RedisConfiguration(url: url) }
    }

    @Test(
        "bad Redis Cluster URLs are refused with a reason",
        arguments: [
            "redis-cluster://", "redis-cluster://host", "redis-cluster://host:1,", "redis-cluster://,host:1",
            "redis-cluster://host:0", "redis-cluster://host:1/2", "redis-cluster://host:1,,host:2", "redis-cluster://h:1,h:x",
            "redis-cluster://:pw@", "rediscluster://host:1",
        ])
    func badClusterURLs(url: String) {
        let error = #expect(throws: RedisError.self) { try RedisConfiguration(url: url) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains(url) == true)
    }

    @Test("cluster URLs give the seed nodes in order, without repeats, and a password")
    func clusterURL() throws {
        let configuration = try RedisConfiguration(url: "redis-cluster://:pw@10.0.0.1:7000,cache-b:7001,10.0.0.1:7000,[::1]:7002")
        #expect(configuration.mode == .cluster)
        #expect(
            configuration.seeds == [
                RedisEndpoint(host: "10.0.0.1", port: 7000), RedisEndpoint(host: "cache-b", port: 7001),
                RedisEndpoint(host: "::1", port: 7002),
            ])
        #expect(configuration.password == "pw")
        #expect(configuration.seeds[2].description == "[::1]:7002")
        let single = try RedisConfiguration(url: "redis://127.0.0.1:6380")
        #expect(single.mode == .single)
        #expect(single.seeds == [RedisEndpoint(host: "127.0.0.1", port: 6380)])
    }

    @Test("a CLUSTER SLOTS reply becomes a slot map; holes are named; MOVED changes one slot")
    func clusterSlotMap() throws {
        func node(_ host: String, _ port: Int64) -> RedisReply {
            .array([.bulkString(Array(host.utf8)), .integer(port), .bulkString(Array("id".utf8))])
        }
        let reply = RedisReply.array([
            .array([.integer(0), .integer(5460), node("10.0.0.1", 7000), node("10.0.0.4", 7003)]),
            .array([.integer(5461), .integer(10922), node("", 7001)]),
            .array([.integer(10924), .integer(16383), node("10.0.0.3", 7002)]),
        ])
        var map = try ClusterSlotMap(clusterSlots: reply, askedHost: "10.0.0.2")
        #expect(map.master(of: HashSlot(rawValue: 0)!) == RedisEndpoint(host: "10.0.0.1", port: 7000))
        #expect(map.master(of: HashSlot(rawValue: 6000)!) == RedisEndpoint(host: "10.0.0.2", port: 7001))
        #expect(map.master(of: HashSlot(rawValue: 10923)!) == nil)
        #expect(map.uncoveredSlots == [10923...10923])
        #expect(map.uncoveredSlotCount == 1)
        #expect(map.replicas == [RedisEndpoint(host: "10.0.0.4", port: 7003)])
        #expect(ClusterSlotMap.describe(map.uncoveredSlots) == "10923")
        #expect(map.slotCounts[RedisEndpoint(host: "10.0.0.3", port: 7002)] == 5460)
        map.move(HashSlot(rawValue: 10923)!, to: RedisEndpoint(host: "10.0.0.3", port: 7002))
        #expect(map.uncoveredSlots.isEmpty)
        #expect(throws: RedisError.self) { try ClusterSlotMap(clusterSlots: .array([.array([.integer(0)])]), askedHost: "x") }
        #expect(ClusterSlotMap(single: RedisEndpoint(host: "h", port: 1)).uncoveredSlots.isEmpty)
    }

    @Test("URLs with password and database are read")
    func goodURL() throws {
        let configuration = try RedisConfiguration(url: "redis://:s3cret@cache.internal:6380/2")
        #expect(configuration.host == "cache.internal")
        #expect(configuration.port == 6380)
        #expect(configuration.password == "s3cret")
        #expect(configuration.database == 2)
    }

    @Test("an unreachable server fails fast, and calls inside the backoff window fail at once")
    func unreachable() async throws {
        var configuration = RedisConfiguration(host: "127.0.0.1", port: 1)
        configuration.reconnectInitialDelay = .seconds(30)
        configuration.reconnectMaximumDelay = .seconds(30)
        let redis = RedisConnection(configuration: configuration)
        let first = await #expect(throws: RedisError.self) { try await redis.send(.ping()) }
        #expect(first?.code == .connectionFailed)
        #expect(first?.message.contains("127.0.0.1:1") == true)
        let second = await #expect(throws: RedisError.self) { try await redis.send(.ping()) }
        #expect(second?.message.contains("next reconnect attempt") == true)
        #expect(second?.isRetryable == true)
    }
}
