/// A statement a connection prepares once (`PREPARE`) and then runs by name: for frequent reads
/// whose parsing and planning cost more than running them. A likers page is an index range scan
/// of a few dozen rows; planned on every call it took about 170 µs of PostgreSQL's CPU, prepared
/// about 50 µs (`pgbench` on this kind of machine: 11,800 against 40,800 pages a second).
///
/// After five runs PostgreSQL may keep a generic plan, made without the parameters' values:
/// prepare only statements whose good plan does not depend on them (an index that matches the
/// `WHERE` and the `ORDER BY`, say), so a post with a million likers and one with three take the
/// same path. The name must be unique among the statements of the process.
public struct PreparedStatement: Sendable, Hashable {
    public let name: String
    public let sql: String

    public init(name: String, sql: String) {
        self.name = name
        self.sql = sql
    }
}
