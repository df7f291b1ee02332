import NodeTestSupport
import ShardRouter
import TestSupport
import Testing

@testable import WritePath

/// Stops and starts servers of its own, so the shared ones are not disturbed.
@Suite("Write path when a server fails", .serialized)
struct WritePathFailureTests {
    @Test("PostgreSQL down under writes: nothing refused below the backlog limit, everything in PostgreSQL once it returns")
    func postgresDown() async throws {
        try await PrivateServers.with { servers in
            let harness = try await WritePathHarness.start(posts: 4, postgresURL: servers.postgresURL, redisURL: servers.redisURL) {
                $0.retryMaximumDelay = .milliseconds(200)
            }
            // Posts written once are in Redis; new writes to them no longer need PostgreSQL. (A
            // read would not load them: a cold post's reads are answered from PostgreSQL, and a
            // write that changes nothing loads nothing.) The warm-up's like and unlike reach
            // PostgreSQL before it stops.
            for post in harness.posts {
                _ = try await harness.service.perform(.like, post: post, user: 1_000_000)
                _ = try await harness.service.perform(.unlike, post: post, user: 1_000_000)
            }
            try await harness.service.flush()

            try await servers.run("stop", only: "postgres")
            var expected: Set<Pair> = []
            for user in 1...300 {
                let post = harness.posts[user % harness.posts.count]
                let state = try await harness.service.perform(.like, post: post, user: Int64(user))
                #expect(state.isLiked)
                expected.insert(Pair(user: Int64(user), post: post))
            }
            // Wait (up to 10 s) until the flusher has tried and failed at least once.
            var during = await harness.service.stats()
            for _ in 0..<100 where during.reduce(0, { $0 + $1.flushRetries }) == 0 {
                try await Task.sleep(for: .milliseconds(100))
                during = await harness.service.stats()
            }
            #expect(during.reduce(0) { $0 + $1.pendingChanges } == 300)
            #expect(during.reduce(0) { $0 + $1.flushRetries } > 0)
            #expect(during.compactMap(\.lastFlushError).first?.contains("PostgreSQL") == true)
            #expect(during.reduce(0) { $0 + $1.postgresErrors } > 0)
            // The retries show in the log, at warn, with the reason.
            #expect(harness.log.lines(of: "flush_failed").contains { $0.contains("level=warn") && $0.contains("PostgreSQL") })

            try await servers.run("start", only: "postgres")
            try await harness.service.flush()
            #expect(try await harness.postgresMembers() == expected)
            for (_, state) in try await harness.postgresCounts() { #expect(state.count == state.rows) }
            #expect(await harness.service.stats().reduce(0) { $0 + $1.pendingChanges } == 0)
            #expect(!harness.log.lines(of: "flush_recovered").isEmpty)
            await harness.stop()
        }
    }

    @Test("Redis down: operations fail fast with a clear error, nothing acknowledged is lost, service resumes when it returns")
    func redisDown() async throws {
        try await PrivateServers.with { servers in
            let harness = try await WritePathHarness.start(posts: 2, postgresURL: servers.postgresURL, redisURL: servers.redisURL) {
                $0.flushOnlyWhenAsked()
            }
            var expected: Set<Pair> = []
            for user in 1...50 {
                _ = try await harness.service.perform(.like, post: harness.posts[0], user: Int64(user))
                expected.insert(Pair(user: Int64(user), post: harness.posts[0]))
            }
            try await servers.run("stop", only: "redis")
            let started = ContinuousClock.now
            let error = await #expect(throws: CounterError.self) {
                try await harness.service.perform(.like, post: harness.posts[0], user: 999)
            }
            #expect(error?.code == .unavailable)
            #expect(error?.message.contains("Redis") == true)
            #expect(await harness.service.stats().reduce(0) { $0 + $1.redisErrors } > 0)
            #expect(ContinuousClock.now - started < .seconds(3))
            // Once per node, not per failed call.
            #expect(harness.log.lines(of: "redis_node_unreachable").count == 1)

            try await servers.run("start", only: "redis")
            var resumed: LikeState?
            for _ in 0..<100 where resumed == nil {
                resumed = try? await harness.service.perform(.like, post: harness.posts[1], user: 7)
                if resumed == nil { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(resumed?.isLiked == true)
            #expect(harness.log.lines(of: "redis_node_reconnected").count == 1)
            expected.insert(Pair(user: 7, post: harness.posts[1]))
            try await harness.service.flush()
            let members = try await harness.postgresMembers()
            // User 999's like failed: either state is allowed for it; everything acknowledged is there.
            #expect(members.subtracting([Pair(user: 999, post: harness.posts[0])]) == expected)
            await harness.stop()
        }
    }

    @Test("a slot that cannot be rescanned while Redis is down is retried with backoff, not in a busy loop")
    func uncertainSlotWhileRedisIsDown() async throws {
        try await PrivateServers.with { servers in
            let harness = try await WritePathHarness.start(posts: 1, postgresURL: servers.postgresURL, redisURL: servers.redisURL) {
                $0.shardCount = 1
                $0.retryInitialDelay = .milliseconds(50)
                $0.retryMaximumDelay = .milliseconds(400)
            }
            try await servers.run("stop", only: "redis")
            // A write whose outcome is unknown leaves its slot to be read again; nothing else waits.
            let started = ContinuousClock.now
            await harness.service.noteUncertain([HashSlot(post: harness.posts[0]).rawValue])
            // Each attempt fails and backs off (50, 100, 200, 400, 400 … ms). Wait (however long
            // a busy machine takes) for 3 retries, then for 2 s to have passed: a busy loop would
            // have made thousands by then; backing off makes at most one per 400 ms after the
            // first three, whatever the load (load only makes fewer; 12 by 2 s).
            var retries = 0
            while ContinuousClock.now - started < .seconds(30) {
                retries = await harness.service.stats()[0].flushRetries
                if retries >= 3 && ContinuousClock.now - started >= .seconds(2) { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            let elapsed = ContinuousClock.now - started
            let ceiling = 7 + Int(elapsed / .milliseconds(400))
            #expect(retries >= 3 && retries <= ceiling, "\(retries) retries in \(elapsed) (at most \(ceiling) with backoff)")
            #expect(!harness.log.lines(of: "flush_failed").isEmpty)
            try await servers.run("start", only: "redis")
            // The slot is read again once Redis is back (the client waits out its reconnect backoff).
            var flushed = false
            for _ in 0..<100 where !flushed {
                flushed = (try? await harness.service.flush()) != nil
                if !flushed { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(flushed)
            await harness.stop()
        }
    }
}

@Suite("Write path behaviour against the shared servers")
struct WritePathBehaviourTests {
    @Test(
        "a post deleted with pending likes: its changes reach the dead-letter stream with the reason; other posts are applied",
        arguments: RedisTarget.allCases)
    func deadLetters(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 2, redis: redis) {
            $0.flushOnlyWhenAsked()
            $0.shardCount = 1
        }
        let (kept, deleted) = (harness.posts[0], harness.posts[1])
        for user in 1...5 {
            _ = try await harness.service.perform(.like, post: kept, user: Int64(user))
            _ = try await harness.service.perform(.like, post: deleted, user: Int64(user))
        }
        try await harness.pool.query("DELETE FROM posts WHERE id = $1", [.int64(deleted)])
        try await harness.service.flush()

        #expect(try await harness.postgresMembers([kept]).count == 5)
        #expect(try await harness.postgresCounts()[kept]?.count == 5)
        let letters = try await harness.redis.send(.xrange(harness.layout.deadLetters, count: 100), slot: harness.layout.deadLettersSlot)
            .streamEntries()
        #expect(letters.count == 5)
        #expect(letters.allSatisfy { $0.string("p") == String(deleted) && $0.string("reason") == "post does not exist in posts" })
        #expect(Set(letters.compactMap { $0.string("u") }) == ["1", "2", "3", "4", "5"])
        #expect(await harness.service.stats().reduce(0) { $0 + $1.deadLetters } == 5)
        #expect(harness.log.lines(of: "dead_lettered").contains { $0.contains("level=warn") && $0.contains("changes=5") })
        // The deleted post is now unknown to the node, and stays unknown after the node's memory
        // of it expires: Redis forgot it too, so the next touch asks PostgreSQL again.
        let error = await #expect(throws: CounterError.self) { try await harness.service.perform(.like, post: deleted, user: 9) }
        #expect(error?.code == .unknownPost)
        #expect(try await harness.redis.send(.exists([harness.layout.hydratedMarker(ofPost: deleted)]), slot: HashSlot(post: deleted)).integer == 0)
        let restarted = try await harness.restarted()
        let afterRestart = await #expect(throws: CounterError.self) { try await restarted.service.perform(.like, post: deleted, user: 9) }
        #expect(afterRestart?.code == .unknownPost)
        await restarted.stopService()
        await harness.stop()
    }

    @Test(
        "a post liked without pause is flushed within the maximum age, though the interval and batch size never trigger",
        arguments: RedisTarget.allCases)
    func maximumAge(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis) {
            $0.flushInterval = .seconds(3_600)
            $0.flushBatchSize = 1_000_000
            $0.flushMaxAge = .milliseconds(250)
        }
        let post = harness.posts[0]
        // Like without pause until two flushes have happened (at most 20 s, however slow the
        // machine): with an hour's interval and an unreachable batch size, only the maximum age can
        // cause them.
        let end = ContinuousClock.now + .seconds(20)
        var user: Int64 = 0
        var flushesWhileWriting = 0
        while ContinuousClock.now < end && flushesWhileWriting < 2 {
            user += 1
            _ = try await harness.service.perform(.like, post: post, user: user)
            if user % 20 == 0 { flushesWhileWriting = await harness.flushTransactions() }
        }
        let inPostgres = try await harness.postgresCounts()[post]?.count ?? 0
        let report = flushesWhileWriting >= 2 ? "" : await harness.flushReport()
        #expect(flushesWhileWriting >= 2, "\(flushesWhileWriting) flushes while liking \(user) times; \(report)")
        #expect(inPostgres > 0 && inPostgres <= user)
        await harness.stop()
    }

    @Test(
        "above the backlog limit writes are refused with a retryable error; reads go on; writes resume after a flush", arguments: RedisTarget.allCases
    )
    func backlogLimit(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis) {
            $0.shardCount = 1
            $0.backlogLimitPerShard = 20
            $0.flushOnlyWhenAsked()
        }
        let post = harness.posts[0]
        // Like until 20 changes wait. (A flush nobody asked for was seen twice in a loaded run's
        // first likes — it only makes PostgreSQL current sooner — so the limit is counted from
        // the shard's own books, not from the number of likes.)
        var liked: Int64 = 0
        while liked < 200, await harness.service.stats()[0].pendingChanges < 20 {
            liked += 1
            _ = try await harness.service.perform(.like, post: post, user: liked)
        }
        let refusedUser = liked + 1
        let error = await #expect(throws: CounterError.self) { try await harness.service.perform(.like, post: post, user: refusedUser) }
        let report = error?.code == .backlogFull ? "" : await harness.flushReport()
        #expect(error?.code == .backlogFull, "after \(liked) likes: \(report)")
        #expect(error?.retryAfterSeconds != nil)
        _ = try? await harness.service.perform(.like, post: post, user: refusedUser + 1)
        #expect(
            try await harness.service.perform(.read, post: post, user: refusedUser)
                == LikeState(postID: post, userID: refusedUser, isLiked: false, likesCount: liked))
        // Logged when the refusals start and when they end, not per refused write.
        #expect(harness.log.lines(of: "writes_refused").count == 1)
        try await harness.service.flush()
        #expect(try await harness.service.perform(.like, post: post, user: refusedUser).likesCount == liked + 1)
        #expect(harness.log.lines(of: "writes_accepted").count == 1)
        await harness.stop()
    }

    @Test(
        "a change that has waited for PostgreSQL longer than the age limit: writes are refused (backlog_full, saying how long), reads go on, writes resume after a flush",
        arguments: RedisTarget.allCases)
    func backlogAgeLimit(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis) {
            $0.shardCount = 1
            $0.backlogMaximumAge = .seconds(3)
            $0.flushOnlyWhenAsked()
        }
        let post = harness.posts[0]
        _ = try await harness.service.perform(.like, post: post, user: 1)
        // Wait (however long a busy machine takes) until the change has waited the limit, as the
        // shard counts it; a write that arrives after that is refused. The edge itself — accepted
        // a moment before, however many wait — is BacklogAgeTests', on a clock the test moves.
        var oldest = 0.0
        let deadline = ContinuousClock.now + .seconds(60)
        while oldest < 3 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            oldest = await harness.service.stats().map(\.oldestPendingAgeSeconds).max() ?? 0
        }
        #expect(oldest >= 3, "the oldest change has waited \(oldest) s")
        let error = await #expect(throws: CounterError.self) { try await harness.service.perform(.like, post: post, user: 3) }
        #expect(error?.code == .backlogFull)
        #expect(error?.retryAfterSeconds != nil)
        #expect(error?.message.contains("has waited") == true, "\(String(describing: error))")
        #expect(try await harness.service.perform(.read, post: post, user: 3) == LikeState(postID: post, userID: 3, isLiked: false, likesCount: 1))
        #expect(harness.log.lines(of: "writes_refused").count == 1)
        try await harness.service.flush()
        #expect(try await harness.service.perform(.like, post: post, user: 3).likesCount == 2)
        #expect(harness.log.lines(of: "writes_accepted").count == 1)
        try await harness.service.flush()
        #expect(try await harness.postgresCounts()[post]?.count == 2)
        await harness.stop()
    }

