import Persistence
import RedisDriver
import ShardRouter
import Synchronization
import Testing

@testable import WritePath

/// `--ack replicated` on the shard's machine alone (a model Redis and PostgreSQL, `ShardWorld`):
/// the `WAIT` after a batch's writes is asked on the opening of the connection that carried them.
@Suite("Replicated acknowledgement asks on the connection that wrote (pure)")
struct ReplicatedAcknowledgementTests {
    static func shard(post: Int64) -> ShardDriver {
        var configuration = WritePathConfiguration()
        configuration.keyPrefix = "model"
        configuration.flushOnlyWhenAsked()
        configuration.hotIdle = nil
        configuration.acknowledgement = .replicated
        let world = ShardWorld(layout: RedisKeyLayout(prefix: "model"), likes: [post: []])
        let shell = ShardDriver(world: world, slotRange: 0..<HashSlot.count, configuration: configuration)
        shell.deliver(.claim(world.takeOver([HashSlot(post: post).rawValue]), shell.reply("claim")))
        shell.settle()
        return shell
    }

    /// A like of `post` by `user`, performed up to its `WAIT`, which is held; `between` runs
    /// before the `WAIT` is performed. Returns the answer.
    static func like(_ shell: ShardDriver, post: Int64, user: Int64, between: () -> Void) throws -> Result<LikeState, Error>? {
        let answer = Mutex<Result<LikeState, Error>?>(nil)
        shell.deliver(
            .operations([
                ShardOperation(ShardDecider.Request(operation: .like, postID: post, userID: user)) { result in answer.withLock { $0 = result } }
            ]))
        let held = shell.run(holding: { if case .awaitReplication = $0 { return true } else { return false } })
        try #require(held.count == 1, "the batch asks for one WAIT after its writes")
        guard case .awaitReplication(_, _, _, let writtenOn) = held[0] else { return nil }
        #expect(writtenOn.opening(of: ShardWorld.redisEndpoint) != nil, "the WAIT names the opening that carried the writes")
        between()
        shell.perform(held[0])
        try #require(shell.settle(), "the shard did not settle")
        return answer.withLock { $0 }
    }

    @Test(
        "a batch's writes are confirmed on the opening that carried them; once that connection was reopened before the WAIT, they are answered not_replicated, not acknowledged"
    )
    func waitOnTheWritingOpening() throws {
        let post: Int64 = 42
        let shell = Self.shard(post: post)
        let confirmed = try Self.like(shell, post: post, user: 1) {}
        #expect(try confirmed?.get().likesCount == 1)
        // The connection breaks and is opened again between the writes and the WAIT (another
        // call on it met the break): the WAIT on the new opening would count none of them.
        let reopened = try Self.like(shell, post: post, user: 2) { shell.world.batchConnectionOpening += 1 }
        guard case .failure(let error)? = reopened else {
            Issue.record("a write confirmed by a WAIT on a connection that never carried it: \(String(describing: reopened))")
            return
        }
        #expect((error as? CounterError)?.code == .notReplicated, "\(error)")
    }
}
