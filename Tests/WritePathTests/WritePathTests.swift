import NodeTestSupport
import Persistence
import ShardRouter
import TestSupport
import Testing
@testable import WritePath

@Suite("Write path against real Redis and PostgreSQL")
struct WritePathTests {
    @Test("1,000 concurrent likes then 500 unlikes on one post: serial answers, exact counts everywhere, few transactions", arguments: RedisTarget.allCases)
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
        print("1,500 changes on one post: \(groupCommits) group commits (average \(1_500 / max(groupCommits, 1))), \(transactions) PostgreSQL transactions")
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
        #expect(try await harness.redis.send(.exists([harness.layout.likers(ofPost: ghost), harness.layout.hydratedMarker(ofPost: ghost)]), slot: HashSlot(post: ghost)).integer == 0)
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
        try await harness.pool.query("INSERT INTO likes (user_id, post_id) SELECT u, $1 FROM generate_series(1, 30) u", [.int64(post)])
        try await harness.pool.query("UPDATE posts SET likes_count = 30 WHERE id = $1", [.int64(post)])
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

    @Test("a cold post is read from PostgreSQL — count, memberships, a feed of many — and nothing of it is loaded into Redis; its first write loads it",
          arguments: RedisTarget.allCases)
    func coldReadsFromPostgres(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 40, redis: redis) { configuration in
            // A cold read ignores the size that makes a write load a post in the background.
            configuration.streamingHydrationThreshold = 10
        }
        let post = harness.posts[0]
        try await harness.pool.query("INSERT INTO likes (user_id, post_id) SELECT u, $1 FROM generate_series(1, 30) u", [.int64(post)])
        try await harness.pool.query("UPDATE posts SET likes_count = 30 WHERE id = $1", [.int64(post)])
        func redisKeys(_ post: Int64) async throws -> Int64 {
            try await harness.redis.send(.exists([harness.layout.likers(ofPost: post), harness.layout.hydratedMarker(ofPost: post)]),
                                         slot: HashSlot(post: post)).integer ?? -1
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

    @Test("an idle post leaves Redis once PostgreSQL has all of it, never before; it is read cold, then its next write loads it again",
          arguments: RedisTarget.allCases)
    func idlePostsAreEvicted(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 2, redis: redis) { configuration in
            configuration.flushOnlyWhenAsked()
            configuration.hotIdle = .milliseconds(200)
        }
        let (post, other) = (harness.posts[0], harness.posts[1])
        for user in 1...5 { _ = try await harness.service.perform(.like, post: post, user: Int64(user)) }
        _ = try await harness.service.perform(.like, post: other, user: 1)
        #expect(try await harness.isHot(post))
        #expect(try await harness.isHot(other))
        // Idle for well over 200 ms, but its changes wait for PostgreSQL: it stays.
        try await Task.sleep(for: .milliseconds(800))
        #expect(try await harness.isHot(post), "a post with pending changes must never be evicted")
        #expect(await harness.service.stats().reduce(0) { $0 + $1.evictedPosts } == 0)
        // Once flushed, it goes within a few checks.
        try await harness.service.flush()
        var evicted = 0
        for _ in 0..<100 where evicted < 2 {
            try await Task.sleep(for: .milliseconds(50))
            evicted = await harness.service.stats().reduce(0) { $0 + $1.evictedPosts }
        }
        let report = evicted == 2 ? "" : await harness.flushReport()
        #expect(evicted == 2, "\(report)")
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

    @Test("a post with a change PostgreSQL refused stays in Redis while its dead letter waits — read with the change, also after a restart — so the replay finds the change still wanted; once the letter is gone the post is evicted like any other",
          .timeLimit(.minutes(2)), arguments: RedisTarget.allCases)
    func deadLetteredPostsStayHot(redis: RedisTarget) async throws {
        // A database of its own: the trigger must not reach other tests.
        try await TestEnvironment.withUser666Refused { pool, url in
            let harness = try await WritePathHarness.start(posts: 2, postgresURL: url, redis: redis) { configuration in
                configuration.flushOnlyWhenAsked()
                configuration.hotIdle = .milliseconds(200)
            }
            let (pinned, other) = (harness.posts[0], harness.posts[1])
            _ = try await harness.service.perform(.like, post: pinned, user: 1)
            _ = try await harness.service.perform(.like, post: pinned, user: 666)
            _ = try await harness.service.perform(.like, post: other, user: 1)
            try await harness.service.flush()
            let letters = try await harness.redis.send(.xrange(harness.layout.deadLetters, count: 10), slot: harness.layout.deadLettersSlot).streamEntries()
            #expect(letters.map { $0.string("p") } == [String(pinned)])

            func waitForEvictions(_ wanted: Int, of service: CounterService) async throws -> Int {
                var evicted = 0
                for _ in 0..<200 where evicted < wanted {
                    try await Task.sleep(for: .milliseconds(50))
                    evicted = await service.stats().reduce(0) { $0 + $1.evictedPosts }
                }
                return evicted
            }
            // The other post goes once idle; the pinned one stays, idle as long, and is read with
            // the refused like.
            #expect(try await waitForEvictions(1, of: harness.service) == 1)
            try await Task.sleep(for: .milliseconds(600))
            #expect(try await harness.isHot(pinned), "a post whose change waits in the dead letters must stay in Redis")
            #expect(try await !harness.isHot(other))
            #expect(try await harness.service.perform(.read, post: pinned, user: 666) == LikeState(postID: pinned, userID: 666, isLiked: true, likesCount: 2))

            // A restart: the new process knows the letter from the stream, not from its memory.
            await harness.stopService()
            let restarted = try await harness.restarted()
            try await Task.sleep(for: .milliseconds(1_500))
            #expect(try await restarted.isHot(pinned), "after a restart too")
            #expect(await restarted.service.stats().reduce(0) { $0 + $1.evictedPosts } == 0)

            // The replay, as the operators' command does it: the membership is still the
            // letter's, so the change is logged again and applied; then the letter goes.
            try await pool.query("DROP TRIGGER refuse_banned ON likes")
            #expect(try await restarted.service.perform(.confirmLike, post: pinned, user: 666).isLiked)
            try await restarted.redis.send(.xdel(restarted.layout.deadLetters, ids: letters.map(\.id)), slot: restarted.layout.deadLettersSlot)
            try await restarted.service.flush()
            #expect(try await restarted.postgresMembers([pinned]) == [Pair(user: 1, post: pinned), Pair(user: 666, post: pinned)])
            #expect(try await restarted.postgresCounts()[pinned].map { [$0.count, $0.rows] } == [2, 2])
            // The next read of the stream ends the pin (within its 5 s), and the post goes.
            #expect(try await waitForEvictions(1, of: restarted.service) == 1)
            #expect(try await !restarted.isHot(pinned))
            #expect(try await restarted.service.perform(.read, post: pinned, user: 666).isLiked)
            await restarted.stop()
        }
    }

    @Test("a large post loads in the background, page by page: its operations wait for it, the shard's other posts are answered meanwhile, and Redis ends with exactly PostgreSQL's likers",
          .timeLimit(.minutes(3)), arguments: RedisTarget.allCases)
    func largePostLoadsInTheBackground(redis: RedisTarget) async throws {
        // A PostgreSQL of its own: the test locks the likes table, which would hold up every
        // other suite's reads and flushes on a shared server. Starting it takes a while on a
        // loaded machine: hence three minutes.
        try await PrivateServers.with { servers in
            let harness = try await WritePathHarness.start(posts: 2, postgresURL: servers.postgresURL, redis: redis,
                                                       redisURL: redis == .single ? servers.redisURL : nil) { configuration in
                configuration.shardCount = 1
                configuration.streamingHydrationThreshold = 1_000
                configuration.hydrationPageSize = 700
            }
            let (large, small) = (harness.posts[0], harness.posts[1])
            try await harness.pool.query("""
                INSERT INTO likes (user_id, post_id, created_at, updated_at) SELECT g, $1, now(), now() FROM generate_series(1, 2500) g
                """, [.int64(large)])
            try await harness.pool.query("UPDATE posts SET likes_count = 2500 WHERE id = $1", [.int64(large)])
            _ = try await harness.service.perform(.like, post: small, user: 1)
            // Nothing pending: no flush asks the pool for a connection while the test counts its waiters.
            try await harness.service.flush()

            // Hold the likes table, so the large post's load cannot read it until released — but
            // only once the batch that defers the post has looked it up (that lookup reads likes
            // too). The pool is first come, first served: every connection is held here, the
            // batch's lookup queues, then a waiter of this test queues behind it; one connection
            // let go goes to the lookup and comes back to this test, so the load that the batch
            // starts queues for a connection while the table is locked.
            let gates = (0..<5).map { _ in Gate() }
            var holders: [Task<Void, Error>] = []
            for gate in gates.prefix(4) {
                holders.append(Task { try await harness.pool.withConnection { _ in await gate.wait() } })
            }
            let deadline = ContinuousClock.now + .seconds(30)
            func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
                while !condition() {
                    try #require(ContinuousClock.now < deadline, "waited too long until \(what); \(harness.pool.waitingCount) waiting for a connection")
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            try await waitUntil("the test holds every connection") { gates.prefix(4).reduce(0, { $0 + $1.arrived }) == 4 }
            let first = Task { try await harness.service.perform(.toggle, post: large, user: 9_001) }
            try await waitUntil("the batch's lookup waits for a connection") { harness.pool.waitingCount == 1 }
            holders.append(Task { try await harness.pool.withConnection { _ in await gates[4].wait() } })
            try await waitUntil("the test's waiter queues behind it") { harness.pool.waitingCount == 2 }
            gates[0].open()  // to the lookup, then back to this test's waiter
            try await waitUntil("the load waits for a connection") {
                !harness.log.lines(of: "hydrating_large_post").isEmpty && harness.pool.waitingCount == 1
            }
            let locker = PostgresConnection(configuration: PostgresConfiguration(url: servers.postgresURL))
            try await locker.query("BEGIN")
            try await locker.query("LOCK TABLE likes IN ACCESS EXCLUSIVE MODE")
            for gate in gates.dropFirst() { gate.open() }
            for holder in holders { try await holder.value }
            let second = Task { try await harness.service.perform(.read, post: large, user: 1) }
            for user in 2...20 {
                #expect(try await harness.service.perform(.like, post: small, user: Int64(user)).likesCount == Int64(user))
            }
            try await locker.query("COMMIT")
            await locker.close()
            #expect(try await first.value == LikeState(postID: large, userID: 9_001, isLiked: true, likesCount: 2_501))
            #expect(try await second.value == LikeState(postID: large, userID: 1, isLiked: true, likesCount: 2_501))

            // Redis holds exactly the rows and the new like; no loading set is left behind.
            let slot = HashSlot(post: large)
            let replies = try await harness.redis.pipeline([
                .scard(harness.layout.likers(ofPost: large)), .smismember(harness.layout.likers(ofPost: large), [Int64(1), Int64(2_500), Int64(2_501), Int64(9_001)]),
            ], slot: slot)
            #expect(replies[0].integer == 2_501)
            #expect(replies[1].array?.map(\.integer) == [1, 1, 0, 1])
            let loading = try await scanKeys(matching: harness.layout.likers(ofPost: large) + ":loading:*") {
                try await harness.redis.pipeline([$0], slot: slot)[0]
            }
            #expect(loading.isEmpty, "\(loading)")
            let loaded = harness.log.lines(of: "hydrating_large_post").filter { $0.contains("phase=loaded") }
            #expect(loaded.count == 1 && loaded[0].contains("likers=2500"))
            try await harness.service.flush()
            #expect(try await harness.postgresCounts()[large].map { $0.count == 2_501 && $0.rows == 2_501 } == true)
            await harness.stop()
        }
    }

    @Test("a streamed hydration is published all or nothing: refused when the slot's epoch moved or the loading set is not whole, and nothing changes then",
          arguments: RedisTarget.allCases)
    func largePostPublication(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis)
        let post = harness.posts[0]
        let slot = HashSlot(post: post)
        let layout = harness.layout
        let loading = layout.loadingLikers(ofPost: post, attempt: 1)
        func run(_ group: SlotCommands) async throws -> RedisReply { try await harness.redis.execute([group]).first!.get()[0] }
        func state() async throws -> [RedisReply] {
            try await harness.redis.pipeline([.exists([layout.hydratedMarker(ofPost: post)]), .scard(layout.likers(ofPost: post)),
                                              .exists([loading])], slot: slot)
        }
        _ = try await harness.redis.pipeline([.set(layout.epoch(of: slot), "5"), .sadd(loading, [Int64(1), Int64(2), Int64(3)])], slot: slot)
        // Another epoch: fenced, nothing done.
        let fenced = try await run(PostHydration.publishing(post: post, loading: loading, loaded: 3, epoch: 4, layout: layout))
        guard case .error(let fencedText) = fenced else { Issue.record("refused"); return }
        #expect(fencedText.hasPrefix("FENCED"))
        // Fewer likers in the set than were loaded (a failover lost some): refused, nothing done.
        let incomplete = try await run(PostHydration.publishing(post: post, loading: loading, loaded: 4, epoch: 5, layout: layout))
        guard case .error(let incompleteText) = incomplete else { Issue.record("refused"); return }
        #expect(incompleteText.hasPrefix("INCOMPLETE"))
        #expect(try await state().map(\.integer) == [0, 0, 1])
        // Whole, under the epoch held: the set becomes the likers set and the post is marked.
        #expect(try await run(PostHydration.publishing(post: post, loading: loading, loaded: 3, epoch: 5, layout: layout)).string == "OK")
        #expect(try await state().map(\.integer) == [1, 3, 0])
        let ttl = try await harness.redis.pipeline([RedisCommand("TTL", layout.likers(ofPost: post))], slot: slot)
        #expect(ttl.first?.integer == -1)
        await harness.stop()
    }

    @Test("a flush takes whole log entries only up to its budget: big batches reach PostgreSQL in transactions of bounded size", arguments: RedisTarget.allCases)
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
