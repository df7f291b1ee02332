import NodeTestSupport
import Persistence
import RedisDriver
import ShardRouter
import TestSupport
import Testing

@testable import WritePath

@Suite("Write path against real Redis and PostgreSQL")
struct WritePathTests {
    @Test(
        "1,000 concurrent likes then 500 unlikes on one post: serial answers, exact counts everywhere, few transactions",
        arguments: RedisTarget.allCases)
    func concurrentLikesOnOnePost(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis)
        let post = harness.posts[0]
        let likeCounts = try await withThrowingTaskGroup(of: LikeState.self) { group in
            for user in 1...1_000 { group.addTask { try await harness.service.perform(.like, post: post, user: Int64(user)) } }
            return try await group.reduce(into: [LikeState]()) { $0.append($1) }
        }
        // Consistent with one serial order: every count from 1 to 1,000 answered exactly once.
        #expect(likeCounts.allSatisfy { $0.isLiked })
        #expect(likeCounts.map(\.likesCount).sorted() == (1...1_000).map { Int64($0) })

        let unlikeCounts = try await withThrowingTaskGroup(of: LikeState.self) { group in
            for user in stride(from: 2, through: 1_000, by: 2) {
                group.addTask { try await harness.service.perform(.unlike, post: post, user: Int64(user)) }
            }
            return try await group.reduce(into: [LikeState]()) { $0.append($1) }
        }
        #expect(unlikeCounts.allSatisfy { !$0.isLiked })
        #expect(unlikeCounts.map(\.likesCount).sorted() == (500..<1_000).map { Int64($0) })

