import CounterCore
import NodeTestSupport
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import TestSupport
import Testing

@testable import WritePath

/// Reactions through the write path, on real Redis and PostgreSQL: decisions per kind, the
/// `one`-per-user switch as one step, each kind's count equal to its rows after a flush, the
/// tiers (hot, warm, cold) with other kinds, a restart with changes pending.
@Suite("Reactions through the write path against real Redis and PostgreSQL")
struct ReactionWritePathTests {
    static let six = ["like", "love", "haha", "wow", "sad", "angry"].map { ReactionKind($0)! }
    static let love = ReactionKind("love")!
    static let haha = ReactionKind("haha")!

    /// Per post and kind, (rows, count) in PostgreSQL.
    static func tallies(_ harness: WritePathHarness, _ posts: [Int64]) async throws -> [PostKind: (rows: Int64, count: Int64)] {
        try await ReactionTallies.of(posts, in: harness.pool)
    }

    /// Every (user → kinds) PostgreSQL holds of `post`.
    static func held(_ harness: WritePathHarness, _ post: Int64) async throws -> [Int64: [ReactionKind]] {
        let rows = try await harness.pool.query(
            "SELECT user_id, 'like' FROM likes WHERE post_id = $1 UNION ALL SELECT user_id, kind FROM reactions WHERE post_id = $1",
            [.int64(post)])
        var held: [Int64: [ReactionKind]] = [:]
        for row in rows { held[try row.int64(0), default: []].append(ReactionKind(row.string(1)!)!) }
        return held.mapValues { $0.sorted() }
    }

    static func expectCountsEqualRows(_ harness: WritePathHarness, _ posts: [Int64], sourceLocation: SourceLocation = #_sourceLocation)
        async throws
    {
        for (key, tally) in try await tallies(harness, posts) {
            #expect(
                tally.rows == tally.count, "post \(key.postID) \(key.kind): \(tally.rows) rows, count \(tally.count)", sourceLocation: sourceLocation)
        }
    }

