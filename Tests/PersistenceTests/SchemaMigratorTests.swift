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
            #expect(tables == ["counter_flush_progress", "counter_nodes", "counter_schema_migrations", "counter_slots", "likes", "posts"])
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
            #expect(try indexes.first?.int64(0) == 3)  // primary key, the app's unique, likes_post_id_index
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
}