        #expect(try await harness.service.perform(.read, post: post, user: 1).likesCount == 500)
        #expect(try await harness.redisCount(post) == 500)
        try await harness.service.flush()
        let counts = try await harness.postgresCounts()
        #expect(counts[post]?.count == 500)
        #expect(counts[post]?.rows == 500)
        let expected = Set(stride(from: 1, through: 999, by: 2).map { Pair(user: Int64($0), post: post) })
        #expect(try await harness.postgresMembers() == expected)
        let stats = await harness.service.stats()
        let transactions = stats.reduce(0) { $0 + $1.flushTransactions }
        let groupCommits = stats.reduce(0) { $0 + $1.groupCommits }
        // 1,500 changes: far fewer transactions and Redis round trips than changes.
        #expect(transactions > 0 && transactions < 150, "\(transactions) transactions for 1,500 changes")
        #expect(groupCommits < 750, "\(groupCommits) group commits for 1,500 changes")
        // Every change's wait for PostgreSQL was measured once, and none took a minute.
        let lag = harness.service.writeBehindLag.snapshot()
        #expect(lag.count == 1_500)
        #expect(lag.buckets.reduce(0, +) == 1_500)
        #expect(lag.sumSeconds >= 0 && lag.sumSeconds / 1_500 < 60)
        print(
            "1,500 changes on one post: \(groupCommits) group commits (average \(1_500 / max(groupCommits, 1))), \(transactions) PostgreSQL transactions"
        )
        await harness.stop()
    }

    @Test("a toggle storm by one user ends in the state of the last answer", arguments: RedisTarget.allCases)
    func toggleStorm(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis)
        let post = harness.posts[0]
        let answers = try await withThrowingTaskGroup(of: LikeState.self) { group in
            for _ in 0..<201 { group.addTask { try await harness.service.perform(.toggle, post: post, user: 77) } }
            return try await group.reduce(into: [LikeState]()) { $0.append($1) }
        }
        // Serially, 201 toggles from "not liked" alternate: 101 answers liked (count 1), 100 not (count 0).
        #expect(answers.filter { $0.isLiked }.count == 101)
        #expect(answers.allSatisfy { $0.likesCount == ($0.isLiked ? 1 : 0) })
        let final = try await harness.service.perform(.read, post: post, user: 77)
        #expect(final.isLiked)
        #expect(try await harness.redisIsMember(post, 77))
        try await harness.service.flush()
        #expect(try await harness.postgresMembers() == [Pair(user: 77, post: post)])
        #expect(try await harness.postgresCounts()[post]?.count == 1)
        await harness.stop()
    }

    @Test("like twice counts once; unlike of a non-member changes nothing and writes nothing", arguments: RedisTarget.allCases)
    func idempotency(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis)
        let post = harness.posts[0]
        #expect(try await harness.service.perform(.like, post: post, user: 5) == LikeState(postID: post, userID: 5, isLiked: true, likesCount: 1))
        #expect(try await harness.service.perform(.like, post: post, user: 5) == LikeState(postID: post, userID: 5, isLiked: true, likesCount: 1))
        let commitsBefore = await harness.service.stats().reduce(0) { $0 + $1.groupCommits }
        #expect(try await harness.service.perform(.unlike, post: post, user: 6) == LikeState(postID: post, userID: 6, isLiked: false, likesCount: 1))
        #expect(await harness.service.stats().reduce(0) { $0 + $1.groupCommits } == commitsBefore)
        #expect(try await harness.service.perform(.read, post: post, user: 5).isLiked)
        try await harness.service.flush()
        #expect(try await harness.postgresCounts()[post]?.count == 1)
        await harness.stop()
    }

    @Test("a post missing from posts is refused as unknown, and nothing is written for it", arguments: RedisTarget.allCases)
    func unknownPost(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis)
        let ghost = harness.posts[0] + 1_000_000_000_000
        let error = await #expect(throws: CounterError.self) { try await harness.service.perform(.like, post: ghost, user: 1) }
        #expect(error?.code == .unknownPost)
        #expect(
            try await harness.redis.send(
                .exists([harness.layout.likers(ofPost: ghost), harness.layout.hydratedMarker(ofPost: ghost)]), slot: HashSlot(post: ghost)
            ).integer == 0)
        // Remembered: once the post exists, the node still refuses it until its memory of the
        // refusal expires (5 s by default) — it did not ask PostgreSQL again.
        try await harness.pool.query("INSERT INTO posts (id) VALUES ($1)", [.int64(ghost)])
        let remembered = await #expect(throws: CounterError.self) { try await harness.service.perform(.read, post: ghost, user: 1) }
        #expect(remembered?.code == .unknownPost)
        // An operator's re-check makes it ask again.
        await harness.service.recheckExistence(of: [ghost])
        #expect(try await harness.service.perform(.read, post: ghost, user: 1).likesCount == 0)
        let invalid = await #expect(throws: CounterError.self) { try await harness.service.perform(.like, post: 0, user: 1) }
        #expect(invalid?.code == .invalidArgument)
        await harness.stop()
    }

    @Test("a post is hydrated from the likes PostgreSQL already has, once", arguments: RedisTarget.allCases)
    func hydrationFromPostgres(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis)
        let post = harness.posts[0]
        try await harness.addLikers(30, to: post)
        // Many first touches at once: hydration happens once, and every answer builds on the 30.
        let answers = try await withThrowingTaskGroup(of: LikeState.self) { group in
            for user in 31...60 { group.addTask { try await harness.service.perform(.like, post: post, user: Int64(user)) } }
            return try await group.reduce(into: [LikeState]()) { $0.append($1) }
        }
        #expect(answers.map(\.likesCount).sorted() == (31...60).map { Int64($0) })
        #expect(try await harness.service.perform(.read, post: post, user: 3).isLiked)
        #expect(try await harness.service.perform(.toggle, post: post, user: 3) == LikeState(postID: post, userID: 3, isLiked: false, likesCount: 59))
        try await harness.service.flush()
        let counts = try await harness.postgresCounts()
        #expect(counts[post]?.count == 59)
        #expect(counts[post]?.rows == 59)
        await harness.stop()
    }

    @Test(
        "a cold post is read from PostgreSQL — count, memberships, a feed of many — and nothing of it is loaded into Redis; its first write loads it",
        arguments: RedisTarget.allCases)
    func coldReadsFromPostgres(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 40, redis: redis) { configuration in
            // A cold read ignores the size that makes a write load a post in the background.
            configuration.warmThreshold = 10
        }
        let post = harness.posts[0]
        try await harness.addLikers(30, to: post)
        func redisKeys(_ post: Int64) async throws -> Int64 {
            try await harness.redis.send(
                .exists([harness.layout.likers(ofPost: post), harness.layout.hydratedMarker(ofPost: post)]),
                slot: HashSlot(post: post)
            ).integer ?? -1
        }
        #expect(try await harness.service.perform(.read, post: post, user: 7) == LikeState(postID: post, userID: 7, isLiked: true, likesCount: 30))
        #expect(try await harness.service.perform(.read, post: post, user: 31) == LikeState(postID: post, userID: 31, isLiked: false, likesCount: 30))
        #expect(try await harness.service.perform(.count, post: post, user: 0).likesCount == 30)
        // A feed page's worth at once: every post answered, none loaded.
        let page = try await withThrowingTaskGroup(of: LikeState.self) { group in
            for other in harness.posts { group.addTask { try await harness.service.perform(.read, post: other, user: 7) } }
            return try await group.reduce(into: [Int64: LikeState]()) { $0[$1.postID] = $1 }
        }
        #expect(page.count == harness.posts.count)
        #expect(page[post]?.likesCount == 30 && page[post]?.isLiked == true)
        #expect(page.filter { $0.key != post }.values.allSatisfy { $0.likesCount == 0 && !$0.isLiked })
        for other in harness.posts { #expect(try await redisKeys(other) == 0, "post \(other) was loaded by a read") }
        let stats = await harness.service.stats()
        #expect(stats.reduce(0) { $0 + $1.coldReads } == 3 + harness.posts.count)
        #expect(stats.reduce(0) { $0 + $1.hotReads } == 0)

        // The first write loads the post (it is small enough), and reads are answered from Redis after it.
        let second = harness.posts[1]
        #expect(try await harness.service.perform(.like, post: second, user: 7).likesCount == 1)
        #expect(try await redisKeys(second) == 2)
        #expect(try await harness.service.perform(.read, post: second, user: 7).isLiked)
        #expect(await harness.service.stats().reduce(0) { $0 + $1.hotReads } == 1)
        try await harness.service.flush()
        #expect(try await harness.postgresCounts()[second].map { $0.count == 1 && $0.rows == 1 } == true)
        await harness.stop()
    }

    /// Waits (up to 30 s) until the service has evicted `wanted` posts in all; returns how many it has.
    static func waitForEvictions(_ wanted: Int, of service: CounterService) async throws -> Int {
        var evicted = await service.stats().reduce(0) { $0 + $1.evictedPosts }
        let deadline = ContinuousClock.now + .seconds(30)
        while evicted < wanted && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            evicted = await service.stats().reduce(0) { $0 + $1.evictedPosts }
        }
        return evicted
    }

    @Test(
        "an idle post leaves Redis once PostgreSQL has all of it, never before; it is read cold, then its next write loads it again",
        arguments: RedisTarget.allCases)
    func idlePostsAreEvicted(redis: RedisTarget) async throws {
        // The witness has nothing pending (written and flushed first) and is touched last, with
        // the others' writes: a round that evicts it took every post idle at least as long, the
        // two others among them (a round takes the idle posts, least recently touched first). One
        // shard, so that those rounds are the ones that judge the others. Should the witness be
        // idle for its whole second (and gone) before that batch — a machine stalled that long —
        // it shows nothing: the scenario starts again on a service of its own.
        var started: (harness: WritePathHarness, post: Int64, other: Int64, witness: Int64)?
        for _ in 0..<3 where started == nil {
            let harness = try await WritePathHarness.start(posts: 3, redis: redis) { configuration in
                configuration.flushOnlyWhenAsked()
                configuration.hotIdle = .seconds(1)
                configuration.shardCount = 1
            }
            let (post, other, witness) = (harness.posts[0], harness.posts[1], harness.posts[2])
            _ = try await harness.service.perform(.like, post: witness, user: 1)
            try await harness.service.flush()
            let batch = (1...5).map { (LikeOperation.like, post, Int64($0)) } + [(.like, other, 1), (.read, witness, 1)]
            for result in await harness.service.performMany(batch) { _ = try result.get() }
            if try await harness.isHot(witness) {
                started = (harness, post, other, witness)
            } else {
                await harness.stop()
            }
        }
        let (harness, post, other, witness) = try #require(started, "the witness went idle before the others were written, three times")
        #expect(try await harness.isHot(post))
        #expect(try await harness.isHot(other))
        // Idle for over a second, but its changes wait for PostgreSQL: it stays, through the
        // round that evicted the witness.
        let first = try await Self.waitForEvictions(1, of: harness.service)
        let firstReport = first >= 1 ? "" : await harness.flushReport()
        #expect(first >= 1, "\(firstReport)")
        #expect(try await !harness.isHot(witness))
        #expect(try await harness.isHot(post), "a post with pending changes must never be evicted")
        #expect(try await harness.isHot(other))
        #expect(await harness.service.stats().reduce(0) { $0 + $1.evictedPosts } == 1)
        // Once flushed, it goes within a few checks.
        try await harness.service.flush()
        let evicted = try await Self.waitForEvictions(3, of: harness.service)
        let report = evicted == 3 ? "" : await harness.flushReport()
        #expect(evicted == 3, "\(report)")
        #expect(try await !harness.isHot(post))
        #expect(try await !harness.isHot(other))
        #expect(try await harness.redisCount(post) == 0)
        #expect(await harness.service.stats().reduce(0) { $0 + $1.hotPosts } == 0)
        // Cold: answered from PostgreSQL, exactly.
        #expect(try await harness.service.perform(.read, post: post, user: 3) == LikeState(postID: post, userID: 3, isLiked: true, likesCount: 5))
        #expect(try await !harness.isHot(post))
        // The next write loads it whole again and builds on PostgreSQL's rows.
        #expect(try await harness.service.perform(.toggle, post: post, user: 3) == LikeState(postID: post, userID: 3, isLiked: false, likesCount: 4))
        #expect(try await harness.isHot(post))
        #expect(try await harness.redisCount(post) == 4)
        try await harness.service.flush()
        #expect(try await harness.postgresCounts()[post].map { [$0.count, $0.rows] } == [4, 4])
        await harness.stop()
    }

    @Test(
        "a post with a change PostgreSQL refused stays in Redis while its dead letter waits — read with the change, also after a restart — so the replay finds the change still wanted; once the letter is gone the post is evicted like any other",
        .timeLimit(.minutes(2)), arguments: RedisTarget.allCases)
    func deadLetteredPostsStayHot(redis: RedisTarget) async throws {
        // A database of its own: the trigger must not reach other tests.
        try await TestEnvironment.withUser666Refused { pool, url in
            let harness = try await WritePathHarness.start(posts: 2, postgresURL: url, redis: redis) { configuration in
                configuration.flushOnlyWhenAsked()
                configuration.hotIdle = .milliseconds(200)
                // One shard: the rounds that evict the other post are the ones that judge the pinned one.
                configuration.shardCount = 1
            }
            let (pinned, other) = (harness.posts[0], harness.posts[1])
            _ = try await harness.service.perform(.like, post: pinned, user: 1)
            _ = try await harness.service.perform(.like, post: pinned, user: 666)
            _ = try await harness.service.perform(.like, post: other, user: 1)
            try await harness.service.flush()
            let letters = try await harness.redis.send(.xrange(harness.layout.deadLetters, count: 10), slot: harness.layout.deadLettersSlot)
                .streamEntries()
            #expect(letters.map { $0.string("p") } == [String(pinned)])

            // The other post goes once idle; the pinned one stays, idle longer (touched first), so
            // judged by the round that took the other (idle posts go least recently touched
            // first), and is read with the refused like.
            #expect(try await Self.waitForEvictions(1, of: harness.service) == 1)
            #expect(try await harness.isHot(pinned), "a post whose change waits in the dead letters must stay in Redis")
            #expect(try await !harness.isHot(other))
            #expect(
                try await harness.service.perform(.read, post: pinned, user: 666)
                    == LikeState(postID: pinned, userID: 666, isLiked: true, likesCount: 2))

            // A restart: the new process knows the letter from the stream, not from its memory.
            // The other post, written again and flushed by the drain, is in Redis with nothing
            // pending: found by the new process's walk with the pinned one, it goes in the same
            // round that judges the pinned one.
            _ = try await harness.service.perform(.like, post: other, user: 2)
            await harness.stopService()
            let restarted = try await harness.restarted()
            #expect(try await Self.waitForEvictions(1, of: restarted.service) == 1)
            #expect(try await !restarted.isHot(other))
            #expect(try await restarted.isHot(pinned), "after a restart too")

            // The replay, as the operators' command does it: the membership is still the
            // letter's, so the change is logged again and applied; then the letter goes.
            try await pool.query("DROP TRIGGER refuse_banned ON likes")
            #expect(try await restarted.service.perform(.confirmLike, post: pinned, user: 666).isLiked)
            try await restarted.redis.send(.xdel(restarted.layout.deadLetters, ids: letters.map(\.id)), slot: restarted.layout.deadLettersSlot)
            try await restarted.service.flush()
            #expect(try await restarted.postgresMembers([pinned]) == [Pair(user: 1, post: pinned), Pair(user: 666, post: pinned)])
            #expect(try await restarted.postgresCounts()[pinned].map { [$0.count, $0.rows] } == [2, 2])
            // The next read of the stream ends the pin (within its 5 s), and the post goes.
            #expect(try await Self.waitForEvictions(2, of: restarted.service) == 2)
            #expect(try await !restarted.isHot(pinned))
            #expect(try await restarted.service.perform(.read, post: pinned, user: 666).isLiked)
            await restarted.stop()
        }
    }

    @Test(
        "a large cold post is written at once, warm: its count and the memberships seen in Redis, no likers set; other users are looked up in PostgreSQL; exact after a restart with changes pending, a flush and an eviction",
        arguments: RedisTarget.allCases)
    func largePostTurnsWarm(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis) { configuration in
            configuration.warmThreshold = 1_000
            configuration.flushOnlyWhenAsked()
            configuration.hotIdle = nil
        }
        let post = harness.posts[0]
        let layout = harness.layout
        try await harness.addLikers(2_500, to: post)
        func warmState() async throws -> (marker: String?, hash: [String: String], likersSet: Int64) {
            let slot = HashSlot(post: post)
            let replies = try await harness.redis.pipeline(
                [
                    .get(layout.hydratedMarker(ofPost: post)), RedisCommand("HGETALL", layout.warmMembers(ofPost: post)),
                    .exists([layout.likers(ofPost: post)]),
                ], slot: slot)
            var hash: [String: String] = [:]
            let flat = replies[1].array ?? []
            for index in stride(from: 0, to: flat.count - 1, by: 2) { hash[flat[index].string ?? ""] = flat[index + 1].string ?? "" }
            return (replies[0].string, hash, replies[2].integer ?? -1)
        }

        // The first write is answered from the count and one membership: nothing is loaded.
        #expect(
            try await harness.service.perform(.toggle, post: post, user: 9_001)
                == LikeState(postID: post, userID: 9_001, isLiked: true, likesCount: 2_501))
        var state = try await warmState()
        #expect(state.marker == "warm" && state.hash == ["n": "2501", "9001": "1"] && state.likersSet == 0)
        // A liker the hash does not know yet: looked up, then remembered.
        #expect(
            try await harness.service.perform(.unlike, post: post, user: 1) == LikeState(postID: post, userID: 1, isLiked: false, likesCount: 2_500))
        let readsBefore = await harness.service.stats().reduce(0) { $0 + $1.coldReads }
        #expect(try await harness.service.perform(.read, post: post, user: 2) == LikeState(postID: post, userID: 2, isLiked: true, likesCount: 2_500))
        #expect(try await harness.service.perform(.read, post: post, user: 9_001).isLiked)
        #expect(try await harness.service.perform(.count, post: post, user: 0).likesCount == 2_500)
        let stats = await harness.service.stats()
        #expect(stats.reduce(0) { $0 + $1.coldReads } == readsBefore + 1, "only the read of a user the hash did not know went to PostgreSQL")
        #expect(stats.reduce(0) { $0 + $1.turnedWarm } == 1 && stats.reduce(0) { $0 + $1.coldWrites } == 1)
        state = try await warmState()
        #expect(state.hash == ["n": "2500", "9001": "1", "1": "0"])

        // A restart with the changes still in the log: the next process reads the warm post
        // from Redis, not from PostgreSQL's stale count.
        await harness.stopService(drain: false)
        let restarted = try await harness.restarted()
        #expect(try await restarted.service.perform(.like, post: post, user: 9_002).likesCount == 2_501)
        #expect(
            try await restarted.service.perform(.toggle, post: post, user: 1) == LikeState(postID: post, userID: 1, isLiked: true, likesCount: 2_502))
        try await restarted.service.flush()
        #expect(try await restarted.postgresCounts()[post].map { $0.count == 2_502 && $0.rows == 2_502 } == true)
        let members = try await restarted.postgresMembers()
        #expect(
            members.contains(Pair(user: 9_001, post: post)) && members.contains(Pair(user: 9_002, post: post))
                && members.contains(Pair(user: 1, post: post)))
        await restarted.stopService()

        // Evicted once nothing waits: the warm hash goes with the marker; the post is read cold
        // from the rows, and its next write turns it warm again from them.
        let evicting = try await harness.restarted { $0.hotIdle = .milliseconds(200) }
        for _ in 0..<200 {
            state = try await warmState()
            if state.marker == nil { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let report = await evicting.flushReport()
        #expect(state.marker == nil && state.hash.isEmpty && state.likersSet == 0, "the warm post was not evicted: \(report)")
        #expect(
            try await evicting.service.perform(.read, post: post, user: 9_002)
                == LikeState(postID: post, userID: 9_002, isLiked: true, likesCount: 2_502))
        #expect(
            try await evicting.service.perform(.toggle, post: post, user: 9_002)
                == LikeState(postID: post, userID: 9_002, isLiked: false, likesCount: 2_501))
        #expect(try await warmState().hash == ["n": "2501", "9002": "0"])
        try await evicting.service.flush()
        #expect(try await evicting.postgresCounts()[post].map { $0.count == 2_501 && $0.rows == 2_501 } == true)
        await evicting.stop()
    }

    @Test(
        "a warm post busy with users Redis does not know is promoted: loaded whole in the background while it keeps answering, its hash laid over the rows; the likers set is then exact",
        arguments: RedisTarget.allCases)
    func warmPostPromoted(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis) { configuration in
            configuration.warmThreshold = 1_000
            configuration.warmPromotionLookups = 40
            configuration.hydrationPageSize = 300
            configuration.hotIdle = nil
        }
        let post = harness.posts[0]
        let layout = harness.layout
        try await harness.addLikers(2_000, to: post)
        // Turned warm by its first write; then reads and writes of users it does not know.
        #expect(try await harness.service.perform(.unlike, post: post, user: 1).likesCount == 1_999)
        var expected = Set(Int64(2)...2_000)
        var count: Int64 = 1_999
        for user in Int64(3_001)...3_060 {
            let liked = try await harness.service.perform(.toggle, post: post, user: user)
            expected.insert(user)
            count += 1
            #expect(liked == LikeState(postID: post, userID: user, isLiked: true, likesCount: count))
            #expect(
                try await harness.service.perform(.read, post: post, user: user - 3_000)
                    == LikeState(postID: post, userID: user - 3_000, isLiked: user != 3_001, likesCount: count))
        }
        // Promoted once the lookups passed 40; writes went on meanwhile.
        var marker: String?
        for _ in 0..<200 {
            marker = try await harness.redis.send(.get(layout.hydratedMarker(ofPost: post)), slot: HashSlot(post: post)).string
            if marker == "1" { break }
            _ = try await harness.service.perform(.toggle, post: post, user: 5_000)
            if expected.remove(5_000) == nil { expected.insert(5_000) }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(marker == "1", "not promoted: \(harness.log.lines(of: "hydrating_large_post"))")
        let replies = try await harness.redis.pipeline(
            [
                RedisCommand("SMEMBERS", layout.likers(ofPost: post)), .exists([layout.warmMembers(ofPost: post)]),
            ], slot: HashSlot(post: post))
        #expect(Set((replies[0].array ?? []).compactMap(\.integer)) == expected)
        #expect(replies[1].integer == 0)
        #expect(harness.log.lines(of: "hydrating_large_post").contains { $0.contains("promoted_from=warm") })
        #expect(await harness.service.stats().reduce(0) { $0 + $1.promotedPosts } == 1)
        // Hot now: answered from the set; PostgreSQL agrees after a flush.
        #expect(
            try await harness.service.perform(.read, post: post, user: 1_500)
                == LikeState(postID: post, userID: 1_500, isLiked: true, likesCount: Int64(expected.count)))
        try await harness.service.flush()
        #expect(try await harness.postgresMembers() == Set(expected.map { Pair(user: $0, post: post) }))
        #expect(try await harness.postgresCounts()[post].map { $0.count == Int64(expected.count) && $0.rows == Int64(expected.count) } == true)
        await harness.stop()
    }

    @Test(
        "a promotion is published all or nothing: refused when the post is no longer warm, the slot's epoch moved, the loading set is not whole or the hash laid over it misses its count, and nothing changes then",
        arguments: RedisTarget.allCases)
    func largePostPublication(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis)
        let post = harness.posts[0]
        let slot = HashSlot(post: post)
        let layout = harness.layout
        let loading = layout.loadingLikers(ofPost: post, attempt: 1)
        func run(_ group: SlotCommands) async throws -> RedisReply { try await harness.redis.execute([group]).first!.get()[0] }
        func state() async throws -> [RedisReply] {
            try await harness.redis.pipeline(
                [
                    .exists([layout.likers(ofPost: post)]), .scard(layout.likers(ofPost: post)),
                    .exists([loading]),
                ], slot: slot)
        }
        _ = try await harness.redis.pipeline([.set(layout.epoch(of: slot), "5"), .sadd(loading, [Int64(1), Int64(2), Int64(3)])], slot: slot)
        // Not warm (Redis lost or reset the post meanwhile): refused, nothing done.
        let gone = try await run(PostHydration.publishing(post: post, loading: loading, loaded: 3, epoch: 5, layout: layout))
        guard case .error(let goneText) = gone else {
            Issue.record("refused")
            return
        }
        #expect(goneText.hasPrefix("GONE"))
        _ = try await harness.redis.pipeline(
            [
                .set(layout.hydratedMarker(ofPost: post), "warm"),
                .hset(layout.warmMembers(ofPost: post), [("n", Int64(3))]),
            ], slot: slot)
        // Another epoch: fenced, nothing done.
        let fenced = try await run(PostHydration.publishing(post: post, loading: loading, loaded: 3, epoch: 4, layout: layout))
        guard case .error(let fencedText) = fenced else {
            Issue.record("refused")
            return
        }
        #expect(fencedText.hasPrefix("FENCED"))
        // Fewer likers in the set than were loaded (a failover lost some): refused, nothing done.
        let incomplete = try await run(PostHydration.publishing(post: post, loading: loading, loaded: 4, epoch: 5, layout: layout))
        guard case .error(let incompleteText) = incomplete else {
            Issue.record("refused")
            return
        }
        #expect(incompleteText.hasPrefix("INCOMPLETE"))
        #expect(try await state().map(\.integer) == [0, 0, 1])
        // Whole, under the epoch held: the set becomes the likers set and the post is marked hot.
        #expect(try await run(PostHydration.publishing(post: post, loading: loading, loaded: 3, epoch: 5, layout: layout)).string == "OK")
        #expect(try await state().map(\.integer) == [1, 3, 0])
        #expect(try await harness.redis.send(.get(layout.hydratedMarker(ofPost: post)), slot: slot).string == "1")
        let ttl = try await harness.redis.pipeline([RedisCommand("TTL", layout.likers(ofPost: post))], slot: slot)
        #expect(ttl.first?.integer == -1)

        // A warm post's promotion: its hash is laid over the likers loaded (3 unliked, 4 liked
        // since it turned warm, 1 and 2 untouched), the count checked, the hash dropped.
        let warm = layout.warmMembers(ofPost: post)
        let promoting = layout.loadingLikers(ofPost: post, attempt: 2)
        _ = try await harness.redis.pipeline(
            [
                .del([layout.likers(ofPost: post)]), .set(layout.hydratedMarker(ofPost: post), "warm"),
                .sadd(promoting, [Int64(1), Int64(2), Int64(3)]), .hset(warm, [("n", Int64(9)), (Int64(3), "0"), (Int64(4), "1")]),
            ], slot: slot)
        // A count the merge does not give: refused, the post stays warm and whole.
        let mismatch = try await run(PostHydration.publishing(post: post, loading: promoting, loaded: 3, epoch: 5, layout: layout))
        guard case .error(let mismatchText) = mismatch else {
            Issue.record("refused")
            return
        }
        #expect(mismatchText.hasPrefix("MISMATCH"))
        let kept = try await harness.redis.pipeline(
            [.get(layout.hydratedMarker(ofPost: post)), .exists([warm, layout.likers(ofPost: post)])], slot: slot)
        #expect(kept[0].string == "warm" && kept[1].integer == 1)
        _ = try await harness.redis.pipeline(
            [.del([promoting]), .sadd(promoting, [Int64(1), Int64(2), Int64(3)]), .hset(warm, [("n", Int64(3))])], slot: slot)
        #expect(try await run(PostHydration.publishing(post: post, loading: promoting, loaded: 3, epoch: 5, layout: layout)).string == "OK")
        let promoted = try await harness.redis.pipeline(
            [
                .get(layout.hydratedMarker(ofPost: post)), RedisCommand("SMEMBERS", layout.likers(ofPost: post)), .exists([warm, promoting]),
            ], slot: slot)
        #expect(promoted[0].string == "1")
        #expect(Set((promoted[1].array ?? []).compactMap(\.integer)) == [1, 2, 4])
        #expect(promoted[2].integer == 0)
        await harness.stop()
    }

    @Test(
        "a flush takes whole log entries only up to its budget: big batches reach PostgreSQL in transactions of bounded size",
        arguments: RedisTarget.allCases)
    func flushBudget(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis) { configuration in
            configuration.flushOnlyWhenAsked()
            configuration.shardCount = 1
            configuration.flushBatchSize = 50
        }
        let post = harness.posts[0]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for user in 1...3_000 { group.addTask { _ = try await harness.service.perform(.like, post: post, user: Int64(user)) } }
            try await group.waitForAll()
        }
        try await harness.service.flush()
        #expect(try await harness.postgresCounts()[post].map { $0.count == 3_000 && $0.rows == 3_000 } == true)
        let stats = await harness.service.stats()
        // A slot's budget here is 64 changes; the entry that crosses it can hold up to 1,000 more.
        let largest = stats.map(\.largestFlush).max() ?? 0
        #expect(largest <= 64 + ChangeLogEntry.maximumChangesPerEntry, "largest flush \(largest) changes")
        #expect(stats.reduce(0) { $0 + $1.flushTransactions } >= 3)
        await harness.stop()
    }
}
