import Foundation
import Persistence
import RedisDriver
import Testing

@testable import WritePath

/// A batch in flight when the world changes under it: the node stops deciding (its lease may
/// run out) while the batch waits for Redis, or the Redis master of one of its slots fails over.
@Suite("A batch in flight when the node stops deciding or its Redis master fails over (pure)")
struct BatchInFlightEdgeTests {
    typealias Flushes = ShardFlushModelTests

    static func isBatchRedis(_ action: ShardStateMachine.Action) -> Bool {
        if case .batchRedis = action { return true }
        return false
    }

    static func like(_ user: Int64, slot: UInt16) -> ShardDecider.Request {
        ShardDecider.Request(operation: .like, postID: Flushes.postOfSlot[slot]!, userID: user)
    }

    /// What the batch's callers were told.
    static func answers(_ driver: ShardDriver) -> [String] {
        driver.replies.all.filter { $0.hasPrefix("batch") }
    }

    /// A driver whose slots are claimed, with a batch of `requests` started and its first Redis
    /// call (the read) held back.
    static func batchWaitingForRedis(_ requests: [ShardDecider.Request]) throws -> (ShardDriver, held: [ShardStateMachine.Action]) {
        let driver = Flushes.driver()
        FailoverRepairTests.claimAll(driver)
        driver.submit(requests, label: "batch")
        let held = driver.run(holding: isBatchRedis)
        try #require(held.count == 1 && driver.machine.lane.isBatchInFlight, "the batch's read waits for Redis")
        return (driver, held)
    }

    @Test(
        "the node stops deciding while a batch's read waits for Redis: its callers are answered at once (nothing was done), and once the read is back nothing is written"
    )
    func lapseWhileReading() throws {
        let (driver, held) = try Self.batchWaitingForRedis([Self.like(1, slot: 0)])
        driver.deliver(.deciding(false))
        #expect(Self.answers(driver).count == 1, "answered without waiting for Redis: \(driver.replies.all)")
        #expect(Self.answers(driver).first?.contains(ShardStateMachine.leaseLapsed.message) == true, "\(driver.replies.all)")
        // Redis answers late: the batch decides on nothing and writes nothing.
        driver.pending.insert(contentsOf: held, at: 0)
        driver.run(rounds: 200)
        #expect(!driver.machine.lane.isBatchInFlight)
        #expect(driver.world.newestEntry(0) == nil, "nothing logged for an operation already refused")
        #expect(Self.answers(driver).count == 1, "answered once: \(driver.replies.all)")
    }

    @Test(
        "the node stops deciding while a batch's write waits for Redis: its callers are told at once that it may or may not be made (and later arrivals that it is not deciding), and what the write logged is flushed as ever"
    )
    func lapseWhileWriting() throws {
        let (driver, held) = try Self.batchWaitingForRedis([Self.like(1, slot: 0), Self.like(2, slot: 1)])
        // The read comes back (and the cold lookup): the write is sent, and held.
        driver.perform(held[0])
        let write = driver.run(holding: Self.isBatchRedis)
        try #require(write.count == 1, "the batch's write waits for Redis")
        driver.deliver(.deciding(false))
        #expect(Self.answers(driver).count == 2, "both answered without waiting for Redis: \(driver.replies.all)")
        #expect(Self.answers(driver).allSatisfy { $0.contains("the change was sent to Redis, which has not answered") }, "\(driver.replies.all)")
        // What arrives meanwhile is refused at once too, rather than queued behind the batch (and
        // it wakes the shard for that).
        #expect(driver.machine.wantsOperations)
        driver.submit([Self.like(3, slot: 2)], label: "later")
        #expect(
            driver.replies.all.filter { $0.hasPrefix("later") }.map { $0.contains(ShardStateMachine.leaseLapsed.message) } == [true],
            "\(driver.replies.all)")
        // The write is made after all: it is logged, and a flush applies it.
        driver.pending.insert(contentsOf: write, at: 0)
        driver.run(rounds: 200)
        #expect(!driver.machine.lane.isBatchInFlight)
        #expect(Set(driver.world.appended.map(\.log)) == [driver.world.logKey(0), driver.world.logKey(1)], "the write was logged")
        driver.deliver(.flushAll(driver.reply("flush")))
        driver.run(rounds: 400)
        #expect(driver.world.likes[Flushes.postOfSlot[0]!] == [1] && driver.world.likes[Flushes.postOfSlot[1]!] == [2], "applied")
        #expect(Self.answers(driver).count == 2, "answered once each: \(driver.replies.all)")
    }

    @Test(
        "a slot's Redis master fails over while a batch runs: the batch's answers on that slot are refused (it may have read the promoted replica before the repair), the others given"
    )
    func failoverDuringTheBatch() throws {
        let (driver, held) = try Self.batchWaitingForRedis([Self.like(1, slot: 0), Self.like(2, slot: 1)])
        driver.deliver(.redisFailedOver([0]))
        driver.pending.insert(contentsOf: held, at: 0)
        driver.run(rounds: 200)
        let answers = Self.answers(driver).sorted()
        try #require(answers.count == 2, "\(driver.replies.all)")
        #expect(answers[0].contains(ShardStateMachine.lostInFailover.message), "slot 0's answer: \(answers[0])")
        #expect(answers[1].contains("success"), "slot 1's answer: \(answers[1])")
        #expect(driver.machine.currentStats(now: driver.now).failoverRepairs == 1, "slot 0 is repaired after the batch")
    }
}
