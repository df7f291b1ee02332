import Foundation
import Persistence
import TestSupport
import Testing

/// Each test gets a database of its own, created and dropped around it.
@Suite("Schema migrations on real databases")
struct SchemaMigratorTests {
    static func withScratchDatabase(_ body: (PostgresPool) async throws -> Void) async throws {
        try await TestEnvironment.withScratchDatabase { pool, _ in try await body(pool) }
    }

    @Test("an empty database gets every version; a second run applies nothing")
    func freshThenIdempotent() async throws {
        try await Self.withScratchDatabase { pool in
            let first = try await SchemaMigrator.migrate(pool)
            #expect(first.applied == SchemaMigration.all.map(\.version))
            #expect(first.currentVersion == SchemaMigration.all.last!.version)
            let second = try await SchemaMigrator.migrate(pool)
            #expect(second.applied.isEmpty)
            #expect(second.currentVersion == first.currentVersion)
            let tables = try await pool.query("""
                SELECT table_name FROM information_schema.tables
                WHERE table_schema = 'public' ORDER BY table_name
                """).map { $0.string(0)! }
            #expect(tables == ["counter_event_clock", "counter_flush_progress", "counter_like_events", "counter_nodes", "counter_schema_migrations", "counter_slots", "likes", "posts"])
            let unique = try await pool.query("""
                SELECT count(*) FROM pg_indexes WHERE tablename = 'likes' AND indexdef LIKE '%UNIQUE%(user_id, post_id)%'
                """)
            #expect(try unique.first?.int64(0) ?? 0 >= 1)
        }
    }

    @Test("a database where the app already created posts (without likes_count) keeps its rows and gains the column")
    func existingAppTables() async throws {
        try await Self.withScratchDatabase { pool in
            try await pool.withConnection { connection in
                try await connection.runScript("""
                    CREATE TABLE posts (id bigserial PRIMARY KEY, title text NOT NULL, created_at timestamptz, updated_at timestamptz);
                    INSERT INTO posts (title) VALUES ('first'), ('second');
                    """)
            }
            let report = try await SchemaMigrator.migrate(pool)
            #expect(report.applied == SchemaMigration.all.map(\.version))
            let rows = try await pool.query("SELECT id, title, likes_count FROM posts ORDER BY id")
            #expect(rows.map { $0.string(1) } == ["first", "second"])
            #expect(try rows.map { try $0.int64(2) } == [0, 0])
            // The batch apply works on the app's table.
            let outcome = try await pool.withTransaction { connection in
                try LikeBatchApplier.apply([LikeChange(userID: 7, postID: 1, liked: true)], on: connection)
            }
            #expect(outcome.movements[1]?.likesCount == 1)
        }
    }

    @Test("an app's likes table with Laravel's unique index is used as it is")
    func existingLaravelLikes() async throws {
        try await Self.withScratchDatabase { pool in
            try await pool.withConnection { connection in
                try await connection.runScript("""
                    CREATE TABLE posts (id bigserial PRIMARY KEY, likes_count integer NOT NULL DEFAULT 0);
                    CREATE TABLE likes (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                        created_at timestamp(0), updated_at timestamp(0));
                    ALTER TABLE likes ADD CONSTRAINT likes_user_id_post_id_unique UNIQUE (user_id, post_id);
                    INSERT INTO posts DEFAULT VALUES;
                    """)
            }
            _ = try await SchemaMigrator.migrate(pool)
            let indexes = try await pool.query("SELECT count(*) FROM pg_indexes WHERE tablename = 'likes'")
            // The primary key, the app's unique and the two newest-first ones (likes_post_id_index
            // made by version 1 and dropped by version 7: the first of those covers it).
            #expect(try indexes.first?.int64(0) == 4)
            let outcome = try await pool.withTransaction { connection in
                try LikeBatchApplier.apply([LikeChange(userID: 7, postID: 1, liked: true),
                                            LikeChange(userID: 8, postID: 1, liked: true)], on: connection)
            }
            #expect(outcome.movements[1]?.likesCount == 2)
        }
    }

    @Test("a database at a newer version than this build knows is refused")
    func newerDatabase() async throws {
        try await Self.withScratchDatabase { pool in
            _ = try await SchemaMigrator.migrate(pool)
            try await pool.query("INSERT INTO counter_schema_migrations (version, name) VALUES (999, 'from the future')")
            let error = await #expect(throws: PostgresError.self) { try await SchemaMigrator.migrate(pool) }
            #expect(error?.message.contains("newer than this build knows") == true)
        }
    }

    @Test("two migrations racing on one database both succeed and apply each version once")
    func concurrentMigrations() async throws {
        try await Self.withScratchDatabase { pool in
            async let first = SchemaMigrator.migrate(pool)
            async let second = SchemaMigrator.migrate(pool)
            let reports = try await [first, second]
            #expect(reports.flatMap(\.applied).sorted() == SchemaMigration.all.map(\.version))
        }
    }

    /// Messages `migrate` reported, with when.
    final class Progress: @unchecked Sendable {
        private let lock = NSLock()
        private var messages: [(Date, String)] = []
        func add(_ message: String) { lock.withLock { messages.append((Date(), message)) } }
        var all: [(Date, String)] { lock.withLock { messages } }
    }

