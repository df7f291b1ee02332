import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import Synchronization
import TestSupport
import Testing

/// The change events' outbox against a real PostgreSQL, each test on a database of its own (the
/// outbox and its clock are one per database, and pruning takes everyone's oldest events).
@Suite("Change events: the outbox written by the flush transaction")
struct LikeEventsTests {
    static func entry(_ log: String, _ ms: UInt64, _ user: Int64, _ post: Int64, _ liked: Bool) -> LoggedLikeChange {
        LoggedLikeChange(
            log: log, slot: HashSlot(key: log.utf8).rawValue, entryID: StreamEntryID(milliseconds: ms, sequence: 0),
            change: LikeChange(userID: user, postID: post, liked: liked))
    }

    /// Every pair's membership as the events tell it (the last event of each pair) against the
    /// `likes` rows: equal when no event lacks its row and no row lacks its event.
    static func agree(_ events: [LikeEvents.Event], pool: PostgresPool) async throws -> Bool {
        var told: [LikePair: Bool] = [:]
        for event in events { told[LikePair(LikeChange(userID: event.userID, postID: event.postID, liked: true))] = event.liked }
        let rows = try await pool.query("SELECT user_id, post_id FROM likes")
        let present = Set(try rows.map { LikePair(LikeChange(userID: try $0.int64(0), postID: try $0.int64(1), liked: true)) })
        return Set(told.filter(\.value).keys) == present
    }

    @Test(
        "an event per row the flush inserts or deletes, with the acknowledgement time; nothing for changes that change no row; nothing with events off"
    )
    func eventsFollowTheRows() async throws {
        try await TestEnvironment.withScratchDatabase { pool, _ in
            _ = try await SchemaMigrator.migrate(pool)
            let post = try await TestEnvironment.createPosts(1, in: pool)[0]
            let log = "log:a"
            let t: UInt64 = 1_764_000_000_000
            _ = try await LikeBatchApplier.apply(
                [
                    Self.entry(log, t, 1, post, true),
                    Self.entry(log, t + 1, 2, post, true),
                    // A like and its unlike inside one batch: no row, no event.
                    Self.entry(log, t + 2, 3, post, true),
                    Self.entry(log, t + 3, 3, post, false),
                    // An unlike of a row that never was: nothing to delete, no event.
                    Self.entry(log, t + 4, 4, post, false),
                ], pool: pool, events: true)
            _ = try await LikeBatchApplier.apply([Self.entry(log, t + 10, 1, post, false)], pool: pool, events: true)
            // A like of a row PostgreSQL has already (the ON CONFLICT path, the row's time moved
            // to the later like's): no change of membership, no event.
            try await pool.query("INSERT INTO likes (user_id, post_id, created_at) VALUES (5, $1, '2020-01-01T00:00:00Z')", [.int64(post)])
            try await pool.query("UPDATE posts SET likes_count = likes_count + 1 WHERE id = $1", [.int64(post)])
            _ = try await LikeBatchApplier.apply(
                [Self.entry(log, t + 20, 5, post, true), Self.entry(log, t + 21, 6, post, true)],
                pool: pool, events: true)
            // Events off: the rows change, no event.
            _ = try await LikeBatchApplier.apply([Self.entry(log, t + 30, 7, post, true)], pool: pool, events: false)

            let events = try await LikeEvents(pool: pool).read(after: 0, limit: 100)
            #expect(events.map(\.id) == [1, 2, 3, 4])
            #expect(events.map(\.userID) == [1, 2, 1, 6])
            #expect(events.map(\.liked) == [true, true, false, true])
            #expect(events.map(\.likedAtMicroseconds) == [t, t + 1, t + 10, t + 21].map { Int64($0) * 1_000 })
            #expect(events.allSatisfy { $0.postID == post })
            #expect(zip(events, events.dropFirst()).allSatisfy { $0.committedAtMicroseconds <= $1.committedAtMicroseconds })
            let movedTime = try await pool.query(
                "SELECT (extract(epoch FROM created_at) * 1000)::bigint FROM likes WHERE user_id = 5 AND post_id = $1",
                [.int64(post)])
            #expect(try movedTime.first?.int64(0) == Int64(t + 20), "the existing row took the later like's time (the ON CONFLICT update ran)")
            let clock = try await LikeEvents(pool: pool).clock()
            #expect(clock == LikeEvents.Clock(lastID: 4, prunedThrough: 0, prunedEvents: 0))
            #expect(try await LikeEvents(pool: pool).read(after: 2, limit: 1).map(\.id) == [3])
            #expect(try await LikeEvents(pool: pool).read(after: 4, limit: 10).isEmpty)
        }
    }

