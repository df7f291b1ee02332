import Foundation
import NodeTestSupport
import Persistence
import RedisDriver
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
        let post: Int64 = 42
        let slot = HashSlot(post: 42).rawValue
        index.logged(LikeChange(userID: 7, postID: post, liked: true), in: Self.id(100))
        index.logged(LikeChange(userID: 8, postID: post, liked: true), in: Self.id(100))
        index.logged(LikeChange(userID: 7, postID: post, liked: false), in: Self.id(105))
        index.logged(LikeChange(userID: 9, postID: post, liked: true, acknowledgedAt: 50), in: Self.id(106))
        #expect(index.count == 3)
        #expect(
            Set(index.of(post: post)) == [
                PendingLike(postID: post, userID: 7, liked: false, acknowledgedAt: 105),
                PendingLike(postID: post, userID: 8, liked: true, acknowledgedAt: 100),
                PendingLike(postID: post, userID: 9, liked: true, acknowledgedAt: 50),
            ])
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
        #expect(!index.isIndexed(slot: slot) && index.hasUnindexedSlots)
        index.applied(slot: slot, through: Self.id(299))
        #expect(!index.isIndexed(slot: slot))
        index.applied(slot: slot, through: Self.id(300))
        #expect(index.isIndexed(slot: slot) && !index.hasUnindexedSlots)
    }

    @Test("a change whose entry a flush applied before its batch finished is not indexed: it would linger until that slot's next flush")
    func loggedAfterItsFlush() {
        var index = PendingLikes()
        let slot = HashSlot(post: 42).rawValue
        index.applied(slot: slot, through: Self.id(105))
        index.logged(LikeChange(userID: 7, postID: 42, liked: false), in: Self.id(100))
        index.logged(LikeChange(userID: 8, postID: 42, liked: true), in: Self.id(105))
        #expect(index.count == 0 && index.of(post: 42).isEmpty, "PostgreSQL has both entries already")
        index.logged(LikeChange(userID: 9, postID: 42, liked: true), in: Self.id(106))
        index.logged(LikeChange(userID: 7, postID: 43, liked: true), in: Self.id(50))
        #expect(index.of(post: 42).map(\.userID) == [9], "a newer entry waits")
        #expect(index.of(post: 43).map(\.userID) == [7], "another slot's entries are judged by its own flushes")
        index.forget(slot: slot)
        index.logged(LikeChange(userID: 7, postID: 42, liked: true), in: Self.id(100))
        #expect(index.of(post: 42).map(\.userID) == [7], "a slot won again starts with no flush known")
    }

    @Test(
        "after a restart (a sole writer's logs from before it) and after a write whose outcome is unknown, the pending view flushes first: nothing acknowledged is missed"
    )
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
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        _ = try await restarted.service.perform(.unlike, post: post, user: 4)
        let after = Int64(Date().timeIntervalSince1970 * 1000)
        let waiting4 = try await restarted.service.pendingLikes(ofPost: post)
        #expect(waiting4.map(\.userID) == [4] && waiting4.allSatisfy { !$0.liked })
        #expect(
            (before - 5...after + 5).contains(waiting4[0].acknowledgedAt),
            "the unlike's time is when it was answered: \(waiting4[0].acknowledgedAt) in \(before)…\(after)")
        let ofUser = try await restarted.service.pendingLikes(ofUser: 4)
        #expect(ofUser.changes == waiting4 && ofUser.servedSlots.firstMissing == nil, "a sole writer answers for every slot")
        await restarted.stop()
    }

    @Test("a log Redis lost (a failover, a restart without its data): once a flush reads it empty, what the index kept of it is gone too")
    func logLostWithRedis() async throws {
        let harness = try await WritePathHarness.start(posts: 1) { $0.flushOnlyWhenAsked() }
        let post = harness.posts[0]
        for user in Int64(1)...5 { _ = try await harness.service.perform(.like, post: post, user: user) }
        _ = try await harness.service.perform(.unlike, post: post, user: 2)
        #expect(try await harness.service.pendingLikes(ofPost: post).count == 5)
        let slot = HashSlot(post: post)
        _ = try await harness.redis.send(RedisCommand("DEL", harness.layout.changeLog(of: slot)), slot: slot)
        // A flush waiting for the lost entries hears they are lost (PostgreSQL's progress has
        // none of them), not that they were applied.
        do {
            try await harness.service.flush()
            Issue.record("the flush should say the changes it waited for are lost")
        } catch let error as CounterError {
            #expect(error.message.contains("lost"), "\(error)")
        }
        try await harness.service.flush()
        #expect(await harness.service.stats().reduce(0) { $0 + $1.failoverLostChanges } == 5, "the five pairs' changes are counted lost")
        #expect(try await harness.postgresMembers().isEmpty, "nothing of the lost log reached PostgreSQL")
        #expect(try await harness.service.pendingLikes(ofPost: post).isEmpty, "the lost changes are no longer laid over PostgreSQL's rows")
        #expect(try await harness.service.pendingLikes(ofUser: 2).changes.isEmpty)
        _ = try await harness.service.perform(.like, post: post, user: 9)
        #expect(try await harness.service.pendingLikes(ofPost: post).map(\.userID) == [9], "what is written after is indexed again")
        await harness.stop()
    }
}

@Suite("What a Redis failover lost, as the lists' index tells it (pure)")
struct PendingLikesFailoverTests {
    @Test("changes indexed under entries the log no longer holds, and not applied, are lost: they leave the index and are returned")
    func dropMissing() {
        var index = PendingLikes()
        let slot = HashSlot(post: 42).rawValue
        let id = { (ms: UInt64) in StreamEntryID(milliseconds: ms, sequence: 0) }
        index.logged(LikeChange(userID: 1, postID: 42, liked: true), in: id(100))
        index.logged(LikeChange(userID: 2, postID: 42, liked: true), in: id(101))
        index.logged(LikeChange(userID: 3, postID: 42, liked: false), in: id(102))
        index.logged(LikeChange(userID: 4, postID: 42, liked: true), in: id(103))
        index.logged(LikeChange(userID: 1, postID: 43, liked: true), in: id(104))
        index.applied(slot: slot, through: id(100))
        // The replica had entry 101 only; 102 and 103 died with the master.
        let lost = index.dropMissing(slot: slot, present: [id(101)])
        #expect(Set(lost.map(\.userID)) == [3, 4] && lost.allSatisfy { $0.postID == 42 })
        #expect(index.of(post: 42).map(\.userID) == [2], "what survived still waits")
        #expect(index.of(post: 43).map(\.userID) == [1], "another slot's changes are untouched")
        #expect(index.dropMissing(slot: slot, present: [id(101)]).isEmpty, "found once")
        index.applied(slot: slot, through: id(101))
        #expect(index.of(post: 42).isEmpty)
    }
}
