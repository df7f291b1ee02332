import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import TestSupport
import Testing

@Suite("Batch apply against a real PostgreSQL")
struct LikeBatchApplierTests {
    /// `change` as the entry `ms`-0 of `log`.
    static func logged(_ log: String, _ ms: UInt64, _ change: LikeChange) -> LoggedLikeChange {
        LoggedLikeChange(log: log, slot: HashSlot(key: log.utf8).rawValue, entryID: StreamEntryID(milliseconds: ms, sequence: 0), change: change)
    }

    /// The count of `likes` rows and `likes_count` for each post.
    static func counts(_ posts: [Int64], _ pool: PostgresPool) async throws -> [Int64: (rows: Int64, count: Int64)] {
        let rows = try await pool.query(
            """
            SELECT p.id, (SELECT count(*) FROM likes l WHERE l.post_id = p.id), p.likes_count
            FROM posts p WHERE p.id = ANY($1::bigint[])
            """, [.int64Array(posts)])
        var result: [Int64: (rows: Int64, count: Int64)] = [:]
        for row in rows { result[try row.int64(0)] = (try row.int64(1), try row.int64(2)) }
        return result
    }

    static func members(_ posts: [Int64], _ pool: PostgresPool) async throws -> Set<LikeChange> {
        let rows = try await pool.query("SELECT user_id, post_id FROM likes WHERE post_id = ANY($1::bigint[])", [.int64Array(posts)])
        return Set(try rows.map { LikeChange(userID: try $0.int64(0), postID: try $0.int64(1), liked: true) })
    }

    @Test("10,000 changes with duplicates leave likes_count equal to the likes rows of every post, and a replay changes nothing")
    func tenThousandChanges() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let posts = try await TestEnvironment.createPosts(20, in: pool)
        var generator = SystemRandomNumberGenerator()
        // 10,000 changes over 20 posts and 800 users: many pairs appear several times in the batch.
        let changes = (0..<10_000).map { _ in
            LikeChange(
                userID: Int64.random(in: 1...800, using: &generator),
                postID: posts.randomElement(using: &generator)!,
                liked: Bool.random(using: &generator))
        }
        // The model: the last change per pair wins.
        var expected: [LikeChange: Bool] = [:]
        for change in changes { expected[LikeChange(userID: change.userID, postID: change.postID, liked: true)] = change.liked }
        let expectedMembers = Set(expected.filter(\.value).keys)
        #expect(expected.count < changes.count, "the batch must hold duplicates")

        let outcome = try await LikeBatchApplier.apply(changes, pool: pool)
        #expect(outcome.coalescedChanges == expected.count)
        #expect(outcome.missingPosts.isEmpty)
        #expect(try await Self.members(posts, pool) == expectedMembers)
        let after = try await Self.counts(posts, pool)
        for post in posts {
            let state = try #require(after[post])
            #expect(state.rows == state.count, "post \(post): \(state.rows) rows, likes_count \(state.count)")
            #expect(state.count == Int64(expectedMembers.filter { $0.postID == post }.count))
            #expect((outcome.movements[post]?.delta ?? 0) == state.count)
            if let movement = outcome.movements[post] { #expect(movement.likesCount == state.count) }
        }

        let replay = try await LikeBatchApplier.apply(changes, pool: pool)
        #expect(replay.movements.isEmpty)
        #expect(try await Self.members(posts, pool) == expectedMembers)
        let afterReplay = try await Self.counts(posts, pool)
        for post in posts { #expect(afterReplay[post]?.count == after[post]?.count) }
        await pool.close()
    }

    @Test("the last change of a pair wins, and likes/unlikes of existing state move nothing")
    func lastChangeWins() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let post = try await TestEnvironment.createPosts(1, in: pool)[0]
        let first = try await pool.withTransaction { connection in
            try LikeBatchApplier.apply(
                [
                    LikeChange(userID: 1, postID: post, liked: true),
                    LikeChange(userID: 1, postID: post, liked: false),
                    LikeChange(userID: 2, postID: post, liked: false),
                    LikeChange(userID: 2, postID: post, liked: true),
                    LikeChange(userID: 3, postID: post, liked: false),
                ], on: connection)
        }
        #expect(first.movements[post] == .init(delta: 1, likesCount: 1))
        let second = try await pool.withTransaction { connection in
            try LikeBatchApplier.apply(
                [
                    LikeChange(userID: 2, postID: post, liked: true), // already liked
                    LikeChange(userID: 4, postID: post, liked: false), // never liked
                ], on: connection)
        }
        #expect(second.movements.isEmpty)
        #expect(try await Self.members([post], pool) == [LikeChange(userID: 2, postID: post, liked: true)])
        await pool.close()
    }