    /// Batches written while the migration ran: when each began and committed.
    final class Writes: @unchecked Sendable {
        private let lock = NSLock()
        private var spans: [(began: Date, committed: Date)] = []
        func add(began: Date, committed: Date) { lock.withLock { spans.append((began, committed)) } }
        var all: [(began: Date, committed: Date)] { lock.withLock { spans } }
    }

    @Test("the newest-first indexes of likes are built CONCURRENTLY: the flusher's writes commit while they build; progress says what happens")
    func indexesBuildWhileWritesGoOn() async throws {
        try await Self.withScratchDatabase { pool in
            _ = try await SchemaMigrator.migrate(pool)
            // An existing table with rows, as an upgrade finds it: the new indexes not there yet.
            try await pool.query("INSERT INTO posts (id) SELECT generate_series(1, 1000)")
            try await pool.query("""
                INSERT INTO likes (user_id, post_id, created_at, updated_at)
                SELECT u, p, now(), now() FROM generate_series(1, 1000) p, generate_series(1, 400) u
                """)
            try await pool.query("UPDATE posts SET likes_count = 400")
            try await pool.query("DROP INDEX likes_post_id_created_at_index, likes_user_id_created_at_index")
            try await pool.query("DELETE FROM counter_schema_migrations WHERE version IN (5, 6)")

            let migrated = Progress()
            let writes = Writes()
            // Four writers, so that a slow machine still has writes in flight throughout. Each
            // writes its own posts, as each slot's flusher does (two batches updating the same
            // posts' counts in different orders could deadlock).
            let writers = (0..<4).map { writer in
                Task {
                    var user = Int64(1_000)
                    while migrated.all.isEmpty {
                        user += 1
                        let changes = (1...20).map { LikeChange(userID: user, postID: Int64($0 * 37 + writer), liked: true) }
                        let began = Date()
                        _ = try await LikeBatchApplier.apply(changes, pool: pool)
                        writes.add(began: began, committed: Date())
                    }
                }
            }
            let progress = Progress()
            let report = try await SchemaMigrator.migrate(pool, progress: { progress.add($0) })
            migrated.add("done")
            for writer in writers { try await writer.value }
            #expect(report.applied == [5, 6])
            let messages = progress.all
            let starts = messages.filter { $0.1.hasPrefix("building index") }
            let ends = messages.filter { $0.1.hasPrefix("built index") }
            #expect(starts.count == 2 && ends.count == 2, "\(messages.map(\.1))")
            #expect(starts.allSatisfy { $0.1.contains("CONCURRENTLY") && $0.1.contains(" rows; writes to likes go on meanwhile") }, "\(messages.map(\.1))")
            // A write that began after a build started and committed before it ended: a plain
            // CREATE INDEX holds every such write until it ends, so there would be none. Here
            // (2 cores) 51–101 batches commit in 0.19–0.34 s of building; on a loaded CI
            // machine as few as 3 in 0.46 s, so the test asks for whole writes, not a rate.
            for (start, end) in zip(starts, ends) {
                let all = writes.all
                let inside = all.filter { $0.began > start.0 && $0.committed < end.0 }.count
                let during = all.filter { $0.committed > start.0 && $0.committed < end.0 }.count
                #expect(inside >= 1, "\(inside) writes began and committed (\(during) committed) during \(start.1) (\(end.0.timeIntervalSince(start.0)) s)")
            }
            let valid = try await pool.query("""
                SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE c.relname IN ('likes_post_id_created_at_index', 'likes_user_id_created_at_index') ORDER BY 1
                """)
            #expect(try valid.map { "\($0.string(0)!) \(try $0.bool(1))" } == ["likes_post_id_created_at_index true", "likes_user_id_created_at_index true"])
            // Counts still equal rows.
            let drift = try await pool.query("""
                SELECT count(*) FROM posts p WHERE likes_count <> (SELECT count(*) FROM likes l WHERE l.post_id = p.id)
                """)
            #expect(try drift.first?.int64(0) == 0)
        }
    }

    @Test("an invalid index an interrupted build left is dropped and built again with its definition")
    func invalidIndexRebuilt() async throws {
        try await Self.withScratchDatabase { pool in
            _ = try await SchemaMigrator.migrate(pool)
            try await pool.query("INSERT INTO posts (id) VALUES (1)")
            try await pool.query("INSERT INTO likes (user_id, post_id) VALUES (1, 1), (2, 1)")
            try await pool.query("DROP INDEX likes_post_id_created_at_index")
            try await pool.query("DELETE FROM counter_schema_migrations WHERE version = 5")
            // A concurrent build that fails (here: a duplicate) leaves an invalid index behind.
            await #expect(throws: PostgresError.self) {
                try await pool.query("CREATE UNIQUE INDEX CONCURRENTLY likes_post_id_created_at_index ON likes (post_id)")
            }
            let progress = Progress()
            let report = try await SchemaMigrator.migrate(pool, progress: { progress.add($0) })
            #expect(report.applied == [5])
            #expect(progress.all.first?.1 == "dropping the invalid index likes_post_id_created_at_index an interrupted build left")
            let index = try await pool.query("""
                SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE c.relname = 'likes_post_id_created_at_index'
                """)
            #expect(try index.first?.bool(0) == true)
            #expect(index.first?.string(1)?.hasSuffix("(post_id, created_at DESC, user_id)") == true, "\(index.first?.string(1) ?? "")")
        }
    }
}
