import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import TestSupport
import Testing

/// Changes PostgreSQL refuses on their own — an app's trigger, a check constraint — are isolated
/// inside the batch's transaction; the rest of the batch is applied. Each test has a database of
/// its own: a trigger on the shared `likes` table would reach every other test.
@Suite("Batch apply: refused changes are isolated")
struct RefusedChangesTests {
    /// A trigger that raises for user 666 (`P0001`), one that raises a serialization failure
    /// (`40001`, transient) for user 888, and a check constraint that refuses user 777 (`23514`).
    static let appRules = """
        CREATE FUNCTION refuse_banned() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF COALESCE(NEW.user_id, OLD.user_id) = 666 THEN RAISE EXCEPTION 'user 666 is banned'; END IF;
            IF COALESCE(NEW.user_id, OLD.user_id) = 888 THEN RAISE EXCEPTION 'try again' USING ERRCODE = '40001'; END IF;
            RETURN COALESCE(NEW, OLD);
        END $$;
        CREATE TRIGGER refuse_banned BEFORE INSERT OR DELETE ON likes FOR EACH ROW EXECUTE FUNCTION refuse_banned();
        ALTER TABLE likes ADD CONSTRAINT no_777 CHECK (user_id <> 777);
        INSERT INTO posts (id) SELECT generate_series(1, 4);
        """

    static func withAppRules(_ body: (PostgresPool) async throws -> Void) async throws {
        try await TestEnvironment.withScratchDatabase { pool, _ in
            _ = try await SchemaMigrator.migrate(pool)
            try await pool.withConnection { connection in try await connection.runScript(appRules) }
            try await body(pool)
        }
    }

    static func entry(_ log: String, _ ms: UInt64, _ user: Int64, _ post: Int64, _ liked: Bool) -> LoggedLikeChange {
        LoggedLikeChange(
            log: log, slot: HashSlot(key: log.utf8).rawValue, entryID: StreamEntryID(milliseconds: ms, sequence: 0),
            change: LikeChange(userID: user, postID: post, liked: liked))
    }

    @Test("SQLSTATE classes: transient ones are retried, the others refuse what the statement carries")
    func classes() {
        for state in ["08006", "25P02", "40001", "40P01", "53100", "55P03", "57014", "57P01", "58030", "XX000"] {
            let error = PostgresError(code: .server, message: "m", sqlState: state)
            #expect(error.isRetryable && !error.isRefusal, "\(state)")
        }
        for state in ["P0001", "23505", "23503", "23514", "22003", "42501", "42P01", "2F005", "0A000"] {
            let error = PostgresError(code: .server, message: "m", sqlState: state)
            #expect(error.isRefusal && !error.isRetryable, "\(state)")
        }
        #expect(!PostgresError(code: .connectionLost, message: "m").isRefusal)
        #expect(!PostgresError(code: .server, message: "m").isRefusal, "no SQLSTATE: nothing known to bisect on")
    }