    @Test("a reader following the outbox while eight flushers commit misses no event and sees each post's events in commit order")
    func readerMissesNothingWhileFlushersCommit() async throws {
        try await TestEnvironment.withScratchDatabase { pool, url in
            _ = try await SchemaMigrator.migrate(pool)
            let writers = 8
            let batches = 40
            let posts = try await TestEnvironment.createPosts(writers, in: pool)
            var writersConfiguration = PostgresConfiguration(url: url)
            writersConfiguration.maximumConnections = writers
            let writersPool = PostgresPool(configuration: writersConfiguration)
            // Each writer toggles its post's users 1...5 in turn, one batch of 1-3 changes at a time.
            let writersDone = Mutex(false)
            let writing = Task {
                defer { writersDone.withLock { $0 = true } }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, post) in posts.enumerated() {
                        group.addTask {
                            var liked: Set<Int64> = []
                            var ms: UInt64 = 1_764_000_000_000
                            for batch in 0..<batches {
                                var entries: [LoggedLikeChange] = []
                                for step in 0...(batch % 3) {
                                    let user = Int64((batch + step) % 5 + 1)
                                    let like = !liked.contains(user)
                                    if like { liked.insert(user) } else { liked.remove(user) }
                                    ms += 1
                                    entries.append(Self.entry("log:\(index)", ms, user, post, like))
                                }
                                _ = try await LikeBatchApplier.apply(entries, pool: writersPool, events: true)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            var seen: [LikeEvents.Event] = []
            var after: Int64 = 0
            while true {
                // Done before this read, and the read found nothing more: every event was read.
                let done = writersDone.withLock { $0 }
                let page = try await LikeEvents(pool: pool).read(after: after, limit: 7)
                seen += page
                after = page.last?.id ?? after
                if page.isEmpty {
                    if done { break }
                    try await Task.sleep(for: .milliseconds(1))
                }
            }
            try await writing.value
            seen += try await LikeEvents(pool: pool).read(after: after, limit: 100_000)
            await writersPool.close()

            let all = try await LikeEvents(pool: pool).read(after: 0, limit: 100_000)
            #expect(!all.isEmpty)
            #expect(seen.map(\.id) == all.map(\.id), "the reader saw \(seen.count) of \(all.count) events")
            #expect(all.map(\.id) == Array(1...Int64(all.count)), "ids are dense")
            // Per post, the events alternate like/unlike per user as the writer made them: in
            // acknowledgement order, which is commit order for one post.
            for post in posts {
                let mine = all.filter { $0.postID == post }
                #expect(mine.map(\.likedAtMicroseconds) == mine.map(\.likedAtMicroseconds).sorted())
            }
            #expect(try await Self.agree(all, pool: pool))
        }
    }

    @Test("a flush that makes events waits for the one before it to commit, and gets the ids after its: ids follow commits")
    func idsFollowCommits() async throws {
        try await TestEnvironment.withScratchDatabase { pool, url in
            _ = try await SchemaMigrator.migrate(pool)
            let posts = try await TestEnvironment.createPosts(2, in: pool)
            // A: applied, not committed yet.
            let first = PostgresConnection(configuration: PostgresConfiguration(url: url))
            try await first.query("BEGIN")
            _ = try await first.applyForTest([Self.entry("log:a", 1, 1, posts[0], true), Self.entry("log:a", 2, 2, posts[0], true)])
            // B, on another post and log, must wait for A's commit.
            let second = Task {
                try await LikeBatchApplier.apply([Self.entry("log:b", 1, 3, posts[1], true)], pool: pool, events: true)
            }
            var waiting: Int64 = 0
            for _ in 0..<600 where waiting == 0 {
                try await Task.sleep(for: .milliseconds(50))
                waiting =
                    try await pool.query(
                        """
                        SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
                        """
                    ).first?.int64(0) ?? 0
            }
            #expect(waiting == 1, "B waits for the clock's row")
            #expect(try await LikeEvents(pool: pool).read(after: 0, limit: 10).isEmpty, "nothing is visible before a commit")
            try await first.query("COMMIT")
            _ = try await second.value
            await first.close()
            let events = try await LikeEvents(pool: pool).read(after: 0, limit: 10)
            #expect(events.map(\.id) == [1, 2, 3])
            #expect(events.map(\.userID) == [1, 2, 3], "A's events, committed first, have the first ids")
        }
    }

    @Test("a like's event keeps its milliseconds where the app's likes.created_at keeps whole seconds (Laravel's timestamp(0))")
    func eventTimeIsTheBatchTime() async throws {
        try await TestEnvironment.withScratchDatabase { pool, _ in
            _ = try await SchemaMigrator.migrate(pool)
            try await pool.query("ALTER TABLE likes ALTER COLUMN created_at TYPE timestamp(0) with time zone")
            let post = try await TestEnvironment.createPosts(1, in: pool)[0]
            _ = try await LikeBatchApplier.apply([Self.entry("log:s", 1_764_000_000_123, 1, post, true)], pool: pool, events: true)
            let events = try await LikeEvents(pool: pool).read(after: 0, limit: 10)
            #expect(events.map(\.likedAtMicroseconds) == [1_764_000_000_123_000])
        }
    }

    @Test("pruning deletes the oldest events in bounded batches, stops at the first one young enough, and moves pruned_through")
    func pruningTakesTheOldestPrefix() async throws {
        try await TestEnvironment.withScratchDatabase { pool, _ in
            _ = try await SchemaMigrator.migrate(pool)
            let post = try await TestEnvironment.createPosts(1, in: pool)[0]
            _ = try await LikeBatchApplier.apply(
                (1...25).map { Self.entry("log:p", UInt64($0), Int64($0), post, true) },
                pool: pool, events: true)
            // Events 1-20 but 15 were committed two days ago, the rest now: 16-20 stand for old
            // events after a young one (a clock stepped back), and wait for it, so
            // pruned_through never passes an event that is still there.
            try await pool.query("UPDATE counter_like_events SET committed_at = committed_at - interval '2 days' WHERE id <= 20 AND id <> 15")
            #expect(try await LikeEvents(pool: pool).prune(olderThan: .seconds(86_400), batch: 10) == 10)
            #expect(try await LikeEvents(pool: pool).clock() == LikeEvents.Clock(lastID: 25, prunedThrough: 10, prunedEvents: 10))
            #expect(try await LikeEvents(pool: pool).prune(olderThan: .seconds(86_400), batch: 10) == 4, "11-14: 15 is young")
            #expect(try await LikeEvents(pool: pool).prune(olderThan: .seconds(86_400), batch: 10) == 0)
            #expect(try await LikeEvents(pool: pool).clock() == LikeEvents.Clock(lastID: 25, prunedThrough: 14, prunedEvents: 14))
            #expect(try await LikeEvents(pool: pool).read(after: 0, limit: 100).map(\.id) == Array(15...25))
            let oldest = try #require(try await LikeEvents(pool: pool).oldestCommittedAt())
            let youngest = try await LikeEvents(pool: pool).read(after: 14, limit: 1)[0].committedAtMicroseconds
            #expect(oldest == youngest)
        }
    }
}

extension PostgresConnection {
    /// Applies `entries` with events inside the transaction the caller opened on this connection.
    func applyForTest(_ entries: [LoggedLikeChange]) throws -> LikeBatchOutcome {
        try LikeBatchApplier.apply(entries, on: self, events: true)
    }
}
