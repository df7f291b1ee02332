import Persistence
import PostgresDriver
import RedisDriver

/// A table `(log text, entry_ms bigint, entry_seq bigint)` with a unique key over all three, into
/// which every flush given its `flushAudit` records the log entries it applies (once per entry,
/// however many changes the entry holds), in the flush's transaction: applying an entry twice then
/// fails that flush.
public struct AuditTable: Sendable {
    /// The table's name: letters, digits and `_`.
    public let name: String

    /// The table `name` (which must exist).
    /// - Throws: `PostgresError(.invalidArgument)` unless `name` is a plain identifier (letters,
    ///   digits and `_`, at most 63 bytes): it is spliced into the SQL.
    public init(name: String) throws(PostgresError) {
        guard !name.isEmpty, name.utf8.count <= 63,
            name.utf8.allSatisfy({ byte in
                (byte >= 97 && byte <= 122) || (byte >= 65 && byte <= 90) || (byte >= 48 && byte <= 57) || byte == 95
            })
        else {
            throw PostgresError(code: .invalidArgument, message: "audit table \"\(name)\" is not a plain identifier (letters, digits, _)")
        }
        self.name = name
    }

    /// Creates a table of its own for `label` (a unique key prefix, say) in `pool`'s database.
    public static func create(_ label: String, in pool: PostgresPool) async throws -> AuditTable {
        let table = try AuditTable(name: "audit_" + label.filter { $0.isASCII && ($0.isLetter || $0.isNumber) })
        try await pool.query("CREATE TABLE \(table.name) (log text, entry_ms bigint, entry_seq bigint, PRIMARY KEY (log, entry_ms, entry_seq))")
        return table
    }

    /// What a flush runs to record the entries it applied here.
    package var flushAudit: FlushAudit {
        let name = self.name
        return FlushAudit(name: "audit table \(name)") { connection, applied throws(PostgresError) in
            // One row per entry applied (an entry may hold many changes).
            var seen: Set<Entry> = []
            let entries = applied.filter { seen.insert(Entry(log: $0.log, id: $0.entryID)).inserted }
            try connection.query(
                """
                INSERT INTO \(name) (log, entry_ms, entry_seq)
                SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])
                """,
                [
                    .textArray(entries.map(\.log)), .int64Array(entries.map { Int64($0.entryID.milliseconds) }),
                    .int64Array(entries.map { Int64($0.entryID.sequence) }),
                ])
        }
    }

    private struct Entry: Hashable {
        let log: String
        let id: StreamEntryID
    }
}
