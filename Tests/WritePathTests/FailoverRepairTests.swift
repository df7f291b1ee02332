import Foundation
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import Testing
@testable import WritePath

/// The repair after a Redis failover and the check of a log that reads empty, at the edges a
/// review found: a batch in flight when the failover is heard, a slot claimed after it, a
/// hand-off whose entries Redis lost, and entries appended while PostgreSQL's progress is read.
@Suite("Failover repair and lost logs at their edges (pure)")
struct FailoverRepairTests {
    typealias Driver = ShardFlushModelTests.Driver

    /// Performs the driver's pending actions (FIFO) but holds back those `hold` picks; returns them.
    static func run(_ driver: Driver, holding hold: (ShardStateMachine.Action) -> Bool, rounds: Int = 400) -> [ShardStateMachine.Action] {
        var held: [ShardStateMachine.Action] = []
        for _ in 0..<rounds {
            guard !driver.pending.isEmpty else { break }
            let action = driver.pending.removeFirst()
            if hold(action) {
                held.append(action)
                continue
            }
            if let event = driver.model.perform(action) { driver.deliver(event) }
        }
        return held
    }

    static func isProgressRead(_ action: ShardStateMachine.Action) -> Bool {
        if case .readFlushProgress = action { return true }
        return false
    }

    static func claimAll(_ driver: Driver) {
        driver.deliver(.claim(Dictionary(uniqueKeysWithValues: Driver.slots.map { ($0, Int64(10)) }), driver.reply("claim")))
        driver.run(rounds: 200)
    }

    /// Appends `changes` to `slot`'s log as a batch does (the model's log and the shard's books).
    @discardableResult
    static func append(_ driver: Driver, _ changes: [LikeChange], slot: UInt16) -> StreamEntryID {
        let id = driver.model.append(changes, slot: slot)
        driver.machine.wake(driver.machine.scheduler.appended([slot: (changes.count, id)], now: driver.now))
        return id
    }

    @Test("a log read empty is judged by PostgreSQL's progress only up to what was noted when it was read; the flush ends with that answer, not before")
    func entriesAppendedDuringTheCheckAreNotLost() throws {
        let driver = Driver()
        Self.claimAll(driver)
        // E1 is noted, then Redis loses it (a restart without its data).
        let lostEntry = Self.append(driver, [LikeChange(userID: 1, postID: 1, liked: true)], slot: 0)
        driver.model.logs[0] = []
        driver.deliver(.flushAll(driver.reply("first")))
        let held = Self.run(driver, holding: Self.isProgressRead)
        try #require(held.count == 1, "the empty log's progress is read")
        // While that read is out, the flush run waits for it: ticks start no other read.
        for _ in 0..<5 {
            driver.now += .milliseconds(200)
            driver.deliver(.tick)
        }
        #expect(!driver.pending.contains { if case .readLogs = $0 { return true } else { return false } }, "no log read while the check is out")
        // E2 is appended meanwhile, and a caller waits for it.
        let kept = Self.append(driver, [LikeChange(userID: 2, postID: 1, liked: true)], slot: 0)
        driver.deliver(.flushAll(driver.reply("second")))
        // The check comes back: E1 is lost; E2 is not judged by it.
        driver.deliver(driver.model.perform(held[0])!)
        driver.run(rounds: 400)
        let replies = driver.replies.all
        #expect(replies.contains { $0.hasPrefix("first: failure") && $0.contains("lost") }, "\(replies)")
        #expect(replies.contains("second: success()"), "\(replies)")
        #expect(driver.model.applied[kept] == 1 && driver.model.applied[lostEntry] == nil)
    }

    @Test("a failed read of PostgreSQL's progress ends the flush as a failure: the next one comes after a back-off")
    func failedProgressReadBacksOff() throws {
        let driver = Driver()
        Self.claimAll(driver)
        Self.append(driver, [LikeChange(userID: 1, postID: 1, liked: true)], slot: 0)
        driver.model.logs[0] = []
        driver.deliver(.flushAll(driver.reply("flush")))
        let held = Self.run(driver, holding: Self.isProgressRead)
        try #require(held.count == 1)
        let retries = driver.machine.stats.flushRetries
        driver.deliver(.flushProgressRead(.failure(PostgresError(code: .connectionFailed, message: "model: down"))))
        #expect(driver.machine.stats.flushRetries == retries + 1)
        // Nothing is read again until the back-off has passed.
        driver.deliver(.tick)
        #expect(!driver.pending.contains { if case .readLogs = $0 { return true } else { return false } })
    }

