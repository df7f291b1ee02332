import NodeTestSupport
import Persistence
import ShardRouter
import TestSupport
import Testing
@testable import WritePath

@Suite("The index of changes waiting for PostgreSQL, which the lists lay over its rows")
struct PendingLikesTests {
    static func id(_ milliseconds: UInt64, _ sequence: UInt64 = 0) -> StreamEntryID {
        StreamEntryID(milliseconds: milliseconds, sequence: sequence)
    }

    @Test("a pair's newest change is kept until its entry is applied; an older entry's flush leaves it")
    func newestUntilApplied() {
        var index = PendingLikes()
        let post: Int64 = 42, slot = HashSlot(post: 42).rawValue
        index.logged(LikeChange(userID: 7, postID: post, liked: true), in: Self.id(100))
        index.logged(LikeChange(userID: 8, postID: post, liked: true), in: Self.id(100))
        index.logged(LikeChange(userID: 7, postID: post, liked: false), in: Self.id(105))
        index.logged(LikeChange(userID: 9, postID: post, liked: true, acknowledgedAt: 50), in: Self.id(106))
        #expect(index.count == 3)
        #expect(Set(index.of(post: post)) == [PendingLike(postID: post, userID: 7, liked: false, acknowledgedAt: 105),
                                              PendingLike(postID: post, userID: 8, liked: true, acknowledgedAt: 100),
                                              PendingLike(postID: post, userID: 9, liked: true, acknowledgedAt: 50)])
        #expect(index.of(user: 7) == [PendingLike(postID: post, userID: 7, liked: false, acknowledgedAt: 105)])
        index.applied(slot: slot, through: Self.id(100))
        #expect(Set(index.of(post: post).map(\.userID)) == [7, 9], "7's newer change waits still")
        index.applied(slot: HashSlot(post: 43).rawValue, through: Self.id(200))
        #expect(index.count == 2, "another slot's flush leaves this one's")
        index.applied(slot: slot, through: Self.id(106))
        #expect(index.count == 0 && index.of(post: post).isEmpty && index.of(user: 7).isEmpty)
    }

    @Test("a slot forgotten drops its changes; a slot read again is unindexed until the flusher applies what it held")
    func forgetAndUnindexed() {
        var index = PendingLikes()
        let slot = HashSlot(post: 42).rawValue
        index.logged(LikeChange(userID: 7, postID: 42, liked: true), in: Self.id(100))
        index.logged(LikeChange(userID: 7, postID: 43, liked: true), in: Self.id(100))
        index.forget(slot: slot)
        #expect(index.of(post: 42).isEmpty && index.of(user: 7).map(\.postID) == [43])
        index.unindexed(slot: slot, through: Self.id(300))
        #expect(!index.isIndexed(slot: slot) && index.unindexedSlots == [slot])
        index.applied(slot: slot, through: Self.id(299))
        #expect(!index.isIndexed(slot: slot))
        index.applied(slot: slot, through: Self.id(300))
        #expect(index.isIndexed(slot: slot))
    }

    @Test("after a restart (a sole writer's logs from before it) and after a write whose outcome is unknown, the pending view flushes first: nothing acknowledged is missed")
    func restartAndUncertain() async throws {
        let harness = try await WritePathHarness.start(posts: 2) { $0.flushOnlyWhenAsked() }
        let post = harness.posts[0]
        for user in Int64(1)...20 { _ = try await harness.service.perform(.like, post: post, user: user) }
        let waiting = try await harness.service.pendingLikes(ofPost: post)
        #expect(Set(waiting.map(\.userID)) == Set(1...20) && waiting.allSatisfy(\.liked))
        await harness.stopService(drain: false)
        #expect(try await harness.postgresMembers().isEmpty, "nothing reached PostgreSQL before the stop")

        let restarted = try await harness.restarted()
        // The restarted shards never saw those entries: the view has them in PostgreSQL first.
        #expect(try await restarted.service.pendingLikes(ofPost: post).isEmpty)
        #expect(try await restarted.postgresMembers().count == 20)
        let rows = try await restarted.pool.query("SELECT count(*) FROM likes WHERE post_id = $1 AND created_at IS NOT NULL", [.int64(post)])
        #expect(try rows.first!.int64(0) == 20)

        _ = try await restarted.service.perform(.unlike, post: post, user: 3)
        await restarted.service.noteUncertain([HashSlot(post: post).rawValue])
        #expect(try await restarted.service.pendingLikes(ofPost: post).isEmpty, "the uncertain log was read and flushed")
        #expect(try await restarted.postgresMembers().count == 19)
        _ = try await restarted.service.perform(.unlike, post: post, user: 4)
        #expect(try await restarted.service.pendingLikes(ofPost: post) == [PendingLike(postID: post, userID: 4, liked: false,
                                                                                       acknowledgedAt: try await restarted.service.pendingLikes(ofUser: 4)[0].acknowledgedAt)])
        await restarted.stop()
    }
}