    @Test("a batch with refused changes among 400: exactly those come back with SQLSTATE and message; the rest is applied; progress moves past all")
    func isolated() async throws {
        try await Self.withAppRules { pool in
            var entries: [LoggedLikeChange] = []
            var wanted: Set<LikeChange> = []
            for index in 0..<400 {
                let user = Int64(1 + index % 100)
                let post = Int64(1 + index / 100)
                entries.append(Self.entry("log-a", UInt64(1 + index), user, post, true))
                wanted.insert(LikeChange(userID: user, postID: post, liked: true))
            }
            // User 666 likes posts 1 and 3, and unlikes post 1 first (its last change wins);
            // user 777 likes post 2. A second log carries one of them.
            entries.append(Self.entry("log-a", 1_000, 666, 1, false))
            entries.append(Self.entry("log-a", 1_001, 666, 1, true))
            entries.append(Self.entry("log-a", 1_002, 777, 2, true))
            entries.append(Self.entry("log-b", 5, 666, 3, true))
            let batch = entries
            let outcome = try await pool.withTransaction { connection in
                try LikeBatchApplier.apply(batch, on: connection, isolatingRefusals: true)
            }
            let refused = outcome.rejected.sorted { ($0.change.userID, $0.change.postID) < ($1.change.userID, $1.change.postID) }
            // Each refused change carries when it was acknowledged: its entry's time.
            #expect(
                refused.map(\.change) == [
                    LikeChange(userID: 666, postID: 1, liked: true, acknowledgedAt: 1_001),
                    LikeChange(userID: 666, postID: 3, liked: true, acknowledgedAt: 5),
                    LikeChange(userID: 777, postID: 2, liked: true, acknowledgedAt: 1_002),
                ])
            #expect(refused.map(\.sqlState) == ["P0001", "P0001", "23514"])
            #expect(refused[0].message == "user 666 is banned")
            #expect(refused[2].message.contains("no_777"))
            let rows = try await pool.query("SELECT user_id, post_id FROM likes")
            #expect(Set(try rows.map { LikeChange(userID: try $0.int64(0), postID: try $0.int64(1), liked: true) }) == wanted)
            let counts = try await pool.query("SELECT id, likes_count FROM posts ORDER BY id")
            #expect(try counts.map { try $0.int64(1) } == [100, 100, 100, 100])
            #expect(outcome.movements.mapValues(\.delta) == [1: 100, 2: 100, 3: 100, 4: 100])
            #expect(
                outcome.appliedThrough == [
                    "log-a": StreamEntryID(milliseconds: 1_002, sequence: 0), "log-b": StreamEntryID(milliseconds: 5, sequence: 0),
                ])
            let progress = try await pool.query("SELECT sum(applied_changes) FROM counter_flush_progress")
            #expect(try progress.first?.int64(0) == 404)
        }
    }

    @Test("refused pairs given as skipped are not sent; without isolation a refusal is thrown as it is")
    func skippingAndThrowing() async throws {
        try await Self.withAppRules { pool in
            let changes = [
                LikeChange(userID: 1, postID: 1, liked: true), LikeChange(userID: 666, postID: 1, liked: true),
                LikeChange(userID: 2, postID: 1, liked: true),
            ]
            let error = await #expect(throws: PostgresError.self) {
                _ = try await pool.withTransaction { try LikeBatchApplier.apply(changes, on: $0) }
            }
            #expect(error?.sqlState == "P0001")
            #expect(try await pool.query("SELECT count(*) FROM likes").first?.int64(0) == 0)
            let outcome = try await pool.withTransaction { connection in
                try LikeBatchApplier.apply(changes, on: connection, skipping: [LikePair(userID: 666, postID: 1)], isolatingRefusals: true)
            }
            #expect(outcome.rejected.isEmpty)
            #expect(outcome.movements[1] == .init(delta: 2, likesCount: 2))
        }
    }

    @Test("a transient error (40001 from a trigger) is thrown for the caller to retry, not isolated; nothing is applied")
    func transientIsThrown() async throws {
        try await Self.withAppRules { pool in
            let changes = (1...20).map { LikeChange(userID: $0 == 7 ? 888 : Int64($0), postID: 2, liked: true) }
            let error = await #expect(throws: PostgresError.self) {
                _ = try await pool.withTransaction { try LikeBatchApplier.apply(changes, on: $0, isolatingRefusals: true) }
            }
            let state = error?.sqlState
            let retryable = error?.isRetryable ?? false
            #expect(state == "40001")
            #expect(retryable)
            let remaining = try await pool.query("SELECT count(*) FROM likes").first?.int64(0)
            #expect(remaining == 0)
        }
    }

    @Test("every change of a batch refused: each comes back and nothing is applied")
    func allRefused() async throws {
        try await Self.withAppRules { pool in
            try await pool.query("ALTER TABLE likes ADD CONSTRAINT only_small CHECK (user_id < 100)")
            let changes = (1...16).map { LikeChange(userID: 100 + Int64($0), postID: 4, liked: true) }
            let outcome = try await pool.withTransaction { connection in
                try LikeBatchApplier.apply(changes, on: connection, isolatingRefusals: true)
            }
            #expect(outcome.rejected.count == 16)
            #expect(Set(outcome.rejected.map(\.sqlState)) == ["23514"])
            #expect(outcome.movements.isEmpty)
        }
    }
}
