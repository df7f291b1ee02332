import PostgresDriver

/// A check a flush runs in its transaction once its entries are applied, given the entries it
/// applied (not those its logs' progress showed applied before): what it throws rolls the flush
/// back. The service runs none; the tests' audit table (`AuditTable`) records each entry under a
/// unique key, so that an entry applied twice fails its flush. Shared with the package's tests,
/// not for apps: `package`.
package struct FlushAudit: Sendable, Equatable {
    /// What the audit is, for messages and equality.
    package let name: String
    private let record: @Sendable (isolated PostgresConnection, [LoggedLikeChange]) throws(PostgresError) -> Void

    /// - Parameter record: runs on the flush's connection, inside its transaction.
    package init(name: String, record: @escaping @Sendable (isolated PostgresConnection, [LoggedLikeChange]) throws(PostgresError) -> Void) {
        self.name = name
        self.record = record
    }

    /// Runs the check on `connection`, inside the flush's transaction.
    func check(_ applied: [LoggedLikeChange], on connection: isolated PostgresConnection) throws(PostgresError) {
        try record(connection, applied)
    }

    package static func == (lhs: FlushAudit, rhs: FlushAudit) -> Bool { lhs.name == rhs.name }
}
