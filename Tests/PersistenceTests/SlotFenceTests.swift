import Persistence
import RedisDriver
import ShardRouter
import TestSupport
import Testing

@Suite("Fenced slot writes against real Redis")
struct SlotFenceTests {
    private func client(_ target: RedisTarget) async throws -> RedisClient {
        let topology = RedisTopology(configuration: try RedisConfiguration(url: target.url))
        try await topology.discover()
        return RedisClient(topology: topology)
    }

    @Test("the script's SHA-1 is the one Redis computes for it")
    func scriptDigest() async throws {
        let redis = RedisConnection(configuration: try TestEnvironment.redis())
        let reply = try await redis.send(RedisCommand("SCRIPT", "LOAD", FencedScript.guardedWrite))
        #expect(reply.string == FencedScript.guardedWriteSHA)
        let together = try await redis.send(RedisCommand("SCRIPT", "LOAD", FencedScript.guardedWrites))
        #expect(together.string == FencedScript.guardedWritesSHA)
    }

    @Test("one server: the writes of many slots in one call go as scripts of several slots; a slot whose epoch is not held is refused alone")
    func severalSlotsTogether() async throws {
        let redis = try await client(.single)
        let layout = RedisKeyLayout(prefix: TestEnvironment.uniqueKeyPrefix("fence-together"))
        // More posts than one script carries, on as many slots.
        let posts = (Int64(1)...Int64(FencedScript.maximumGroupsPerScript + 6)).map { 10_000 + $0 }
        let slots = posts.map { HashSlot(post: $0) }
        #expect(Set(slots).count == posts.count)
        let refusedPost = posts[3]
        _ = await SlotEpochKeys.raise(slots.map { ($0, $0 == HashSlot(post: refusedPost) ? 8 : 2) }, layout: layout, redis: redis)
        let results = await redis.execute(
            zip(posts, slots).map { post, slot in
                SlotCommands(
                    slot: slot, commands: [.sadd(layout.likers(ofPost: post), [post, 1]), .get(layout.likers(ofPost: post))],
                    fence: layout.fence(of: slot, epoch: 2))
            })
        for (post, result) in zip(posts, results) {
            if post == refusedPost {
                #expect(result.failureCode == .fenced)
                #expect(try await redis.send(.exists([layout.likers(ofPost: post)]), slot: HashSlot(post: post)).integer == 0)
            } else {
                let replies = try result.get()
                #expect(replies.count == 2)
                #expect(replies[0].integer == 2)
                guard case .error(let text) = replies[1] else {
                    Issue.record("GET of a set should be an error reply in its place, got \(replies[1])")
                    continue
                }
                #expect(text.hasPrefix("WRONGTYPE"))
            }
        }
        for (post, slot) in zip(posts, slots) {
            _ = try await redis.send(.del([layout.likers(ofPost: post), layout.epoch(of: slot)]), slot: slot)
        }
        await redis.close()
    }

