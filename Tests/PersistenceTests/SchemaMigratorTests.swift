import Foundation
import Persistence
import PostgresDriver
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
            let tables = try await pool.query(
                """
                SELECT table_name FROM information_schema.tables
                WHERE table_schema = 'public' ORDER BY table_name
                """
            ).map { $0.string(0)! }
            #expect(
                tables == [
                    "counter_event_clock", "counter_flush_progress", "counter_like_events", "counter_nodes", "counter_schema_migrations",
                    "counter_slots", "likes", "posts", "reaction_counts", "reactions",
                ])
            let unique = try await pool.query(
                """
                SELECT count(*) FROM pg_indexes WHERE tablename = 'likes' AND indexdef LIKE '%UNIQUE%(user_id, post_id)%'
                """)
            #expect(try unique.first?.int64(0) ?? 0 >= 1)
        }
    }

    @Test("a database where the app already created posts (without likes_count) keeps its rows and gains the column")
    func existingAppTables() async throws {
        try await Self.withScratchDatabase { pool in
            try await pool.withConnection { connection in
                try await connection.runScript(
                    """
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
                try await connection.runScript(
                    """
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
                try LikeBatchApplier.apply(
                    [
                        LikeChange(userID: 7, postID: 1, liked: true),
                        LikeChange(userID: 8, postID: 1, liked: true),
                    ], on: connection)
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

    /// The query of the backend building an index concurrently, and whether it waits on a lock.
    static func concurrentBuild(in pool: PostgresPool) async throws -> (query: String, waitsOnLock: Bool)? {
        let rows = try await pool.query(
            """
            SELECT query, coalesce(wait_event_type, '') = 'Lock' FROM pg_stat_activity
            WHERE datname = current_database() AND query LIKE 'CREATE INDEX CONCURRENTLY%' AND pid <> pg_backend_pid()
            """)
        guard let row = rows.first else { return nil }
        return (row.string(0) ?? "", try row.bool(1))
    }

    @Test(
        "the newest-first indexes of likes are built CONCURRENTLY: a flusher batch commits while each builds; progress says what happens",
        arguments: [(5, "likes_post_id_created_at_index"), (6, "likes_user_id_created_at_index")])
    func indexBuildsWhileWritesGoOn(version: Int, index: String) async throws {
        try await Self.withScratchDatabase { pool in
            _ = try await SchemaMigrator.migrate(pool)
            // An existing table with rows, as an upgrade finds it: the new index not there yet.
            try await pool.query("INSERT INTO posts (id) SELECT generate_series(1, 100)")
            try await pool.query(
                """
                INSERT INTO likes (user_id, post_id, created_at, updated_at)
                SELECT u, p, now(), now() FROM generate_series(1, 100) p, generate_series(1, 40) u
                """)
            try await pool.query("UPDATE posts SET likes_count = 40")
            try await pool.query("DROP INDEX \(index)")
            try await pool.query("DELETE FROM counter_schema_migrations WHERE version = \(version)")

            // A flusher batch in flight as the build starts: its transaction has written likes and
            // stays open until the test ends it. A concurrent build waits for it before it
            // starts, and meanwhile takes no lock that keeps other writers out. A plain CREATE
            // INDEX would wait for it too, but its queued lock would hold every later write
            // to likes until the batch ended and the index was built — no write could commit.
            let release = Gate()
            defer { release.open() }
            let inFlight = Task {
                try await pool.withConnection { connection in
                    try await connection.query("BEGIN")
                    try await connection.query("INSERT INTO likes (user_id, post_id, created_at, updated_at) VALUES (9999, 100, now(), now())")
                    try await connection.query("UPDATE posts SET likes_count = likes_count + 1 WHERE id = 100")
                    await release.wait()
                    try await connection.query("COMMIT")
                }
            }
            // The batch has written (it waits at the gate) before the migration starts.
            for _ in 0..<1_500 where release.arrived == 0 { try await Task.sleep(for: .milliseconds(20)) }
            #expect(release.arrived == 1, "the batch held open never wrote")

            let progress = OrderLog()
            let migration = Task { try await SchemaMigrator.migrate(pool, progress: { progress.append($0) }) }
            // Wait (up to 60 s) until the build waits for the batch.
            var build: (query: String, waitsOnLock: Bool)?
            for _ in 0..<3_000 {
                build = try await Self.concurrentBuild(in: pool)
                if build?.waitsOnLock == true { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(
                build?.waitsOnLock == true,
                "no concurrent build waited for the open batch: \(String(describing: build)); progress \(progress.entries)")

            // Another batch (another slot's flusher) commits while the build still waits, within 30 s.
            let writes = OrderLog()
            let write = Task {
                _ = try await LikeBatchApplier.apply((1...20).map { LikeChange(userID: 10_000, postID: Int64($0), liked: true) }, pool: pool)
                writes.append("committed")
            }
            for _ in 0..<1_500 where writes.entries.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
            let committed = !writes.entries.isEmpty
            let stillBuilding = try await Self.concurrentBuild(in: pool)
            #expect(committed, "a batch written during the build did not commit within 30 s")
            #expect(
                stillBuilding?.query.contains(index) == true,
                "the build of \(index) ended before the write committed: \(String(describing: stillBuilding))")

            release.open()
            try await inFlight.value
            try await write.value
            let report = try await migration.value
            #expect(report.applied == [version])
            let messages = progress.entries
            #expect(messages.count == 2, "\(messages)")
            #expect(
                messages.first?.hasPrefix("building index \(index) ON ") == true && messages.first?.contains("CONCURRENTLY") == true
                    && messages.first?.contains(" rows; writes to likes go on meanwhile") == true, "\(messages)")
            #expect(messages.last?.hasPrefix("built index \(index) in ") == true, "\(messages)")
            let valid = try await pool.query(
                """
                SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1
                """, [.text(index)])
            #expect(try valid.map { try $0.bool(0) } == [true])
            // Counts still equal rows.
            let drift = try await pool.query(
                """
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
            let progress = OrderLog()
            let report = try await SchemaMigrator.migrate(pool, progress: { progress.append($0) })
            #expect(report.applied == [5])
            #expect(progress.entries.first == "dropping the invalid index likes_post_id_created_at_index an interrupted build left")
            let index = try await pool.query(
                """
                SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE c.relname = 'likes_post_id_created_at_index'
                """)
            #expect(try index.first?.bool(0) == true)
            #expect(index.first?.string(1)?.hasSuffix("(post_id, created_at DESC, user_id)") == true, "\(index.first?.string(1) ?? "")")
        }
    }
}