    @Test("changes to a post missing from posts are reported and skipped; the rest of the batch is applied")
    func missingPost() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let posts = try await TestEnvironment.createPosts(2, in: pool)
        try await pool.query("DELETE FROM posts WHERE id = $1", [.int64(posts[1])])
        let outcome = try await pool.withTransaction { connection in
            try LikeBatchApplier.apply(
                [
                    LikeChange(userID: 10, postID: posts[0], liked: true),
                    LikeChange(userID: 11, postID: posts[1], liked: true),
                    LikeChange(userID: 12, postID: posts[1], liked: true),
                    LikeChange(userID: 12, postID: posts[1], liked: false),
                ], on: connection)
        }
        #expect(outcome.missingPosts == [posts[1]: 2])
        #expect(outcome.movements[posts[0]] == .init(delta: 1, likesCount: 1))
        let orphans = try await pool.query("SELECT count(*) FROM likes WHERE post_id = $1", [.int64(posts[1])])
        #expect(try orphans.first?.int64(0) == 0)
        await pool.close()
    }

    @Test("logged batches record progress in the same transaction; re-reading the log applies nothing twice")
    func progressMakesReplaySafe() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let post = try await TestEnvironment.createPosts(1, in: pool)[0]
        let log = TestEnvironment.uniqueKeyPrefix("log")
        func entry(_ ms: UInt64, _ user: Int64, _ liked: Bool) -> LoggedLikeChange {
            Self.logged(log, ms, LikeChange(userID: user, postID: post, liked: liked))
        }
        let batch = [entry(100, 1, true), entry(101, 2, true)]
        let first = try await LikeBatchApplier.apply(batch, pool: pool)
        #expect(first.movements[post]?.likesCount == 2)
        #expect(try await LikeBatchApplier.progress(of: log, pool: pool) == StreamEntryID(milliseconds: 101, sequence: 0))

        // Between the first batch and a later unlike of user 1, a crash made the flusher re-read
        // from the start: the old entries are skipped, so user 1's unlike is not undone.
        let second = try await LikeBatchApplier.apply([entry(102, 1, false)], pool: pool)
        #expect(second.movements[post]?.likesCount == 1)
        let reread = try await LikeBatchApplier.apply(batch + [entry(102, 1, false), entry(103, 3, true)], pool: pool)
        #expect(reread.alreadyApplied == 3)
        #expect(reread.movements[post] == .init(delta: 1, likesCount: 2))
        #expect(reread.appliedThrough == [log: StreamEntryID(milliseconds: 103, sequence: 0)])
        let all = try await LikeBatchApplier.apply(batch, pool: pool)
        #expect(all.alreadyApplied == 2)
        #expect(all.movements.isEmpty)
        #expect(try await Self.members([post], pool).map(\.userID).sorted() == [2, 3])
        await pool.close()
    }

    @Test(
        "a flush of a log waits for one under way on the same log and applies only what that one did not; the progress counts each change once"
    )
    func concurrentFlushOfOneLog() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let post = try await TestEnvironment.createPosts(1, in: pool)[0]
        let log = TestEnvironment.uniqueKeyPrefix("log")
        func entry(_ ms: UInt64, _ user: Int64) -> LoggedLikeChange {
            Self.logged(log, ms, LikeChange(userID: user, postID: post, liked: true))
        }
        let firstEntries = [entry(100, 1), entry(101, 2), entry(102, 3)]
        let applied = Arrivals()
        let first = Task {
            try await pool.withTransaction { connection in
                let outcome = try LikeBatchApplier.apply(firstEntries, on: connection)
                applied.arrive()
                // Held open until the second flush waits for this one's lock on the log's progress.
                let deadline = ContinuousClock.now + .seconds(30)
                while ContinuousClock.now < deadline {
                    // A transaction sees one snapshot of the server's activity unless told to drop it.
                    try connection.query("SELECT pg_stat_clear_snapshot()")
                    let waiting = try connection.query(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%counter_flush_progress%'")
                    if try waiting.first?.int64(0) ?? 0 > 0 { return (outcome, true) }
                }
                return (outcome, false)
            }
        }
        await applied.waitFor(1)
        let second = try await LikeBatchApplier.apply(firstEntries + [entry(103, 4)], pool: pool)
        let (firstOutcome, secondWaited) = try await first.value
        #expect(secondWaited, "the second flush never waited for the first one's lock")
        #expect(firstOutcome.movements[post] == .init(delta: 3, likesCount: 3))
        #expect(second.alreadyApplied == 3)
        #expect(second.movements[post] == .init(delta: 1, likesCount: 4))
        #expect(second.appliedThrough == [log: StreamEntryID(milliseconds: 103, sequence: 0)])
        let progress = try await pool.query(
            "SELECT applied_changes, applied_batches, last_entry_ms FROM counter_flush_progress WHERE log = $1", [.text(log)])
        #expect(try progress.first?.int64(0) == 4)
        #expect(try progress.first?.int64(1) == 2)
        #expect(try progress.first?.int64(2) == 103)
        // A re-read of all of it moves nothing, counts nothing.
        let again = try await LikeBatchApplier.apply(firstEntries + [entry(103, 4)], pool: pool)
        #expect(again.alreadyApplied == 4 && again.movements.isEmpty)
        let after = try await pool.query("SELECT applied_changes, applied_batches FROM counter_flush_progress WHERE log = $1", [.text(log)])
        #expect(try after.first?.int64(0) == 4 && after.first?.int64(1) == 2)
        // A re-read with a new entry after the applied ones: only the new one is applied and counted.
        let more = try await LikeBatchApplier.apply(firstEntries + [entry(103, 4), entry(104, 5)], pool: pool)
        #expect(more.alreadyApplied == 4 && more.movements[post] == .init(delta: 1, likesCount: 5))
        let last = try await pool.query("SELECT applied_changes, applied_batches FROM counter_flush_progress WHERE log = $1", [.text(log)])
        #expect(try last.first?.int64(0) == 5 && last.first?.int64(1) == 3)
        await pool.close()
    }

    @Test(
        "a like's row keeps when it was acknowledged: its log entry's time, or its own (a replayed change); an unlogged batch takes the transaction's time"
    )
    func rowsKeepTheAcknowledgementTime() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let post = try await TestEnvironment.createPosts(1, in: pool)[0]
        let log = TestEnvironment.uniqueKeyPrefix("log")
        let entryTime: UInt64 = 1_733_300_000_123
        let replayedTime: Int64 = 1_700_000_000_456
        func entry(_ ms: UInt64, _ change: LikeChange) -> LoggedLikeChange { Self.logged(log, ms, change) }
        // Applied long after both were acknowledged (as after a PostgreSQL outage).
        _ = try await LikeBatchApplier.apply(
            [
                entry(entryTime, LikeChange(userID: 1, postID: post, liked: true)),
                entry(entryTime + 1, LikeChange(userID: 2, postID: post, liked: true, acknowledgedAt: replayedTime)),
                // A like and its unlike: the pair's last change wins, its row goes (no time needed).
                entry(entryTime + 2, LikeChange(userID: 3, postID: post, liked: true)),
                entry(entryTime + 3, LikeChange(userID: 3, postID: post, liked: false)),
            ], pool: pool)
        _ = try await LikeBatchApplier.apply([LikeChange(userID: 4, postID: post, liked: true)], pool: pool)
        let rows = Array(
            try await pool.query(
                """
                SELECT user_id, (extract(epoch FROM created_at) * 1000)::bigint, created_at = updated_at,
                       abs(extract(epoch FROM now() - created_at)) < 60
                FROM likes WHERE post_id = $1 ORDER BY user_id
                """, [.int64(post)]))
        #expect(try rows.map { try $0.int64(0) } == [1, 2, 4])
        #expect(try rows[0].int64(1) == Int64(entryTime))
        #expect(try rows[1].int64(1) == replayedTime)
        #expect(try rows.allSatisfy { try $0.bool(2) })
        #expect(try rows[2].bool(3), "an unlogged change's row is made now")
        await pool.close()
    }

    @Test(
        "a batch meeting existing rows (the ON CONFLICT path) counts only the rows it inserts; a like again takes its later time, never an earlier one"
    )
    func conflictPathCountsInsertsOnly() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let post = try await TestEnvironment.createPosts(1, in: pool)[0]
        let early: Int64 = 1_700_000_000_000
        let middle: Int64 = 1_700_000_500_000
        let late: Int64 = 1_700_001_000_000
        // Rows PostgreSQL has: user 1 liked early, user 2 late, user 3 with no time (made by
        // hand), user 6 whose unlike comes.
        try await pool.query(
            """
            INSERT INTO likes (user_id, post_id, created_at, updated_at) VALUES
                (1, $1, 'epoch'::timestamptz + $2 * interval '1 millisecond', now()),
                (2, $1, 'epoch'::timestamptz + $3 * interval '1 millisecond', now()),
                (3, $1, NULL, NULL),
                (6, $1, now(), now())
            """, [.int64(post), .int64(early), .int64(late)])
        try await pool.query("UPDATE posts SET likes_count = 4 WHERE id = $1", [.int64(post)])
        let outcome = try await LikeBatchApplier.apply(
            [
                LikeChange(userID: 1, postID: post, liked: true, acknowledgedAt: middle),
                LikeChange(userID: 2, postID: post, liked: true, acknowledgedAt: middle),
                LikeChange(userID: 3, postID: post, liked: true, acknowledgedAt: middle),
                LikeChange(userID: 5, postID: post, liked: true, acknowledgedAt: middle),
                LikeChange(userID: 7, postID: post, liked: true, acknowledgedAt: middle),
                LikeChange(userID: 6, postID: post, liked: false, acknowledgedAt: middle),
            ], pool: pool)
        #expect(outcome.movements[post] == .init(delta: 1, likesCount: 5), "two rows inserted, one deleted; the three liked again move nothing")
        let counts = try await Self.counts([post], pool)
        #expect(counts[post]?.rows == 5 && counts[post]?.count == 5)
        let rows = Array(
            try await pool.query(
                "SELECT user_id, (extract(epoch FROM created_at) * 1000)::bigint FROM likes WHERE post_id = $1 ORDER BY user_id",
                [.int64(post)]))
        #expect(try rows.map { try $0.int64(0) } == [1, 2, 3, 5, 7])
        #expect(
            try rows.map { try $0.int64(1) } == [middle, late, middle, middle, middle],
            "user 1's like again is later: its time; user 2's row is later already: kept; user 3's row had none")
        await pool.close()
    }

    @Test("the audit table records every entry applied; applying one twice fails the transaction")
    func auditCatchesDoubleApply() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let post = try await TestEnvironment.createPosts(1, in: pool)[0]
        let log = TestEnvironment.uniqueKeyPrefix("audited")
        let audit = try await AuditTable.create(log, in: pool)
        let entries = (1...3).map { user in
            LoggedLikeChange(
                log: log, slot: HashSlot(key: log.utf8).rawValue, entryID: StreamEntryID(milliseconds: 10, sequence: UInt64(user)),
                change: LikeChange(userID: Int64(user), postID: post, liked: true))
        }
        _ = try await pool.withTransaction { try LikeBatchApplier.apply(entries, on: $0, audit: audit.flushAudit) }
        // Read again: skipped by the recorded progress, so not audited again.
        let again = try await pool.withTransaction { try LikeBatchApplier.apply(entries, on: $0, audit: audit.flushAudit) }
        #expect(again.alreadyApplied == 3)
        #expect(try await pool.query("SELECT count(*) FROM \(audit.name)").first?.int64(0) == 3)
        // Were the progress lost, the audit refuses the second application.
        try await pool.query("DELETE FROM counter_flush_progress WHERE log = $1", [.text(log)])
        await #expect(throws: PostgresError.self) {
            _ = try await pool.withTransaction { try LikeBatchApplier.apply(entries, on: $0, audit: audit.flushAudit) }
        }
        #expect(try await Self.members([post], pool).count == 3)
        await #expect(throws: PostgresError.self) {
            _ = try await pool.withTransaction {
                try LikeBatchApplier.apply(entries, on: $0, audit: try AuditTable(name: "x; DROP TABLE likes").flushAudit)
            }
        }
        try await pool.query("DROP TABLE \(audit.name)")
        await pool.close()
    }

    @Test(
        "bad batches are refused before anything is sent",
        arguments: [
            ([LikeChange](), "empty batch"),
            ([LikeChange(userID: 0, postID: 1, liked: true)], "positive"),
            ([LikeChange(userID: 1, postID: -5, liked: true)], "positive"),
            ([LikeChange(userID: 1, postID: 1, liked: true), LikeChange(userID: Int64.min, postID: 1, liked: false)], "change 1"),
        ])
    func badInput(changes: [LikeChange], expectedText: String) async throws {
        let pool = PostgresPool(configuration: TestEnvironment.postgres())
        let error = await #expect(throws: PostgresError.self) {
            try await LikeBatchApplier.apply(changes, pool: pool)
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains(expectedText) == true)
    }

    @Test("an oversized batch is refused with the limit in the message")
    func oversized() async throws {
        let changes = [LikeChange](
            repeating: LikeChange(userID: 1, postID: 1, liked: true),
            count: LikeBatchApplier.maximumBatchSize + 1)
        let pool = PostgresPool(configuration: TestEnvironment.postgres())
        let error = await #expect(throws: PostgresError.self) {
            try await LikeBatchApplier.apply(changes, pool: pool)
        }
        #expect(error?.message.contains("exceeds the limit") == true)
    }
}