    @Test(
        "a write runs only while the writer holds the slot's epoch; a missing or other epoch refuses it whole",
        arguments: RedisTarget.allCases)
    func fencedWrites(_ target: RedisTarget) async throws {
        let redis = try await client(target)
        let layout = RedisKeyLayout(prefix: TestEnvironment.uniqueKeyPrefix("fence"))
        let post: Int64 = 4242
        let slot = HashSlot(post: post)
        let likers = layout.likers(ofPost: post)
        let log = layout.changeLog(of: slot)
        func write(_ user: Int64, epoch: Int64) async -> Result<[RedisReply], RedisError> {
            await redis.execute([
                SlotCommands(
                    slot: slot,
                    commands: [
                        .sadd(likers, [user]), .xadd(log, fields: [("u", user)]), .get(likers),
                    ], fence: layout.fence(of: slot, epoch: epoch))
            ])[0]
        }

        // No epoch key yet: refused (fail closed), nothing written.
        let missing = await write(1, epoch: 5)
        #expect(missing.failureCode == .fenced)
        #expect(try await redis.send(.scard(likers), slot: slot).integer == 0)

        #expect(await SlotEpochKeys.raise([(slot, 5)], layout: layout, redis: redis).map { try? $0.get() } == [5])
        // The holder's write runs whole, with each command's reply as EXEC gives them (an error
        // reply in place, the others still run).
        let held = try await write(1, epoch: 5).get()
        #expect(held.count == 3)
        #expect(held[0].integer == 1)
        #expect(held[1].string?.contains("-") == true)
        guard case .error(let text) = held[2] else {
            Issue.record("GET of a set should be an error reply, got \(held[2])")
            return
        }
        #expect(text.hasPrefix("WRONGTYPE"))

        // A later claim: the old holder is refused, the new one runs.
        #expect(await SlotEpochKeys.raise([(slot, 9)], layout: layout, redis: redis).map { try? $0.get() } == [9])
        let stale = await write(2, epoch: 5)
        #expect(stale.failureCode == .fenced)
        #expect(try await write(3, epoch: 9).get()[0].integer == 1)
        #expect(try await redis.send(.scard(likers), slot: slot).integer == 2)
        #expect(try await redis.send(.xlen(log), slot: slot).integer == 2)

        // A claim delayed past a later one cannot lower the key.
        #expect(await SlotEpochKeys.raise([(slot, 7)], layout: layout, redis: redis).map { try? $0.get() } == [9])
        #expect(await SlotEpochKeys.read([slot], layout: layout, redis: redis).map { try? $0.get() } == [9])
        #expect(await write(4, epoch: 7).failureCode == .fenced)
        _ = try await redis.send(.del([likers, log, layout.epoch(of: slot)]), slot: slot)
        await redis.close()
    }

    // On the test cluster: the single test server's script cache is left alone, since another
    // suite loads a script there and runs it by its hash.
    @Test("a Redis that lost its script cache (SCRIPT FLUSH) is sent the script's text, once")
    func scriptCacheLost() async throws {
        let redis = try await client(.cluster)
        let layout = RedisKeyLayout(prefix: TestEnvironment.uniqueKeyPrefix("fence-flush"))
        let slot = HashSlot(post: 77)
        _ = await SlotEpochKeys.raise([(slot, 3)], layout: layout, redis: redis)
        _ = try await redis.send(RedisCommand("SCRIPT", "FLUSH"), slot: slot)
        let result = await redis.execute([
            SlotCommands(
                slot: slot, commands: [.sadd(layout.likers(ofPost: 77), [1])],
                fence: layout.fence(of: slot, epoch: 3))
        ])[0]
        #expect(try result.get()[0].integer == 1)
        _ = try await redis.send(.del([layout.likers(ofPost: 77), layout.epoch(of: slot)]), slot: slot)
        await redis.close()
    }

    @Test("a command of 4,000 arguments fits a fenced write")
    func largestCommand() async throws {
        let redis = try await client(.single)
        let layout = RedisKeyLayout(prefix: TestEnvironment.uniqueKeyPrefix("fence-large"))
        let slot = HashSlot(post: 78)
        _ = await SlotEpochKeys.raise([(slot, 1)], layout: layout, redis: redis)
        let users = (1...Int64(FencedScript.maximumArgumentsPerCommand - 1)).map { $0 }
        let result = await redis.execute([
            SlotCommands(
                slot: slot, commands: [.sadd(layout.likers(ofPost: 78), users)],
                fence: layout.fence(of: slot, epoch: 1))
        ])[0]
        #expect(try result.get()[0].integer == Int64(users.count))
        _ = try await redis.send(.del([layout.likers(ofPost: 78), layout.epoch(of: slot)]), slot: slot)
        await redis.close()
    }
}

extension Result where Failure == RedisError {
    var failureCode: RedisError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