    @Test(
        "a one-per-user storm on one hot post: no answer shows two kinds, each user ends with the kind of its last answer, counts equal rows per kind",
        arguments: RedisTarget.allCases)
    func onePerUserStorm(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase(), redis: redis) {
            configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .one)
        }
        let post = harness.posts[0]
        let users: [Int64] = Array(1...64)
        // Every user switches kinds as fast as it can: its own requests one after another, all
        // users at once.
        let lastAnswers = try await withThrowingTaskGroup(of: (Int64, LikeState, Int).self) { group in
            for user in users {
                group.addTask {
                    var generator = SystemRandomNumberGenerator()
                    var last: LikeState?
                    var twoKinds = 0
                    for _ in 0..<40 {
                        let kind = Self.six.randomElement(using: &generator)!
                        let operation: LikeOperation = [.toggle, .like, .toggle].randomElement(using: &generator)!
                        let answer = try await harness.service.perform(operation, post: post, user: user, kind: kind)
                        if (answer.reactions?.mine.count ?? 0) > 1 { twoKinds += 1 }
                        last = answer
                    }
                    return (user, last!, twoKinds)
                }
            }
            return try await group.reduce(into: [(Int64, LikeState, Int)]()) { $0.append($1) }
        }
        #expect(lastAnswers.reduce(0) { $0 + $1.2 } == 0, "answers showed a user with two kinds")
        // Redis's view now: each user's kinds as its last answer said.
        for (user, answer, _) in lastAnswers {
            let read = try await harness.service.perform(.read, post: post, user: user)
            #expect(read.reactions?.mine == answer.reactions?.mine, "user \(user)")
        }
        let summary = try #require(try await harness.service.perform(.count, post: post, user: 0).reactions)
        try await harness.service.flush()
        let held = try await Self.held(harness, post)
        #expect(held.values.allSatisfy { $0.count == 1 }, "a user holds two kinds in PostgreSQL")
        for (user, answer, _) in lastAnswers {
            #expect((held[user] ?? []) == (answer.reactions?.mine ?? []), "user \(user)")
        }
        let tallies = try await Self.tallies(harness, [post])
        for kind in Self.six {
            let tally = tallies[PostKind(postID: post, kind: kind)] ?? (0, 0)
            #expect(tally.rows == tally.count && tally.count == summary.count(of: kind), "\(kind): \(tally), Redis \(summary.count(of: kind))")
        }
        #expect(summary.total == Int64(held.count))
        await harness.stop()
    }

    @Test(
        "many per user: each kind its own toggle; a restart with changes pending keeps them; the flush writes each kind's rows",
        arguments: RedisTarget.allCases)
    func manyPerUserAcrossRestart(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase(), redis: redis) {
            configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .many)
            configuration.flushOnlyWhenAsked()
        }
        let post = harness.posts[0]
        _ = try await harness.service.perform(.toggle, post: post, user: 1, kind: Self.love)
        _ = try await harness.service.perform(.like, post: post, user: 1, kind: Self.haha)
        let third = try await harness.service.perform(.toggle, post: post, user: 1)
        #expect(third.isLiked && third.likesCount == 1)
        #expect(third.reactions?.mine == [Self.haha, .like, Self.love])
        #expect(third.reactions?.total == 3)
        let again = try await harness.service.perform(.like, post: post, user: 1, kind: Self.haha)
        #expect(again.reactions == third.reactions, "adding a kind held changes nothing")
        let second = try await harness.service.perform(.toggle, post: post, user: 2, kind: Self.love)
        #expect(second.reactions?.counts.first == ReactionSummary.KindCount(kind: Self.love, count: 2))
        #expect(second.reactions?.mine == [Self.love])
        let removed = try await harness.service.perform(.unlike, post: post, user: 1, kind: Self.haha)
        #expect(removed.reactions?.mine == [.like, Self.love] && removed.reactions?.total == 3)

        await harness.stopService(drain: false)
        let restarted = try await harness.restarted()
        let read = try await restarted.service.perform(.read, post: post, user: 1)
        #expect(read.reactions?.mine == [.like, Self.love] && read.reactions?.count(of: Self.love) == 2 && read.likesCount == 1)
        try await restarted.service.flush()
        #expect(try await Self.held(restarted, post) == [1: [.like, Self.love], 2: [Self.love]])
        try await Self.expectCountsEqualRows(restarted, [post])
        await restarted.stop()
    }

    @Test(
        "a cold post is read from its rows, loaded whole by its first write (likes and other kinds), and the open set's cap refuses a kind too many, changing nothing",
        arguments: RedisTarget.allCases)
    func coldPostAndCap(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase(), redis: redis) {
            configuration in
            configuration.reactions = ReactionModel(kinds: .open, perUser: .one, kindsPerPost: 3)
        }
        let post = harness.posts[0]
        try await harness.pool.query(
            """
            INSERT INTO likes (user_id, post_id) VALUES (1, $1), (2, $1);
            """.replacingOccurrences(of: "$1", with: String(post)))
        try await harness.pool.query(
            "INSERT INTO reactions (user_id, post_id, kind) VALUES (3, $1, 'love'), (4, $1, 'love'), (5, $1, 'tada')", [.int64(post)])
        try await harness.pool.query("UPDATE posts SET likes_count = 2 WHERE id = $1", [.int64(post)])
        try await harness.pool.query(
            "INSERT INTO reaction_counts (post_id, kind, count) VALUES ($1, 'love', 2), ($1, 'tada', 1)", [.int64(post)])

        let cold = try await harness.service.perform(.read, post: post, user: 3)
        #expect(cold.reactions?.mine == [Self.love] && cold.reactions?.total == 5 && cold.likesCount == 2)
        #expect(try await !harness.isHot(post), "a read loads nothing")
        // The post holds like, love and tada: a fourth kind is refused, and nothing changes.
        let refused = await #expect(throws: CounterError.self) {
            _ = try await harness.service.perform(.toggle, post: post, user: 9, kind: ReactionKind("wow")!)
        }
        #expect(refused?.code == .tooManyKinds)
        // User 5, tada's only holder, switches to wow: tada goes, so wow fits.
        let switched = try await harness.service.perform(.toggle, post: post, user: 5, kind: ReactionKind("wow")!)
        #expect(switched.reactions?.mine == [ReactionKind("wow")!])
        #expect(switched.reactions?.counts.map(\.kind.name) == ["like", "love", "wow"])
        #expect(try await harness.isHot(post), "the first write loaded the post")
        // Loaded whole: a user the write did not touch is known to Redis.
        let other = try await harness.service.perform(.read, post: post, user: 4)
        #expect(other.reactions?.mine == [Self.love])
        try await harness.service.flush()
        #expect(try await Self.held(harness, post) == [1: [.like], 2: [.like], 3: [Self.love], 4: [Self.love], 5: [ReactionKind("wow")!]])
        try await Self.expectCountsEqualRows(harness, [post])
        await harness.stop()
    }

    @Test(
        "a large cold post with other kinds turns warm on its first write: the hash carries each seen user's kinds, the others are looked up; exact after a restart, a flush and an eviction",
        arguments: RedisTarget.allCases)
    func warmPostWithReactions(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase(), redis: redis) {
            configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .one)
            configuration.warmThreshold = 100
            configuration.flushOnlyWhenAsked()
            configuration.hotIdle = nil
        }
        let post = harness.posts[0]
        try await harness.addLikers(150, to: post)
        try await harness.pool.query(
            "INSERT INTO reactions (user_id, post_id, kind) SELECT g, $1, 'love' FROM generate_series(1001, 1040) g", [.int64(post)])
        try await harness.pool.query("INSERT INTO reaction_counts (post_id, kind, count) VALUES ($1, 'love', 40)", [.int64(post)])

        // User 1 likes the post; switching to haha replaces the like.
        let first = try await harness.service.perform(.toggle, post: post, user: 1, kind: Self.haha)
        #expect(first.reactions?.mine == [Self.haha] && first.likesCount == 149 && first.reactions?.count(of: Self.haha) == 1)
        let marker = try await harness.redis.pipeline([.get(harness.layout.hydratedMarker(ofPost: post))], slot: HashSlot(post: post))
        #expect(marker.first?.string == "warm")
        // A user the hash does not know is looked up, kinds and all.
        let lover = try await harness.service.perform(.toggle, post: post, user: 1001, kind: Self.haha)
        #expect(lover.reactions?.mine == [Self.haha] && lover.reactions?.count(of: Self.love) == 39)
        #expect(try await harness.service.perform(.read, post: post, user: 1002).reactions?.mine == [Self.love])

        await harness.stopService(drain: false)
        let restarted = try await harness.restarted()
        let read = try await restarted.service.perform(.read, post: post, user: 1)
        #expect(read.reactions?.mine == [Self.haha] && read.reactions?.count(of: Self.haha) == 2 && read.likesCount == 149)
        try await restarted.service.flush()
        try await Self.expectCountsEqualRows(restarted, [post])
        let held = try await Self.held(restarted, post)
        #expect(held[1] == [Self.haha] && held[1001] == [Self.haha] && held[1002] == [Self.love])
        await restarted.stopService()

        let evicting = try await harness.restarted { $0.hotIdle = .milliseconds(200) }
        let evicted = try await evicting.waitUntilEvicted(post)
        let report = evicted ? "" : await evicting.flushReport()
        #expect(evicted, "the warm post was not evicted: \(report)")
        let cold = try await evicting.service.perform(.read, post: post, user: 1001)
        #expect(cold.reactions?.mine == [Self.haha] && cold.reactions?.count(of: Self.love) == 39 && cold.likesCount == 149)
        await evicting.stop()
    }

    @Test(
        "a cold post of few likes and many other kinds turns warm on its first write, as all its reactions together are past the threshold: no like or reaction is lost from its answers",
        arguments: RedisTarget.allCases)
    func fewLikesManyReactionsTurnsWarm(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase(), redis: redis) {
            configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .many)
            configuration.warmThreshold = 20
            configuration.flushOnlyWhenAsked()
        }
        let post = harness.posts[0]
        // 5 likes (below the threshold alone) and 30 loves: 35 reactions, past it.
        try await harness.addLikers(5, to: post)
        try await harness.pool.query(
            "INSERT INTO reactions (user_id, post_id, kind) SELECT g, $1, 'love' FROM generate_series(1001, 1030) g", [.int64(post)])
        try await harness.pool.query("INSERT INTO reaction_counts (post_id, kind, count) VALUES ($1, 'love', 30)", [.int64(post)])

        let first = try await harness.service.perform(.toggle, post: post, user: 2001, kind: Self.haha)
        #expect(first.likesCount == 5 && first.reactions?.count(of: Self.love) == 30 && first.reactions?.total == 36, "\(first)")
        let marker = try await harness.redis.pipeline([.get(harness.layout.hydratedMarker(ofPost: post))], slot: HashSlot(post: post))
        #expect(marker.first?.string == "warm", "the post's rows did not all come back: it cannot be hot")
        // Users the write did not touch are looked up, not taken for users without reactions.
        #expect(try await harness.service.perform(.read, post: post, user: 1005).reactions?.mine == [Self.love])
        #expect(try await harness.service.perform(.read, post: post, user: 1).isLiked, "users 1 to 5 like it")
        let next = try await harness.service.perform(.toggle, post: post, user: 1006, kind: .like)
        #expect(next.likesCount == 6 && next.reactions?.count(of: Self.love) == 30, "\(next)")
        try await harness.service.flush()
        try await Self.expectCountsEqualRows(harness, [post])
        await harness.stop()
    }

    @Test(
        "a warm post with other kinds, busy with users Redis does not know, is promoted: its likers and each user's kinds loaded whole, the warm hash laid over them, checked against each kind's count; then every answer comes from Redis and equals the rows",
        arguments: RedisTarget.allCases)
    func warmPostWithReactionsPromoted(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase(), redis: redis) {
            configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .many)
            configuration.warmThreshold = 100
            configuration.warmPromotionLookups = 20
            configuration.hydrationPageSize = 25
            configuration.hotIdle = nil
        }
        let post = harness.posts[0]
        let layout = harness.layout
        try await harness.addLikers(150, to: post)
        try await harness.pool.query(
            """
            INSERT INTO reactions (user_id, post_id, kind) SELECT g, $1::bigint, 'love' FROM generate_series(1001, 1060) g
            UNION ALL SELECT g, $1::bigint, 'haha' FROM generate_series(1001, 1020) g
            """, [.int64(post)])
        try await harness.pool.query("INSERT INTO reaction_counts (post_id, kind, count) VALUES ($1, 'love', 60), ($1, 'haha', 20)", [.int64(post)])
        // Turned warm by its first write; then users it does not know, read and written.
        _ = try await harness.service.perform(.like, post: post, user: 2001, kind: Self.haha)
        for user in Int64(1001)...1030 {
            let read = try await harness.service.perform(.read, post: post, user: user)
            #expect(read.reactions?.mine == (user <= 1020 ? [Self.haha, Self.love] : [Self.love]))
            if user % 3 == 0 { _ = try await harness.service.perform(.unlike, post: post, user: user, kind: Self.love) }
        }
        var marker: String?
        for _ in 0..<300 {
            marker = try await harness.redis.send(.get(layout.hydratedMarker(ofPost: post)), slot: HashSlot(post: post)).string
            if marker == "1" { break }
            _ = try await harness.service.perform(.toggle, post: post, user: 5_000, kind: ReactionKind("wow")!)
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(marker == "1", "not promoted: \(harness.log.lines(of: "hydrating_large_post"))")
        #expect(await harness.service.stats().reduce(0) { $0 + $1.promotedPosts } == 1)
        // Hot now: a user never seen is answered from Redis's hash, as its rows say.
        #expect(try await harness.service.perform(.read, post: post, user: 1050).reactions?.mine == [Self.love])
        #expect(try await harness.service.perform(.read, post: post, user: 1010).reactions?.mine == [Self.haha, Self.love])
        try await harness.service.flush()
        // Redis's kinds of every user and counts are the rows'.
        let rows = try await Self.held(harness, post)
        let replies = try await harness.redis.pipeline(
            [.hgetall(layout.reactions(ofPost: post)), .hgetall(layout.reactionCounts(ofPost: post))], slot: HashSlot(post: post))
        var redisKinds: [Int64: [ReactionKind]] = [:]
        let items = replies[0].array ?? []
        for index in stride(from: 0, to: items.count, by: 2) {
            redisKinds[Int64(items[index].string ?? "")!] = ReactionValues.kinds(Array((items[index + 1].string ?? "").utf8))
        }
        #expect(redisKinds == rows.compactMapValues { kinds in kinds.filter { !$0.isLike }.nilIfEmpty }, "Redis's kinds are the rows'")
        let counts = ReactionValues.counts(replies[1]) ?? [:]
        #expect(counts[Self.love] == 50 && counts[Self.haha] == 21, "\(counts)")
        try await Self.expectCountsEqualRows(harness, [post])
        await harness.stop()
    }

    @Test(
        "a promotion with other kinds is published all or nothing: the warm hash's kinds laid over the loaded ones, refused (MISMATCH, nothing changed) when the kinds then held are not each kind's count, else the post's hash of kinds replaced",
        arguments: RedisTarget.allCases)
    func promotionPublicationWithReactions(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 1, redis: redis)
        let post = harness.posts[0]
        let slot = HashSlot(post: post)
        let layout = harness.layout
        let loading = layout.loadingLikers(ofPost: post, attempt: 1)
        let loadingKinds = layout.loadingReactions(ofPost: post, attempt: 1)
        func publish(attempt: UInt64) async throws -> RedisReply {
            try await harness.redis.execute([
                PostHydration.publishing(
                    post: post, loading: layout.loadingLikers(ofPost: post, attempt: attempt),
                    loadingReactions: layout.loadingReactions(ofPost: post, attempt: attempt), loaded: 2, epoch: nil, layout: layout)
            ]).first!.get()[0]
        }
        // Warm: users 1 and 2 like it (loaded), 3 loved it (loaded); since it turned warm, 3
        // switched to haha and 4 liked it and loves it. Counts: love 1, haha 1 — but the loaded
        // kinds miss user 5's love, which the counts say is there.
        _ = try await harness.redis.pipeline(
            [
                .set(layout.hydratedMarker(ofPost: post), "warm"),
                .hset(layout.warmMembers(ofPost: post), [("n", Int64(3)), (Int64(3), "0:haha"), (Int64(4), "1:love")]),
                .sadd(loading, [Int64(1), Int64(2)]), .hset(loadingKinds, [(Int64(3), "love")]),
                .hset(layout.reactionCounts(ofPost: post), [("love", Int64(2)), ("haha", Int64(1))]),
            ], slot: slot)
        let refused = try await publish(attempt: 1)
        guard case .error(let text) = refused else {
            Issue.record("a promotion missing a user's kind was published: \(refused)")
            return
        }
        #expect(text.hasPrefix("MISMATCH"), "\(text)")
        let kept = try await harness.redis.pipeline(
            [.get(layout.hydratedMarker(ofPost: post)), .exists([layout.warmMembers(ofPost: post)]), .exists([layout.reactions(ofPost: post)])],
            slot: slot)
        #expect(kept[0].string == "warm" && kept[1].integer == 1 && kept[2].integer == 0, "nothing changed")
        // A new attempt (a refused one's loading keys are discarded) with user 5's love loaded: published.
        let again = layout.loadingReactions(ofPost: post, attempt: 2)
        _ = try await harness.redis.pipeline(
            [
                .del([loading, loadingKinds]), .sadd(layout.loadingLikers(ofPost: post, attempt: 2), [Int64(1), Int64(2)]),
                .hset(again, [(Int64(3), "love"), (Int64(5), "love")]),
            ], slot: slot)
        let published = try await publish(attempt: 2)
        #expect(published.string == "OK", "\(published)")
        let after = try await harness.redis.pipeline(
            [
                .get(layout.hydratedMarker(ofPost: post)), RedisCommand("SMEMBERS", layout.likers(ofPost: post)),
                .hgetall(layout.reactions(ofPost: post)), .exists([again, layout.warmMembers(ofPost: post)]),
            ], slot: slot)
        #expect(after[0].string == "1")
        #expect(Set((after[1].array ?? []).compactMap(\.integer)) == [1, 2, 4])
        let items = after[2].array ?? []
        var kinds: [String: String] = [:]
        for index in stride(from: 0, to: items.count, by: 2) { kinds[items[index].string ?? ""] = items[index + 1].string }
        #expect(kinds == ["3": "haha", "4": "love", "5": "love"])
        #expect(after[3].integer == 0, "the loading hash and the warm hash are gone")
        await harness.stop()
    }

    @Test("a kind the deployment does not list is refused before any I/O; a deployment of likes only answers without a summary")
    func unknownKinds() async throws {
        let harness = try await WritePathHarness.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase(), redis: .single) {
            configuration in
            configuration.reactions = ReactionModel(kinds: .fixed(Self.six), perUser: .many)
        }
        let post = harness.posts[0]
        do {
            _ = try await harness.service.perform(.toggle, post: post, user: 1, kind: ReactionKind("tada")!)
            Issue.record("an unlisted kind was accepted")
        } catch let error as CounterError {
            #expect(error.code == .unknownKind)
        }
        #expect(try await harness.service.perform(.count, post: post, user: 0).reactions?.total == 0)
        await harness.stop()
        let plain = try await WritePathHarness.start(posts: 1, postgresURL: try await TestEnvironment.reactionsDatabase(), redis: .single)
        let answer = try await plain.service.perform(.toggle, post: plain.posts[0], user: 1)
        #expect(answer == LikeState(postID: plain.posts[0], userID: 1, isLiked: true, likesCount: 1))
        #expect(answer.reactions == nil)
        do {
            _ = try await plain.service.perform(.toggle, post: plain.posts[0], user: 1, kind: Self.love)
            Issue.record("a deployment of likes only accepted another kind")
        } catch let error as CounterError {
            #expect(error.code == .unknownKind)
        }
        await plain.stop()
    }
}

extension Array {
    /// `nil` when empty.
    fileprivate var nilIfEmpty: Self? { isEmpty ? nil : self }
}
