import Foundation
import Persistence
import RedisDriver
import ShardRouter
import Synchronization
import Testing
@testable import WritePath

/// A shard's flushes as steps (rescan → plan → read → apply → trim), driven against an in-memory
/// Redis and PostgreSQL (`ShardModel`), with something meddling between every pair of steps: the
/// slot handed to another node and dropped, the slot taken without the shard being told (it
/// learns by a refusal), the shard stopped with and without its drain. Whatever happens, once
/// the next owner (or the next start) has drained what the logs still hold, every entry ever
/// appended was applied exactly once, and none was trimmed before it was applied.
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

    /// Drives one shard of four slots (served under epoch 10) through a drain and flushes of
    /// entries appended between them, and meddles before the result of I/O step `step`.
    final class Driver {
        static let slots: [UInt16] = [0, 1, 2, 3]
        let model: ShardModel
        var machine: ShardStateMachine
        var now = ContinuousClock.now
        var pending: [ShardStateMachine.Action] = []
        /// I/O results delivered so far.
        var steps = 0
        let replies = Replies()

        init() {
            var configuration = WritePathConfiguration()
            configuration.flushBatchSize = 7
            configuration.flushInterval = .milliseconds(50)
            configuration.flushMaxAge = .milliseconds(100)
            configuration.keyPrefix = "model"
            model = ShardModel(layout: RedisKeyLayout(prefix: "model"))
            machine = ShardStateMachine(index: 0, slotRange: 0..<4, configuration: configuration, isFenced: true, now: now)
            for slot in Self.slots { model.slotEpochs[slot] = 10 }
        }

        func deliver(_ event: ShardStateMachine.Event) {
            var actions: [ShardStateMachine.Action] = []
            machine.handle(event, now: now, into: &actions)
            pending += actions
        }

        /// Runs pending actions (FIFO) until nothing is left, ticking time on when only a
        /// deadline remains; before delivering I/O result number `meddleAt`, calls `meddle`.
        func run(meddleAt: Int? = nil, _ meddle: (Driver) -> Void = { _ in }, rounds: Int = 2_000) {
            for _ in 0..<rounds {
                if pending.isEmpty {
                    guard let deadline = machine.nextDeadline, !machine.isFinished else { return }
                    now = max(now, deadline)
                    deliver(.tick)
                    continue
                }
                let action = pending.removeFirst()
                guard let event = model.perform(action) else { continue }
                steps += 1
                if steps == meddleAt { meddle(self) }
                deliver(event)
            }
        }

        func reply<Value: Sendable>(_ label: String) -> ShardReply<Value> {
            let replies = self.replies
            return ShardReply { value in replies.add("\(label): \(value)") }
        }
    }

    /// One scenario: claim the slots (their logs hold entries from a previous owner), append
    /// entries in rounds while flushes run, meddle at `step`, then drain the rest as the next
    /// owner would. Checks every entry was applied exactly once and none trimmed unapplied.
    func scenario(_ interference: Interference, at step: Int) throws {
        let driver = Driver()
        let model = driver.model
        // What a previous owner left in the logs.
        for slot in Driver.slots {
            for user in 1...3 { model.append([LikeChange(userID: Int64(user), postID: Int64(slot) * 100 + 1, liked: true)], slot: slot) }
        }
        driver.deliver(.claim(Dictionary(uniqueKeysWithValues: Driver.slots.map { ($0, Int64(10)) }), driver.reply("claim")))
        let target: UInt16 = 2
        var meddled = false
        let meddle: (Driver) -> Void = { driver in
            meddled = true
            switch interference {
            case .handOff:
                driver.model.takeOver(target, epoch: 20)
                driver.deliver(.drop([target], driver.reply("drop")))
            case .silentTakeOver:
                driver.model.takeOver(target, epoch: 20)
            case .stopWithoutDrain:
                driver.deliver(.stop(drain: false))
            case .stopWithDrain:
                driver.deliver(.stop(drain: true))
            }
        }
        driver.run(meddleAt: step, meddle, rounds: 200)
        // Rounds of new entries while the shard runs (as batches append them), with flushes.
        for round in 0..<4 where !driver.machine.isFinished {
            var appended: [UInt16: (count: Int, newest: StreamEntryID)] = [:]
            for slot in Driver.slots where driver.machine.slotState(slot).batchEpoch != nil {
                let changes = (1...3).map { LikeChange(userID: Int64(10 + round * 3 + $0), postID: Int64(slot) * 100 + 1, liked: round % 2 == 0) }
                appended[slot] = (changes.count, model.append(changes, slot: slot))
            }
            // Told as a finished batch tells it: through the scheduler's books.
            let signal = driver.machine.scheduler.appended(appended, now: driver.now)
            driver.machine.wake(signal)
            driver.deliver(.flushAll(driver.reply("flush \(round)")))
            driver.run(meddleAt: meddled ? nil : step, meddle, rounds: 400)
        }
        if !driver.machine.isFinished { driver.deliver(.stop(drain: true)) }
        driver.run(rounds: 2_000)
        #expect(driver.machine.isFinished, "\(interference) at step \(step): the shard ended")

        // What is left is the next owner's (or the next start's) to drain.
        model.drainEverything()
        let twice = model.applied.filter { $0.value > 1 }
        #expect(twice.isEmpty, "\(interference) at step \(step): applied twice \(twice.keys.sorted())")
        let lost = model.appended.filter { (model.applied[$0] ?? 0) == 0 }
        #expect(lost.isEmpty, "\(interference) at step \(step): never applied \(lost)")
        #expect(model.trimmed.isSubset(of: Set(model.applied.keys)), "\(interference) at step \(step): trimmed before it was applied")
    }

    @Test("forget, fence or stop between every pair of a flush's steps: nothing lost, nothing applied twice",
          arguments: Interference.allCases)
    func interferenceAtEveryStep(_ interference: Interference) throws {
        // The steps of the claim's drain and of the flushes that follow: up to 40 I/O results.
        for step in 1...40 { try scenario(interference, at: step) }
    }

    @Test("without interference every flush caller is answered and the logs end empty")
    func undisturbed() throws {
        let driver = Driver()
        for slot in Driver.slots { driver.model.append([LikeChange(userID: 1, postID: Int64(slot) + 1, liked: true)], slot: slot) }
        driver.deliver(.claim(Dictionary(uniqueKeysWithValues: Driver.slots.map { ($0, Int64(10)) }), driver.reply("claim")))
        driver.run(rounds: 200)
        driver.deliver(.flushAll(driver.reply("flush")))
        driver.run(rounds: 200)
        let replies = driver.replies.all
        #expect(replies.contains(where: { $0.hasPrefix("claim: success(Set([") }))
        #expect(replies.contains("flush: success()"))
        #expect(driver.model.logs.values.allSatisfy { $0.isEmpty })
        #expect(driver.model.applied.count == 4 && driver.model.applied.values.allSatisfy { $0 == 1 })
        for slot in Driver.slots { #expect(driver.machine.slotState(slot) == .serving(epoch: 10)) }
    }
}

/// What the callers of a driven shard were told.
final class Replies: Sendable {
    private let list = Mutex<[String]>([])
    func add(_ reply: String) { list.withLock { $0.append(reply) } }
    var all: [String] { list.withLock { $0 } }
}
