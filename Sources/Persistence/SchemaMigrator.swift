/// Brings a database's schema up to `SchemaMigration.all`: runs the missing versions in order, in
/// one transaction, under an advisory lock so two nodes starting at once do not race.
public enum SchemaMigrator {
    /// What one run did.
    public struct Report: Sendable, Equatable {
        /// Versions applied by this run, in order; empty when the schema was current.
        public let applied: [Int]
        /// The schema version afterwards.
        public let currentVersion: Int
    }

    /// Any 64-bit number unique to this service; taken with `pg_advisory_xact_lock`.
    static let advisoryLockKey: Int64 = 0x436f_756e_7465_7201

    /// Applies what is missing of `migrations`.
    /// - Throws: `PostgresError` from PostgreSQL (nothing is applied then), or
    ///   `.unexpectedResult` when the database is at a version newer than this build knows.
    public static func migrate(
        _ pool: PostgresPool, migrations: [SchemaMigration] = SchemaMigration.all
    ) async throws -> Report {
        try await pool.withTransaction { connection in
            try migrate(on: connection, migrations: migrations)
        }
    }

    /// Applies what is missing of `migrations` inside the caller's transaction.
    public static func migrate(
        on connection: isolated PostgresConnection, migrations: [SchemaMigration] = SchemaMigration.all
    ) throws -> Report {
        try connection.query("SELECT pg_advisory_xact_lock($1)", [.int64(advisoryLockKey)])
        try connection.runScript("""
            CREATE TABLE IF NOT EXISTS counter_schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        let done = Set(try connection.query("SELECT version FROM counter_schema_migrations").map { try $0.int64(0) })
        let known = migrations.map { Int64($0.version) }
        if let newest = done.max(), newest > (known.max() ?? 0) {
            throw PostgresError(code: .unexpectedResult,
                                message: "the database is at schema version \(newest), newer than this build knows (\(known.max() ?? 0)); run a newer counter-node")
        }
        var applied: [Int] = []
        for migration in migrations.sorted(by: { $0.version < $1.version }) where !done.contains(Int64(migration.version)) {
            try connection.runScript(migration.sql)
            try connection.query("INSERT INTO counter_schema_migrations (version, name) VALUES ($1, $2)",
                                 [.int64(Int64(migration.version)), .text(migration.name)])
            applied.append(migration.version)
        }
        return Report(applied: applied, currentVersion: Int(done.union(applied.map(Int64.init)).max() ?? 0))
    }
}
