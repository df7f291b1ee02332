import Foundation
import Persistence
import RedisDriver
import ShardRouter
import Testing

@testable import WritePath

/// A shard's flushes as steps (rescan → plan → read → apply → trim), with the batches that append
/// to its logs, driven against an in-memory Redis and PostgreSQL (`ShardWorld`), with something
/// meddling between every pair of steps: the slot handed to another node and dropped, the slot
/// taken without the shard being told (it learns by a refusal), the shard stopped with and
/// without its drain. Whatever happens, once the next owner (or the next start) has drained what
/// the logs still hold, every entry ever appended was applied exactly once, and none was trimmed
/// before it was applied.
@Suite("Shard flushes under interference (pure)")
struct ShardFlushModelTests {
    enum Interference: CaseIterable, CustomStringConvertible {
        case handOff, silentTakeOver, stopWithoutDrain, stopWithDrain

        var description: String {
            switch self {
            case .handOff: return "the slot handed off and dropped"
            case .silentTakeOver: return "the slot taken by another node unannounced"
            case .stopWithoutDrain: return "stop without drain"
            case .stopWithDrain: return "stop with drain"
            }
        }
    }

    /// A shard of four slots (0 to 3, one post each), PostgreSQL giving each epoch 10.
    static let slots: [UInt16] = [0, 1, 2, 3]
    static let postOfSlot: [UInt16: Int64] = Dictionary(uniqueKeysWithValues: slots.map { ($0, posts(inSlot: $0)[0]) })

    static func driver() -> ShardDriver {
        var configuration = WritePathConfiguration()
        configuration.flushBatchSize = 7
        configuration.flushInterval = .milliseconds(50)
        configuration.flushMaxAge = .milliseconds(100)
        configuration.keyPrefix = "model"
        let world = ShardWorld(
            layout: RedisKeyLayout(prefix: "model"),
            likes: Dictionary(uniqueKeysWithValues: postOfSlot.values.map { ($0, Set<Int64>()) }))
        for slot in slots { world.slotEpochs[slot] = 10 }
        return ShardDriver(world: world, slotRange: 0..<4, configuration: configuration)
    }

    static func claimAll(_ driver: ShardDriver) {
        driver.deliver(.claim(Dictionary(uniqueKeysWithValues: slots.map { ($0, Int64(10)) }), driver.reply("claim")))
    }

    /// One scenario: claim the slots (their logs hold entries from a previous owner), append
    /// entries in rounds of batches while flushes run, meddle at `step`, then drain the rest as
    /// the next owner would. Checks every entry was applied exactly once and none trimmed unapplied.
    func scenario(_ interference: Interference, at step: Int) throws {
        let driver = Self.driver()
        let world = driver.world
        // What a previous owner left in the logs.
        for slot in Self.slots {
            for user in 1...3 { world.appendLogEntry([LikeChange(userID: Int64(user), postID: Self.postOfSlot[slot]!, liked: true)], slot: slot) }
        }
        Self.claimAll(driver)
        let target: UInt16 = 2
        var meddled = false
        let meddle: (ShardDriver) -> Void = { driver in
            meddled = true
            switch interference {
            case .handOff:
                driver.world.anotherNodeTakes([target])
                driver.deliver(.drop([target], driver.reply("drop")))
            case .silentTakeOver:
                driver.world.anotherNodeTakes([target])
            case .stopWithoutDrain:
                driver.deliver(.stop(drain: false))
            case .stopWithDrain:
                driver.deliver(.stop(drain: true))
            }
        }
        driver.run(meddleAt: step, meddle, rounds: 200)
        // Rounds of batches on the slots still served, each followed by a flush of everything.
        for round in 0..<4 where !driver.machine.isFinished {
            let served = Self.slots.filter { driver.machine.slotState($0).batchEpoch != nil }
            let requests = served.flatMap { slot in
                (1...3).map { ShardDecider.Request(operation: .toggle, postID: Self.postOfSlot[slot]!, userID: Int64(10 + $0)) }
            }
            driver.submit(requests, label: "round \(round)")
            driver.run(meddleAt: meddled ? nil : step, meddle, rounds: 400)
            driver.deliver(.flushAll(driver.reply("flush \(round)")))
            driver.run(meddleAt: meddled ? nil : step, meddle, rounds: 400)
        }
        if !driver.machine.isFinished { driver.deliver(.stop(drain: true)) }
        driver.run(rounds: 2_000)
        #expect(driver.machine.isFinished, "\(interference) at step \(step): the shard ended")
        #expect(world.appended.count >= 12, "\(interference) at step \(step): the logs got their entries")

        // What is left is the next owner's (or the next start's) to drain.
        world.drainEverything()
        let notOnce = world.appended.filter { world.applied[$0.id] != 1 }
        #expect(
            notOnce.isEmpty, "\(interference) at step \(step): not applied exactly once \(notOnce.map { "\($0.id): \(world.applied[$0.id] ?? 0)" })")
        #expect(world.trimmed.isSubset(of: Set(world.applied.keys)), "\(interference) at step \(step): trimmed before it was applied")
        for post in world.posts.sorted() {
            #expect(world.likes[post] ?? [] == world.truth[post] ?? [], "\(interference) at step \(step): the rows of post \(post)")
        }
    }

    @Test(
        "forget, fence or stop between every pair of a shard's steps (batches and flushes): nothing lost, nothing applied twice",
        arguments: Interference.allCases)
    func interferenceAtEveryStep(_ interference: Interference) throws {
        // The steps of the claim's drain, and of the batches and flushes that follow: up to 60 I/O results.
        for step in 1...60 { try scenario(interference, at: step) }
    }

    @Test("without interference every flush caller is answered and the logs end empty")
    func undisturbed() throws {
        let driver = Self.driver()
        for slot in Self.slots { driver.world.appendLogEntry([LikeChange(userID: 1, postID: Self.postOfSlot[slot]!, liked: true)], slot: slot) }
        Self.claimAll(driver)
        driver.run(rounds: 200)
        driver.deliver(.flushAll(driver.reply("flush")))
        driver.run(rounds: 200)
        let replies = driver.replies.all
        #expect(replies.contains(where: { $0.hasPrefix("claim: success(Set([") }))
        #expect(replies.contains("flush: success()"))
        #expect(Self.slots.allSatisfy { driver.world.redis.streams[driver.world.logKey($0)]?.isEmpty ?? true })
        #expect(driver.world.applied.count == 4 && driver.world.applied.values.allSatisfy { $0 == 1 })
        for slot in Self.slots { #expect(driver.machine.slotState(slot) == .serving(epoch: 10)) }
    }
}
