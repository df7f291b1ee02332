import CounterCore
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import TestSupport
import Testing

/// The flush's statement for batches with kinds other than `like`: `reactions` rows and
/// `reaction_counts` beside `likes` and `likes_count`, exact and idempotent, with one event per
/// change (one per switch of kinds in the `one`-per-user model).
@Suite("Batch apply of reactions against a real PostgreSQL")
struct ReactionBatchApplierTests {
    static let love = ReactionKind("love")!
    static let haha = ReactionKind("haha")!

    /// A pool on the reaction tests' own database (`TestEnvironment.reactionsDatabase`).
    static func pool() async throws -> PostgresPool {
        PostgresPool(configuration: PostgresConfiguration(url: try await TestEnvironment.reactionsDatabase()))
    }

    /// Per post and kind, the rows held and the count kept (`like`: `likes` and `likes_count`).
    static func tallies(_ posts: [Int64], _ pool: PostgresPool) async throws -> [PostKind: (rows: Int64, count: Int64)] {
        try await ReactionTallies.of(posts, in: pool)
    }

    /// Every (user, post, kind) held on `posts`.
    static func held(_ posts: [Int64], _ pool: PostgresPool) async throws -> Set<ReactionKey> {
        let rows = try await pool.query(
            """
            SELECT user_id, post_id, 'like' FROM likes WHERE post_id = ANY($1::bigint[])
            UNION ALL SELECT user_id, post_id, kind FROM reactions WHERE post_id = ANY($1::bigint[])
            """, [.int64Array(posts)])
        return Set(try rows.map { ReactionKey(userID: try $0.int64(0), postID: try $0.int64(1), kind: ReactionKind($0.string(2) ?? "")!) })
    }

    /// The events of `posts`, in id order: (user, post, kind, liked, replaced kind).
    static func events(_ posts: [Int64], _ pool: PostgresPool) async throws -> [String] {
        let rows = try await pool.query(
            """
            SELECT user_id, post_id, coalesce(kind, 'like'), liked, coalesce(replaced_kind, '-')
            FROM counter_like_events WHERE post_id = ANY($1::bigint[]) ORDER BY id
            """, [.int64Array(posts)])
        return try rows.map { "\(try $0.int64(0)) \(try $0.int64(1)) \($0.string(2)!) \(try $0.bool(3)) \($0.string(4)!)" }
    }

    @Test("10,000 changes of three kinds with duplicates: each kind's count equals its rows, a replay changes nothing, one event per row changed")
    func manyKinds() async throws {
        let pool = try await Self.pool()
        let posts = try await TestEnvironment.createPosts(10, in: pool)
        var generator = SystemRandomNumberGenerator()
        let kinds: [ReactionKind] = [.like, Self.love, Self.haha]
        let changes = (0..<10_000).map { _ in
            LikeChange(
                userID: Int64.random(in: 1...300, using: &generator), postID: posts.randomElement(using: &generator)!,
                kind: kinds.randomElement(using: &generator)!, liked: Bool.random(using: &generator))
        }
        var expected: [ReactionKey: Bool] = [:]
        for change in changes { expected[ReactionKey(change)] = change.liked }
        let wanted = Set(expected.filter(\.value).keys)

        let outcome = try await LikeBatchApplier.apply(changes, pool: pool, events: true)
        #expect(outcome.coalescedChanges == expected.count)
        #expect(try await Self.held(posts, pool) == wanted)
        let tallies = try await Self.tallies(posts, pool)
        for post in posts {
            for kind in kinds {
                let tally = tallies[PostKind(postID: post, kind: kind)] ?? (0, 0)
                let members = Int64(wanted.filter { $0.postID == post && $0.kind == kind }.count)
                #expect(tally.rows == members && tally.count == members, "post \(post) \(kind): \(tally)")
                let moved = kind.isLike ? outcome.movements[post]?.delta : outcome.reactionMovements[PostKind(postID: post, kind: kind)]?.delta
                #expect((moved ?? 0) == members)
            }
        }
        #expect(try await Self.events(posts, pool).count == wanted.count, "one event per row inserted (none existed before)")

        let replay = try await LikeBatchApplier.apply(changes, pool: pool, events: true)
        #expect(replay.movements.isEmpty && replay.reactionMovements.isEmpty)
        #expect(try await Self.held(posts, pool) == wanted)
        #expect(try await Self.events(posts, pool).count == wanted.count, "a replay changes no row, so makes no event")
        await pool.close()
    }

