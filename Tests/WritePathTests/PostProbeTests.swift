import Foundation
import Persistence
import RedisDriver
import ShardRouter
import Testing

@testable import WritePath

/// An operator's probe of posts (inspect, reconcile) on the shard's machine alone: it runs
/// between two batches and holds the lane while it reads, so no write of the shard lands between
/// its reads of Redis and PostgreSQL; and it is told which slots had changes waiting as it began.
@Suite("Operators' probes between batches (pure)")
struct PostProbeTests {
    static func isProbe(_ action: ShardStateMachine.Action) -> Bool {
        if case .probePosts = action { return true }
        return false
    }

    static func isBatch(_ action: ShardStateMachine.Action) -> Bool {
        if case .batchRedis = action { return true }
        return false
    }

    @Test("a probe waits for the batch in flight, then holds the lane: operations that arrive meanwhile are decided only after its answer")
    func probeHoldsTheLane() throws {
        let driver = ShardFlushModelTests.driver()
        FailoverRepairTests.claimAll(driver)
        let post = ShardFlushModelTests.postOfSlot[0]!
        let quiet = ShardFlushModelTests.postOfSlot[1]!
        // A batch is in flight (its read asked): the probe queues behind it.
        driver.submit([ShardDecider.Request(operation: .like, postID: post, userID: 1)], label: "first")
        try #require(driver.pending.contains(where: Self.isBatch))
        let answers = Replies()
        driver.deliver(.probe(.counts([post, quiet]), ShardReply { answers.add("probe: \($0)") }))
        #expect(!driver.pending.contains(where: Self.isProbe), "the probe waits for the batch in flight")
        // The batch ends (its entry is logged, nothing flushed yet): the probe starts.
        let held = driver.run(holding: Self.isProbe)
        let probe = try #require(held.first, "the probe starts once the batch has ended")
        guard case .probePosts(_, let pending) = probe else { return }
        #expect(pending == [0], "slot 0 has the batch's change waiting; slot 1 has nothing")
        // While it reads, new operations wait.
        driver.submit([ShardDecider.Request(operation: .like, postID: post, userID: 2)], label: "second")
        #expect(!driver.pending.contains(where: Self.isBatch), "no batch while the probe reads")
        driver.deliver(.postsProbed(.success(.counts([]))))
        #expect(answers.all == ["probe: success(WritePath.PostProbeResult.counts([]))"], "\(answers.all)")
        #expect(driver.pending.contains(where: Self.isBatch), "the next batch starts once the probe has answered")
    }

    @Test("a probe asked after the shard stopped is answered at once, as stopped")
    func probeAfterTheEnd() throws {
        let driver = ShardFlushModelTests.driver()
        FailoverRepairTests.claimAll(driver)
        driver.deliver(.stop(drain: true))
        driver.run()
        try #require(driver.machine.isFinished)
        let answers = Replies()
        driver.deliver(.probe(.likers(1), ShardReply { answers.add("\($0)") }))
        #expect(answers.all.count == 1 && answers.all[0].hasPrefix("failure"), "\(answers.all)")
    }
}
