import NodeTestSupport
import Persistence
import ShardRouter
import Synchronization
import Testing

@testable import WritePath

/// The backlog's age limit at its edge, on the shard's machine alone with a clock the test moves
/// (a model Redis and PostgreSQL, `ShardWorld`): writes are refused from the moment the oldest
/// change has waited the limit, not a moment before, whatever the machine's speed.
/// `WritePathFailureTests.backlogAgeLimit` shows the same against the real servers.
@Suite("The backlog's age limit on writes (pure, with a clock the test moves)")
struct BacklogAgeTests {
    /// One shard serving every slot, with nothing flushed until asked; actions are performed at
    /// once, in order, at the time the test has set (`ShardDriver.settle`).
    static func shard(posts: [Int64], backlogMaximumAge: Duration) -> ShardDriver {
        var configuration = WritePathConfiguration()
        configuration.keyPrefix = "model"
        configuration.flushOnlyWhenAsked()
        configuration.hotIdle = nil
        configuration.backlogMaximumAge = backlogMaximumAge
        let world = ShardWorld(layout: RedisKeyLayout(prefix: "model"), likes: Dictionary(uniqueKeysWithValues: posts.map { ($0, []) }))
        let shell = ShardDriver(world: world, slotRange: 0..<HashSlot.count, configuration: configuration)
        let slots = Array(Set(posts.map { HashSlot(post: $0).rawValue })).sorted()
        shell.deliver(.claim(world.takeOver(slots), shell.reply("claim")))
        shell.settle()
        return shell
    }

    @Test(
        "writes are accepted while the oldest change has waited less than the limit, however many wait, and refused (backlog_full, saying how long) from the limit on; reads go on; a flush lets writes in again; each turn is logged once"
    )
    func writesRefusedFromTheLimitOn() throws {
        let post: Int64 = 42
        let shell = Self.shard(posts: [post], backlogMaximumAge: .seconds(3))
        let start = shell.now
        #expect(try shell.perform(.like, post: post, user: 1).get().likesCount == 1)
        // Younger than the limit: accepted, and another change waits beside the first.
        shell.now = start + .milliseconds(2_999)
        #expect(try shell.perform(.like, post: post, user: 2).get().likesCount == 2)
        #expect(shell.logged.filter { $0 == "writes_refused" }.isEmpty)

        // The first change has waited 3 s: writes are refused, reads answered.
        shell.now = start + .seconds(3)
        guard case .failure(let refused) = try shell.perform(.like, post: post, user: 3) else {
            Issue.record("a write accepted with the oldest change 3 s old")
            return
        }
        #expect(refused.code == .backlogFull)
        #expect(refused.retryAfterSeconds == 1)
        #expect(refused.message.contains("has waited 3 s"), "\(refused.message)")
        #expect(try shell.perform(.read, post: post, user: 3).get() == LikeState(postID: post, userID: 3, isLiked: false, likesCount: 2))
        shell.now = start + .seconds(60)
        guard case .failure = try shell.perform(.toggle, post: post, user: 4) else {
            Issue.record("a write accepted with the oldest change 60 s old")
            return
        }
        #expect(shell.logged.filter { $0 == "writes_refused" }.count == 1, "\(shell.logged)")

        // Flushed: nothing waits, writes are accepted again.
        shell.deliver(.flushAll(shell.reply("flush")))
        try #require(shell.settle(), "the shard did not settle")
        #expect(shell.replies.all.contains("flush: success()"), "\(shell.replies.all)")
        #expect(try shell.perform(.like, post: post, user: 3).get().likesCount == 3)
        #expect(shell.logged.filter { $0 == "writes_accepted" }.count == 1, "\(shell.logged)")
        #expect(shell.world.likes[post] == [1, 2])
    }
}

extension ShardDriver {
    /// `operation` on `post` by `user`, decided and answered now.
    func perform(_ operation: LikeOperation, post: Int64, user: Int64) throws -> Result<LikeState, CounterError> {
        let answer = Mutex<Result<LikeState, CounterError>?>(nil)
        let request = ShardDecider.Request(operation: operation, postID: post, userID: user)
        deliver(
            .operations([
                ShardOperation(request) { result in
                    answer.withLock { $0 = result.mapError { $0 as? CounterError ?? CounterError(code: .unavailable, message: "\($0)") } }
                }
            ]))
        try #require(settle(), "the shard did not settle")
        return try #require(answer.withLock { $0 }, "\(operation) of post \(post) by \(user) was not answered")
    }
}