    @Test("a switch of kinds in the one-per-user model is one event naming the kind replaced (like included); counts move by one each")
    func switchIsOneEvent() async throws {
        let pool = try await Self.pool()
        let posts = try await TestEnvironment.createPosts(1, in: pool)
        let post = posts[0]
        _ = try await LikeBatchApplier.apply([LikeChange(userID: 7, postID: post, liked: true)], pool: pool, events: true, oneKindPerUser: true)
        // like → love, in one entry: the like's end and the love.
        _ = try await LikeBatchApplier.apply(
            [LikeChange(userID: 7, postID: post, liked: false), LikeChange(userID: 7, postID: post, kind: Self.love, liked: true)],
            pool: pool, events: true, oneKindPerUser: true)
        #expect(try await Self.held(posts, pool) == [ReactionKey(userID: 7, postID: post, kind: Self.love)])
        // love → haha, then haha taken back.
        _ = try await LikeBatchApplier.apply(
            [LikeChange(userID: 7, postID: post, kind: Self.love, liked: false), LikeChange(userID: 7, postID: post, kind: Self.haha, liked: true)],
            pool: pool, events: true, oneKindPerUser: true)
        _ = try await LikeBatchApplier.apply(
            [LikeChange(userID: 7, postID: post, kind: Self.haha, liked: false)], pool: pool, events: true, oneKindPerUser: true)
        #expect(try await Self.held(posts, pool).isEmpty)
        #expect(
            try await Self.events(posts, pool) == [
                "7 \(post) like true -", "7 \(post) love true like", "7 \(post) haha true love", "7 \(post) haha false -",
            ])
        let tallies = try await Self.tallies(posts, pool)
        for kind in [ReactionKind.like, Self.love, Self.haha] {
            let tally = tallies[PostKind(postID: post, kind: kind)] ?? (0, 0)
            #expect(tally.rows == 0 && tally.count == 0, "\(kind): \(tally)")
        }
        // Without the one-per-user model the same switch is two events.
        _ = try await LikeBatchApplier.apply([LikeChange(userID: 8, postID: post, kind: Self.love, liked: true)], pool: pool, events: true)
        _ = try await LikeBatchApplier.apply(
            [LikeChange(userID: 8, postID: post, kind: Self.love, liked: false), LikeChange(userID: 8, postID: post, kind: Self.haha, liked: true)],
            pool: pool, events: true)
        #expect(try await Self.events(posts, pool).suffix(2).sorted() == ["8 \(post) haha true -", "8 \(post) love false -"])
        await pool.close()
    }

    @Test("a reaction whose row exists already moves no count and makes no event, and takes the later time; a missing post is reported")
    func existingRowsAndMissingPosts() async throws {
        let pool = try await Self.pool()
        let posts = try await TestEnvironment.createPosts(1, in: pool)
        let post = posts[0]
        try await pool.query(
            "INSERT INTO reactions (user_id, post_id, kind, created_at, updated_at) VALUES (5, $1, 'love', 'epoch', 'epoch')", [.int64(post)])
        let missingPost = post + 1_000_000_007
        let outcome = try await LikeBatchApplier.apply(
            [
                LikeChange(userID: 5, postID: post, kind: Self.love, liked: true, acknowledgedAt: 1_700_000_000_000),
                LikeChange(userID: 6, postID: post, kind: Self.love, liked: true, acknowledgedAt: 1_700_000_000_000),
                LikeChange(userID: 6, postID: missingPost, kind: Self.love, liked: true),
            ], pool: pool, events: true)
        #expect(outcome.missingPosts == [missingPost: 1])
        #expect(outcome.reactionMovements[PostKind(postID: post, kind: Self.love)]?.delta == 1, "only user 6's row is new")
        let rows = try await pool.query(
            "SELECT user_id, (extract(epoch FROM created_at) * 1000)::bigint FROM reactions WHERE post_id = $1 ORDER BY user_id",
            [.int64(post)])
        #expect(try rows.map { [try $0.int64(0), try $0.int64(1)] } == [[5, 1_700_000_000_000], [6, 1_700_000_000_000]])
        #expect(try await Self.events(posts, pool) == ["6 \(post) love true -"])
        // The count started from the row made by hand, which no count knew: reconcile's job.
        #expect(try await Self.tallies(posts, pool)[PostKind(postID: post, kind: Self.love)].map { [$0.rows, $0.count] } == [2, 1])
        await pool.close()
    }

    @Test("a refused change takes its pair's other kinds with it: a switch is applied whole or not at all")
    func refusedSwitchStaysWhole() async throws {
        try await TestEnvironment.withScratchDatabase { pool, _ in
            _ = try await SchemaMigrator.migrate(pool)
            try await pool.withConnection { connection in
                try await connection.runScript(
                    """
                    CREATE FUNCTION refuse_banned() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        IF NEW.user_id = 666 THEN RAISE EXCEPTION 'user 666 is banned'; END IF;
                        RETURN NEW;
                    END $$;
                    CREATE TRIGGER refuse_banned BEFORE INSERT ON reactions FOR EACH ROW EXECUTE FUNCTION refuse_banned();
                    INSERT INTO posts (id) SELECT generate_series(1, 4);
                    INSERT INTO likes (user_id, post_id) VALUES (666, 2);
                    UPDATE posts SET likes_count = 1 WHERE id = 2;
                    """)
            }
            var changes: [LikeChange] = []
            for user: Int64 in 1...40 { changes.append(LikeChange(userID: user, postID: Int64(user % 4 + 1), kind: Self.love, liked: true)) }
            // User 666 switches like → love on post 2: the love is refused, so the like stays.
            changes.append(LikeChange(userID: 666, postID: 2, liked: false))
            changes.append(LikeChange(userID: 666, postID: 2, kind: Self.love, liked: true))
            let batch = changes
            let outcome = try await pool.withTransaction { connection in
                try LikeBatchApplier.apply(batch, on: connection, isolatingRefusals: true, events: true, oneKindPerUser: true)
            }
            #expect(Set(outcome.rejected.map(\.change)) == Set(changes.suffix(2)))
            #expect(outcome.rejected.allSatisfy { $0.sqlState == "P0001" })
            let held = try await Self.held([1, 2, 3, 4], pool)
            #expect(held.contains(ReactionKey(userID: 666, postID: 2, kind: .like)))
            #expect(!held.contains(ReactionKey(userID: 666, postID: 2, kind: Self.love)))
            #expect(held.count == 41)
            for (key, tally) in try await Self.tallies([1, 2, 3, 4], pool) { #expect(tally.rows == tally.count, "\(key): \(tally)") }
        }
    }

    @Test("pair boundaries: a split never parts one pair's kinds")
    func pairBoundaries() {
        func changes(_ pairs: [(Int64, Int64)]) -> [LikeChange] { pairs.map { LikeChange(userID: $0.1, postID: $0.0, liked: true) } }
        #expect(LikeBatchApplier.pairBoundary(nearMiddleOf: changes([(1, 1)])) == nil)
        #expect(LikeBatchApplier.pairBoundary(nearMiddleOf: changes([(1, 1), (1, 1)])) == nil)
        #expect(LikeBatchApplier.pairBoundary(nearMiddleOf: changes([(1, 1), (1, 2)])) == 1)
        #expect(LikeBatchApplier.pairBoundary(nearMiddleOf: changes([(1, 1), (1, 2), (1, 2), (1, 2)])) == 1)
        #expect(LikeBatchApplier.pairBoundary(nearMiddleOf: changes([(1, 1), (1, 1), (1, 1), (1, 2)])) == 3)
        #expect(LikeBatchApplier.pairBoundary(nearMiddleOf: changes([(1, 1), (1, 2), (2, 1), (2, 2)])) == 2)
    }
}
