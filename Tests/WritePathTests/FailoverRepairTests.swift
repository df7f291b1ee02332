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
    typealias Flushes = ShardFlushModelTests

    static func isProgressRead(_ action: ShardStateMachine.Action) -> Bool {
        if case .readFlushProgress = action { return true }
        return false
    }

    static func claimAll(_ driver: ShardDriver) {
        Flushes.claimAll(driver)
        driver.run(rounds: 200)
    }

    /// Appends a change of user `user` (a like) to the post of `slot` as a batch does — the
    /// world's log and the shard's books — holding back what `hold` picks; returns the entry.
    @discardableResult
    static func append(
        _ driver: ShardDriver, user: Int64, slot: UInt16,
        holding hold: (ShardStateMachine.Action) -> Bool = { _ in false }
    ) throws -> (StreamEntryID, held: [ShardStateMachine.Action]) {
        let before = driver.world.newestEntry(slot)
        driver.submit([ShardDecider.Request(operation: .like, postID: Flushes.postOfSlot[slot]!, userID: user)], label: "like \(user)")
        let held = driver.run(holding: { action in
            // The batch's own I/O runs; a flush it made due waits (the test flushes on its own).
            if case .rescanLogs = action { return true }
            if case .readLogs = action { return true }
            return hold(action)
        })
        let entry = try #require(driver.world.newestEntry(slot), "the like was logged")
        try #require(entry != before, "the like was logged")
        driver.pending.insert(contentsOf: held.filter { !hold($0) }, at: 0)
        return (entry, held.filter(hold))
    }

    @Test(
        "a log read empty is judged by PostgreSQL's progress only up to what was noted when it was read; the flush ends with that answer, not before")
    func entriesAppendedDuringTheCheckAreNotLost() throws {
        let driver = Flushes.driver()
        Self.claimAll(driver)
        // E1 is noted, then Redis loses it (a restart without its data).
        let (lostEntry, _) = try Self.append(driver, user: 1, slot: 0)
        driver.world.loseLog(0)
        driver.deliver(.flushAll(driver.reply("first")))
        let held = driver.run(holding: Self.isProgressRead)
        try #require(held.count == 1, "the empty log's progress is read")
        // While that read is out, the flush run waits for it: as time passes and its timers
        // fire (even early), no other read starts.
        for _ in 0..<5 {
            driver.advance(by: .milliseconds(200))
            driver.deliver(.timerFired(.flush))
        }
        #expect(!driver.pending.contains { if case .readLogs = $0 { return true } else { return false } }, "no log read while the check is out")
        // E2 is appended meanwhile, and a caller waits for it.
        let (kept, _) = try Self.append(driver, user: 2, slot: 0)
        driver.deliver(.flushAll(driver.reply("second")))
        // The check comes back: E1 is lost; E2 is not judged by it.
        driver.perform(held[0])
        driver.run(rounds: 400)
        let replies = driver.replies.all
        #expect(replies.contains { $0.hasPrefix("first: failure") && $0.contains("lost") }, "\(replies)")
        #expect(replies.contains("second: success()"), "\(replies)")
        #expect(driver.world.applied[kept] == 1 && driver.world.applied[lostEntry] == nil)
    }

    @Test("a flush that reads past an entry Redis lost (newer entries written since) reports it lost: its waiter is told so, not that it was applied")
    func entryLostBeneathNewerOnes() throws {
        let driver = Flushes.driver()
        Self.claimAll(driver)
        // E1 is noted and a caller waits for it; the flush it starts reads the log later.
        let (lostEntry, _) = try Self.append(driver, user: 1, slot: 0)
        driver.deliver(.flushAll(driver.reply("first")))
        let held = driver.run(holding: { if case .readLogs = $0 { return true } else { return false } })
        try #require(held.count == 1, "the flush's read waits")
        // Redis loses E1 (a failover), and a newer entry E2 lands in the same log before the read.
        driver.world.loseLog(0)
        let (newer, _) = try Self.append(driver, user: 2, slot: 0)
        try #require(newer > lostEntry)
        driver.perform(held[0])
        driver.deliver(.flushAll(driver.reply("second")))
        driver.run(rounds: 400)
        let replies = driver.replies.all
        #expect(replies.contains { $0.hasPrefix("first: failure") && $0.contains("lost") }, "\(replies)")
        #expect(replies.contains("second: success()"), "\(replies)")
        #expect(driver.world.applied[newer] == 1 && driver.world.applied[lostEntry] == nil)
        #expect(driver.machine.currentStats(now: driver.now).failoverLostChanges == 1)
    }

    @Test("a failed read of PostgreSQL's progress ends the flush as a failure: the next one comes after a back-off")
    func failedProgressReadBacksOff() throws {
        let driver = Flushes.driver()
        Self.claimAll(driver)
        try Self.append(driver, user: 1, slot: 0)
        driver.world.loseLog(0)
        driver.deliver(.flushAll(driver.reply("flush")))
        let held = driver.run(holding: Self.isProgressRead)
        try #require(held.count == 1)
        let retries = driver.machine.currentStats(now: driver.now).flushRetries
        driver.deliver(.flushProgressRead(.failure(PostgresError(code: .connectionFailed, message: "model: down"))))
        #expect(driver.machine.currentStats(now: driver.now).flushRetries == retries + 1)
        // Nothing is read again until the back-off has passed, even when a timer fires early.
        driver.deliver(.timerFired(.flush))
        #expect(!driver.pending.contains { if case .readLogs = $0 { return true } else { return false } })
        let backOff = try #require(driver.timers.deadlines[.flush], "the flush loop sleeps until the back-off has passed")
        #expect(backOff > driver.now)
    }

    @Test("a hand-off whose entries Redis lost goes on: nothing of them is left to flush")
    func handOffOfALostLog() throws {
        let driver = Flushes.driver()
        Self.claimAll(driver)
        try Self.append(driver, user: 1, slot: 2)
        driver.world.loseLog(2)
        driver.deliver(.release([2], driver.reply("release")))
        driver.run(rounds: 400)
        #expect(driver.replies.all.contains("release: success()"), "\(driver.replies.all)")
        #expect(driver.machine.slotState(2) == .handingOver(epoch: 10))
    }

    @Test("a failover heard while a slot was not served here: claimed later, it is repaired (its posts dropped from Redis) before it is served")
    func failoverBeforeTheClaim() throws {
        let driver = Flushes.driver()
        driver.deliver(.redisFailedOver([1]))
        var listed: [UInt16] = []
        Flushes.claimAll(driver)
        var servedBeforeListed = false
        for _ in 0..<400 {
            guard !driver.pending.isEmpty else {
                guard driver.fireNextTimer() else { break }
                continue
            }
            let action = driver.pending.removeFirst()
            if case .listSlotPosts(let slots) = action {
                listed += slots
                if driver.machine.slotState(1) == .serving(epoch: 10) { servedBeforeListed = true }
            }
            driver.perform(action)
        }
        #expect(listed == [1], "only the failed-over slot's posts are dropped")
        #expect(!servedBeforeListed)
        #expect(driver.machine.slotState(1) == .serving(epoch: 10))
        #expect(driver.replies.all.contains { $0.hasPrefix("claim: success(") && $0.contains("1") }, "\(driver.replies.all)")
        #expect(driver.machine.currentStats(now: driver.now).failoverRepairs == 1)
    }

    @Test("a failover heard while a batch is in flight: the slot is repaired once the batch has ended, not while it runs")
    func failoverWaitsForTheBatch() throws {
        let driver = WholeShardModelTests.Driver(seed: 1)
        // The claim settles.
        var machine: ShardStateMachine { driver.current.machine }
        for _ in 0..<500 {
            if !driver.inFlight.isEmpty {
                driver.performOne(at: 0, trouble: .none)
            } else if !driver.deliveries.isEmpty {
                let delivery = driver.deliveries.removeFirst()
                driver.deliver(delivery.event, to: delivery.process)
            } else {
                break
            }
        }
        try #require(driver.slots.allSatisfy { machine.slotState($0).batchEpoch != nil }, "the claim settled")
        // A batch starts: its operations are read, its writes not yet made.
        var slot: UInt16?
        func batchSlot() -> UInt16? {
            guard machine.lane.isBatchInFlight else { return nil }
            return driver.inFlight.lazy.compactMap { flight -> UInt16? in
                if case .batchRedis(let groups, _) = flight.action { return groups.first?.slot.rawValue }
                return nil
            }.first
        }
        for _ in 0..<50 where slot == nil {
            driver.submit()
            for _ in 0..<20 where !machine.lane.isBatchInFlight && !driver.inFlight.isEmpty { driver.performOne(at: 0, trouble: .none) }
            slot = batchSlot()
        }
        let batchSlot = try #require(slot, "a batch is in flight")
        let epoch = try #require(machine.slotState(batchSlot).epoch)
        driver.deliver(.redisFailedOver([batchSlot]), to: driver.processes.count - 1)
        #expect(machine.slotState(batchSlot) == .serving(epoch: epoch), "not repaired under the batch's feet")
        // The batch ends; then the repair begins.
        for _ in 0..<200 where machine.lane.isBatchInFlight {
            if !driver.inFlight.isEmpty {
                driver.performOne(at: 0, trouble: .none)
            } else if !driver.deliveries.isEmpty {
                let delivery = driver.deliveries.removeFirst()
                driver.deliver(delivery.event, to: delivery.process)
            } else {
                break
            }
        }
        #expect(!machine.lane.isBatchInFlight)
        #expect(machine.slotState(batchSlot) == .repairing(epoch: epoch))
    }
}