@Suite("Batch apply across several logs")
struct MultiLogBatchTests {
    @Test("entries of several logs apply together; each log's progress is its own")
    func severalLogs() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let posts = try await TestEnvironment.createPosts(2, in: pool)
        let logA = TestEnvironment.uniqueKeyPrefix("logA")
        let logB = TestEnvironment.uniqueKeyPrefix("logB")
        func entry(_ log: String, _ ms: UInt64, _ post: Int64, _ user: Int64, _ liked: Bool) -> LoggedLikeChange {
            LikeBatchApplierTests.logged(log, ms, LikeChange(userID: user, postID: post, liked: liked))
        }
        let first = try await LikeBatchApplier.apply([entry(logA, 10, posts[0], 1, true), entry(logB, 5, posts[1], 1, true)], pool: pool)
        #expect(first.appliedThrough == [logA: StreamEntryID(milliseconds: 10, sequence: 0), logB: StreamEntryID(milliseconds: 5, sequence: 0)])
        // Log A's entry 10 is old; log B's entry 6 is new even though 6 < 10.
        let second = try await LikeBatchApplier.apply([entry(logA, 10, posts[0], 1, true), entry(logB, 6, posts[1], 2, true)], pool: pool)
        #expect(second.alreadyApplied == 1)
        #expect(second.movements[posts[1]] == .init(delta: 1, likesCount: 2))
        #expect(second.movements[posts[0]] == nil)
        await pool.close()
    }
}
