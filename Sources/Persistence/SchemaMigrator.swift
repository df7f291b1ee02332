import Foundation
import PostgresDriver

/// Brings a database's schema up to `SchemaMigration.all`: runs the missing versions in order —
/// consecutive ordinary ones in one transaction, an index of `SchemaMigration.concurrentIndex`
/// with `CREATE INDEX CONCURRENTLY` outside any transaction (writes to its table go on while it
/// is built) — under an advisory lock so two nodes starting at once do not race (the second
/// waits, trying again every 200 ms, then finds the work done).
public enum SchemaMigrator {
    /// What one run did.
    public struct Report: Sendable, Equatable {
        /// Versions applied by this run, in order; empty when the schema was current.
        public let applied: [Int]
        /// The schema version afterwards.
        public let currentVersion: Int
    }

    /// Any 64-bit number unique to this service: `migrate(_:)` holds it as a session lock for its
    /// whole run, and every migration transaction takes it (`pg_advisory_xact_lock`, granted at
    /// once to the session that holds it), so `migrate(on:)` in someone's transaction waits too.
    static let advisoryLockKey: Int64 = 0x436f_756e_7465_7201

    /// Records a version as applied: `$1` the version, `$2` its name.
    static let recordVersion = "INSERT INTO counter_schema_migrations (version, name) VALUES ($1, $2)"

    /// Applies what is missing of `migrations`.
    /// - Parameter progress: told, in words, what a long step does (an index being built, how
    ///   many rows it covers, how long it took).
    /// - Throws: `PostgresError` from PostgreSQL (the ordinary versions of the failed step are
    ///   not applied; an index build that failed leaves an invalid index, which the next run
    ///   drops and builds again), or `.unexpectedResult` when the database is at a version newer
    ///   than this build knows.
    public static func migrate(
        _ pool: PostgresPool, migrations: [SchemaMigration] = SchemaMigration.all,
        progress: @Sendable (String) -> Void = { _ in }
    ) async throws -> Report {
        try await pool.withConnection { connection in
            try await lockSession(connection, progress: progress)
            do {
                let report = try await migrateLocked(connection, migrations: migrations, progress: progress)
                try await connection.query("SELECT pg_advisory_unlock($1)", [.int64(advisoryLockKey)])
                return report
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock($1)", [.int64(advisoryLockKey)])
                throw error
            }
        }
    }

    /// Takes the session advisory lock, trying every 200 ms rather than waiting inside one
    /// statement: a statement blocked on the lock holds a snapshot, and `CREATE INDEX
    /// CONCURRENTLY` in the process holding the lock waits for every older snapshot — waiting
    /// would deadlock the two.
    private static func lockSession(_ connection: PostgresConnection, progress: @Sendable (String) -> Void) async throws {
        var told = false
        while true {
            let rows = try await connection.query("SELECT pg_try_advisory_lock($1)", [.int64(advisoryLockKey)])
            if try rows.first?.bool(0) == true { return }
            if !told {
                progress("waiting for another process that is migrating this database …")
                told = true
            }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    /// The missing versions, in order, on `connection` (which holds the session lock): ordinary
    /// ones in transactions, each index built concurrently between them.
    private static func migrateLocked(
        _ connection: PostgresConnection, migrations: [SchemaMigration],
        progress: @Sendable (String) -> Void
    ) async throws -> Report {
        var applied: [Int] = []
        while true {
            let transaction: @Sendable (isolated PostgresConnection) throws -> Step = { connection in
                try migrateInTransaction(on: connection, migrations: migrations)
            }
            let step = try await connection.withTransaction(transaction)
            applied += step.report.applied
            guard let pending = step.pendingIndex, let index = pending.concurrentIndex else {
                return Report(applied: applied, currentVersion: step.report.currentVersion)
            }
            try await change(index, on: connection, progress: progress)
            try await connection.query(recordVersion, [.int64(Int64(pending.version)), .text(pending.name)])
            applied.append(pending.version)
        }
    }

    /// Applies what is missing of `migrations` inside the caller's transaction, up to the first
    /// index that must be built concurrently (which only `migrate(_:)` builds).
    public static func migrate(
        on connection: isolated PostgresConnection, migrations: [SchemaMigration] = SchemaMigration.all
    ) throws -> Report {
        try migrateInTransaction(on: connection, migrations: migrations).report
    }

    /// What one transaction of ordinary versions did, and the index to build next, if any.
    private struct Step: Sendable {
        let report: Report
        let pendingIndex: SchemaMigration?
    }

    /// The ordinary versions missing, in order, up to the first missing index build, which is
    /// returned for the caller to build outside the transaction.
    private static func migrateInTransaction(
        on connection: isolated PostgresConnection, migrations: [SchemaMigration]
    ) throws -> Step {
        try connection.query("SELECT pg_advisory_xact_lock($1)", [.int64(advisoryLockKey)])
        try connection.runScript(
            """
            CREATE TABLE IF NOT EXISTS counter_schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        let done = Set(try connection.query("SELECT version FROM counter_schema_migrations").map { try $0.int64(0) })
        let known = migrations.map { Int64($0.version) }
        if let newest = done.max(), newest > (known.max() ?? 0) {
            throw PostgresError(
                code: .unexpectedResult,
                message: "the database is at schema version \(newest), newer than this build knows (\(known.max() ?? 0)); run a newer counter-node")
        }
        var applied: [Int] = []
        var pending: SchemaMigration?
        for migration in migrations.sorted(by: { $0.version < $1.version }) where !done.contains(Int64(migration.version)) {
            if migration.concurrentIndex != nil {
                pending = migration
                break
            }
            try connection.runScript(migration.sql)
            try connection.query(recordVersion, [.int64(Int64(migration.version)), .text(migration.name)])
            applied.append(migration.version)
        }
        let current = Int(done.union(applied.map(Int64.init)).max() ?? 0)
        return Step(report: Report(applied: applied, currentVersion: current), pendingIndex: pending)
    }

    /// Builds `index` with `CREATE INDEX CONCURRENTLY` (no transaction is open on `connection`);
    /// an invalid index of that name (a build interrupted earlier) is dropped first, and a valid
    /// one (the app made it) is kept. Or drops one with `DROP INDEX CONCURRENTLY`.
    private static func change(
        _ index: SchemaMigration.ConcurrentIndex, on connection: PostgresConnection,
        progress: @Sendable (String) -> Void
    ) async throws {
        switch index {
        case .drop(let name):
            progress("dropping index \(name) CONCURRENTLY (writes go on meanwhile) …")
            try await connection.query("DROP INDEX CONCURRENTLY IF EXISTS \(name)")
        case .create(let name, let definition):
            let existing = try await connection.query(
                """
                SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace
                """, [.text(name)])
            if let row = existing.first {
                guard try !row.bool(0) else { return }
                progress("dropping the invalid index \(name) an interrupted build left")
                try await connection.query("DROP INDEX CONCURRENTLY IF EXISTS \(name)")
            }
            let table = String(definition.prefix { $0 != " " && $0 != "(" })
            let rows = try await connection.query("SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = $1::regclass", [.text(table)])
            let estimate = try rows.first?.int64(0) ?? 0
            progress("building index \(name) ON \(definition) CONCURRENTLY (about \(estimate) rows; writes to \(table) go on meanwhile) …")
            let started = Date()
            try await connection.query("CREATE INDEX CONCURRENTLY IF NOT EXISTS \(name) ON \(definition)")
            progress(String(format: "built index %@ in %.1f s", name, Date().timeIntervalSince(started)))
        }
    }
}