    @Test(
        "more operations at once than a shard may hold waiting: the rest are refused (overloaded, retryable) and change nothing; the shard goes on",
        arguments: RedisTarget.allCases)
    func queueBound(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis) {
            $0.shardCount = 1
            $0.maximumQueuedOperationsPerShard = 50
        }
        let post = harness.posts[0]
        _ = try await harness.service.perform(.read, post: post, user: 1)
        // 2,000 likes queued at once, far faster than a batch is decided.
        let results = await harness.service.performMany((1...2_000).map { (LikeOperation.like, post, Int64($0)) })
        var liked = 0
        var refused = 0
        for result in results {
            switch result {
            case .success(let state):
                #expect(state.isLiked)
                liked += 1
            case .failure(let error as CounterError):
                #expect(error.code == .overloaded && error.retryAfterSeconds == 1, "\(error)")
                refused += 1
            case .failure(let error): Issue.record("\(error)")
            }
        }
        #expect(liked >= 50 && refused > 0 && liked + refused == 2_000, "liked \(liked), refused \(refused)")
        // Only the accepted likes happened.
        #expect(try await harness.redisCount(post) == Int64(liked))
        #expect(try await harness.service.perform(.like, post: post, user: 5_000).likesCount == Int64(liked + 1))
        try await harness.service.flush()
        #expect(try await harness.postgresCounts()[post]?.count == Int64(liked + 1))
        await harness.stop()
    }

    @Test("postgres acknowledgement: the answer comes after the change is committed in PostgreSQL", arguments: RedisTarget.allCases)
    func postgresAcknowledgement(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis) { $0.acknowledgement = .postgres }
        let post = harness.posts[0]
        let answers = try await withThrowingTaskGroup(of: LikeState.self) { group in
            for user in 1...200 { group.addTask { try await harness.service.perform(.like, post: post, user: Int64(user)) } }
            return try await group.reduce(into: [LikeState]()) { $0.append($1) }
        }
        // No flush call: every acknowledged like is already in PostgreSQL.
        #expect(try await harness.postgresMembers().count == 200)
        #expect(answers.map(\.likesCount).sorted() == (1...200).map { Int64($0) })
        // Still batched: far fewer transactions than likes.
        #expect(await harness.flushTransactions() < 100)
        await harness.stop()
    }

    @Test("memory acknowledgement: answers come before the Redis write, and the changes still arrive everywhere", arguments: RedisTarget.allCases)
    func memoryAcknowledgement(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis) { $0.acknowledgement = .memory }
        let post = harness.posts[0]
        for user in 1...30 { #expect(try await harness.service.perform(.like, post: post, user: Int64(user)).likesCount == Int64(user)) }
        try await harness.service.flush()
        #expect(try await harness.redisCount(post) == 30)
        #expect(try await harness.postgresCounts()[post]?.count == 30)
        await harness.stop()
    }

    @Test(
        "promoting a warm post with many likers to a whole set is logged as it starts and once loaded, with how many", arguments: RedisTarget.allCases
    )
    func largePostLogged(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 2, redis: redis) { configuration in
            configuration.flushOnlyWhenAsked()
            configuration.warmPromotionLookups = 5
        }
        let (large, small) = (harness.posts[0], harness.posts[1])
        let likers = HotSet.largePostLikers
        try await harness.addLikers(likers, to: large)
        // A write turns the large post warm; reads of users it does not know promote it.
        #expect(try await harness.service.perform(.like, post: large, user: Int64(likers) + 1).likesCount == Int64(likers) + 1)
        for user in 1...5 { #expect(try await harness.service.perform(.read, post: large, user: Int64(user)).isLiked) }
        #expect(try await harness.service.perform(.like, post: small, user: 1).likesCount == 1)
        var lines: [String] = []
        for _ in 0..<1_200 {
            lines = harness.log.lines(of: "hydrating_large_post")
            if lines.count >= 2 { break }
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(lines.count == 2)
        #expect(lines.first?.contains("post=\(large)") == true && lines.first?.contains("phase=started") == true)
        #expect(
            lines.last?.contains("phase=loaded") == true && lines.last?.contains("likers=\(likers)") == true
                && lines.last?.contains("promoted_from=warm") == true)
        await harness.stop()
    }

    @Test("a flush request without waiting gets everything acknowledged into PostgreSQL soon after", arguments: RedisTarget.allCases)
    func flushRequestWithoutWaiting(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 3, redis: redis) { $0.flushOnlyWhenAsked() }
        for (offset, post) in harness.posts.enumerated() {
            for user in 1...Int64(offset + 2) { _ = try await harness.service.perform(.like, post: post, user: user) }
        }
        #expect(try await harness.postgresMembers().isEmpty)
        await harness.service.requestFlush()
        // Committed first, then the logs are trimmed and the backlog settled: wait for both.
        var members = try await harness.postgresMembers()
        var pending = await harness.service.stats().reduce(0) { $0 + $1.pendingChanges }
        for _ in 0..<1_200 where members.count < 9 || pending > 0 {
            try await Task.sleep(for: .milliseconds(25))
            members = try await harness.postgresMembers()
            pending = await harness.service.stats().reduce(0) { $0 + $1.pendingChanges }
        }
        #expect(members.count == 2 + 3 + 4)
        #expect(pending == 0)
        await harness.stop()
    }
}
