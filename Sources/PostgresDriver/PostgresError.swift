/// A failure talking to PostgreSQL: what kind it was, PostgreSQL's own SQLSTATE and message when
/// the server said no, and a message that says what happened and what to do.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. New kinds may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The server could not be reached or refused the connection.
        public static let connectionFailed = Code(name: "connectionFailed")
        /// The connection broke during a call; the statement may or may not have been applied.
        /// The next call reconnects.
        public static let connectionLost = Code(name: "connectionLost")
        /// The server answered with an error; `sqlState` and `serverMessage` say which.
        public static let server = Code(name: "server")
        /// The caller passed something the client refuses before sending it.
        public static let invalidArgument = Code(name: "invalidArgument")
        /// The server's answer was not what the statement should produce.
        public static let unexpectedResult = Code(name: "unexpectedResult")
        /// The pool was closed.
        public static let poolClosed = Code(name: "poolClosed")
        public var description: String { name }
    }

    /// What kind of failure this is.
    public let code: Code
    /// PostgreSQL's five-character SQLSTATE (for example `23505` unique violation), for `.server`.
    public let sqlState: String?
    /// PostgreSQL's primary message, for `.server`; otherwise what the client saw.
    public let message: String
    /// PostgreSQL's detail line, when it sent one.
    public let detail: String?

    public init(code: Code, message: String, sqlState: String? = nil, detail: String? = nil) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
        self.detail = detail
    }

    /// `23505`: a unique constraint refused a row.
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// `23503`: a foreign key refused a row (for example its post was deleted).
    public var isForeignKeyViolation: Bool { sqlState == "23503" }
    /// `42P01`: a table named in the statement does not exist.
    public var isUndefinedTable: Bool { sqlState == "42P01" }
    /// Whether trying the same work again later can succeed: connection failures and what
    /// PostgreSQL reports by these SQLSTATE classes — `08` connection exception, `25` invalid
    /// transaction state, `40` serialization failure or deadlock, `53` insufficient resources
    /// (disk full, out of memory, too many connections), `55` object not in prerequisite state
    /// (a lock not available), `57` operator intervention (shutdown, statement timeout, a query
    /// cancelled), `58` system error (I/O), `XX` internal error.
    public var isRetryable: Bool {
        switch code {
        case .connectionFailed, .connectionLost: return true
        case .server:
            guard let state = sqlState else { return false }
            return Self.transientClasses.contains(String(state.prefix(2)))
        default: return false
        }
    }

    private static let transientClasses: Set<String> = ["08", "25", "40", "53", "55", "57", "58", "XX"]

    /// Whether PostgreSQL refused the statement for what it carries, so sending it again fails
    /// again while a part of it may succeed: a server error of any class but the transient ones
    /// (`23` a check, unique or foreign key constraint, `22` a value out of range, `P0` an
    /// exception a trigger raised, `42` a privilege or an object missing, …).
    public var isRefusal: Bool { code == .server && sqlState != nil && !isRetryable }

    public var description: String {
        var text = "PostgreSQL \(code)"
        if let sqlState { text += " [\(sqlState)]" }
        text += ": \(message)"
        if let detail { text += " (\(detail))" }
        return text
    }
}