    @Test("a hand-off whose entries Redis lost goes on: nothing of them is left to flush")
    func handOffOfALostLog() throws {
        let driver = Driver()
        Self.claimAll(driver)
        Self.append(driver, [LikeChange(userID: 1, postID: 3, liked: true)], slot: 2)
        driver.model.logs[2] = []
        driver.deliver(.release([2], driver.reply("release")))
        driver.run(rounds: 400)
        #expect(driver.replies.all.contains("release: success()"), "\(driver.replies.all)")
        #expect(driver.machine.slotState(2) == .handingOver(epoch: 10))
    }

    @Test("a failover heard while a slot was not served here: claimed later, it is repaired (its posts dropped from Redis) before it is served")
    func failoverBeforeTheClaim() throws {
        let driver = Driver()
        driver.deliver(.redisFailedOver([1]))
        var listed: [UInt16] = []
        driver.deliver(.claim(Dictionary(uniqueKeysWithValues: Driver.slots.map { ($0, Int64(10)) }), driver.reply("claim")))
        var servedBeforeListed = false
        for _ in 0..<400 {
            guard !driver.pending.isEmpty else {
                guard let deadline = driver.machine.nextDeadline else { break }
                driver.now = max(driver.now, deadline)
                driver.deliver(.tick)
                continue
            }
            let action = driver.pending.removeFirst()
            if case .listSlotPosts(let slots) = action {
                listed += slots
                if driver.machine.slotState(1) == .serving(epoch: 10) { servedBeforeListed = true }
            }
            if let event = driver.model.perform(action) { driver.deliver(event) }
        }
        #expect(listed == [1], "only the failed-over slot's posts are dropped")
        #expect(!servedBeforeListed)
        #expect(driver.machine.slotState(1) == .serving(epoch: 10))
        #expect(driver.replies.all.contains { $0.hasPrefix("claim: success(") && $0.contains("1") }, "\(driver.replies.all)")
        #expect(driver.machine.stats.failoverRepairs == 1)
    }

    @Test("a failover heard while a batch is in flight: the slot is repaired once the batch has ended, not while it runs")
    func failoverWaitsForTheBatch() throws {
        let driver = WholeShardModelTests.Driver(seed: 1)
        // The claim settles.
        var machine: ShardStateMachine { driver.current.machine }
        for _ in 0..<500 {
            if !driver.inFlight.isEmpty { driver.performOne(at: 0, trouble: .none) } else if !driver.deliveries.isEmpty {
                let delivery = driver.deliveries.removeFirst()
                driver.deliver(delivery.event, to: delivery.process)
            } else { break }
        }
        try #require(driver.slots.allSatisfy { machine.slotState($0).batchEpoch != nil }, "the claim settled")
        // A batch starts: its operations are read, its writes not yet made.
        var slot: UInt16?
        for _ in 0..<50 where slot == nil {
            driver.submit()
            for _ in 0..<20 where machine.batch == nil && !driver.inFlight.isEmpty { driver.performOne(at: 0, trouble: .none) }
            slot = machine.batch?.operations.first?.slot
        }
        let batchSlot = try #require(slot, "a batch is in flight")
        let epoch = try #require(machine.slotState(batchSlot).epoch)
        driver.deliver(.redisFailedOver([batchSlot]), to: driver.processes.count - 1)
        #expect(machine.slotState(batchSlot) == .serving(epoch: epoch), "not repaired under the batch's feet")
        // The batch ends; then the repair begins.
        for _ in 0..<200 where machine.batch != nil {
            if !driver.inFlight.isEmpty { driver.performOne(at: 0, trouble: .none) } else if !driver.deliveries.isEmpty {
                let delivery = driver.deliveries.removeFirst()
                driver.deliver(delivery.event, to: delivery.process)
            } else { break }
        }
        #expect(machine.batch == nil)
        #expect(machine.slotState(batchSlot) == .repairing(epoch: epoch))
    }
}
