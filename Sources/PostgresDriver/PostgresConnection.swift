import BlockingIO
internal import CLibPQ
import CounterCore
import Glibc

/// One PostgreSQL connection (libpq), owned by an actor that runs on a thread of its own, so its
/// blocking calls never hold up Swift's cooperative pool and its handle is never shared.
///
/// Values travel as parameters (`$1`, `$2`, …), never inside the SQL text. The connection opens
/// lazily and reopens itself at the start of the next call when the server went away while it was
/// idle (a restart, say); a call that breaks mid-way throws `.connectionLost`, because whether its
/// statement was applied is then unknown.
public actor PostgresConnection {
    /// Where this connection goes.
    public nonisolated let configuration: PostgresConfiguration
    private let executor: BlockingIOExecutor
    private var handle: OpaquePointer?
    private var inTransaction = false
    /// The names of the prepared statements the open handle's session holds (a handful: an
    /// array, as a `Set` stored here made Swift 6.3.1's release build of the modules that
    /// import this one fail with "circular reference").
    private var preparedNames: [String] = []

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// A connection that opens on first use (or on `connect()`).
    public init(configuration: PostgresConfiguration) {
        self.configuration = configuration
        self.executor = BlockingIOExecutor(name: "postgres-conn")
    }

    isolated deinit {
        if let handle { PQfinish(handle) }
        executor.shutdown()
    }

    /// Opens the connection now if it is not open.
    /// - Throws: `PostgresError(.connectionFailed)` with libpq's reason.
    public func connect() throws(PostgresError) {
        _ = try usableHandle()
    }

    /// Closes the connection; the next call opens a new one.
    public func close() {
        if let handle { PQfinish(handle) }
        handle = nil
        inTransaction = false
        preparedNames = []
    }

    /// Runs one statement with `parameters` bound to `$1…$n` and returns its rows.
    /// - Throws: `PostgresError` — `.server` with SQLSTATE when PostgreSQL refuses it (the
    ///   connection stays usable), `.connectionFailed`/`.connectionLost` when the server is gone.
    @discardableResult
    public func query(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresError) -> PostgresRows {
        let connection = try usableHandle()
        let result = withCStringArray(parameters.map(\.textEncoding)) { values in
            PQexecParams(connection, sql, Int32(values.count), nil, values, nil, nil, 0)
        }
        defer { PQclear(result) }
        return try rows(of: result, on: connection)
    }

    /// Runs `statement` with `parameters` bound to `$1…$n`: prepared on this connection's session
    /// the first time (`PQprepare`), executed by name after that, so PostgreSQL parses and plans
    /// it once per connection instead of on every call.
    /// - Throws: as `query(_:_:)`.
    @discardableResult
    public func query(prepared statement: PreparedStatement, _ parameters: [PostgresValue] = []) throws(PostgresError) -> PostgresRows {
        let connection = try usableHandle()
        if !preparedNames.contains(statement.name) {
            try prepare(statement, on: connection)
            preparedNames.append(statement.name)
        }
        let result = withCStringArray(parameters.map(\.textEncoding)) { values in
            PQexecPrepared(connection, statement.name, Int32(values.count), values, nil, nil, 0)
        }
        defer { PQclear(result) }
        return try rows(of: result, on: connection)
    }

    private func prepare(_ statement: PreparedStatement, on connection: OpaquePointer) throws(PostgresError) {
        let result = PQprepare(connection, statement.name, statement.sql, 0, nil)
        defer { PQclear(result) }
        _ = try rows(of: result, on: connection)
    }

    /// Runs constant SQL that may hold several statements (migrations, say). It takes no
    /// parameters: never build its text from values.
    public func runScript(_ sql: String) throws(PostgresError) {
        let connection = try usableHandle()
        let result = PQexec(connection, sql)
        defer { PQclear(result) }
        _ = try rows(of: result, on: connection)
    }

    /// Runs `body` inside `BEGIN … COMMIT` on this connection; any error rolls it back and is
    /// rethrown. The body is synchronous, so no other caller's statement can run inside it.
    ///
    /// A `.connectionLost` error from the COMMIT itself means the outcome is unknown: make the work
    /// idempotent (as the flusher's batch is) and retry it.
    public func withTransaction<T: Sendable>(
        _ body: sending (isolated PostgresConnection) throws -> T
    ) throws -> T {
        precondition(!inTransaction, "withTransaction does not nest")
        try query("BEGIN")
        inTransaction = true
        defer { inTransaction = false }
        do {
            let value = try body(self)
            try query("COMMIT")
            return value
        } catch {
            if let handle, PQstatus(handle) == CONNECTION_OK {
                let rollback = PQexec(handle, "ROLLBACK")
                PQclear(rollback)
            }
            throw error
        }
    }

    /// Runs `body` in one transaction that commits or rolls back as `body` decides: for a body
    /// that finds a reason not to commit (and says which) without throwing. A thrown error rolls
    /// back too and is rethrown.
    public func withTransaction<T: Sendable>(
        deciding body: sending (isolated PostgresConnection) throws -> TransactionDecision<T>
    ) throws -> TransactionDecision<T> {
        precondition(!inTransaction, "withTransaction does not nest")
        try query("BEGIN")
        inTransaction = true
        defer { inTransaction = false }
        let decision: TransactionDecision<T>
        do {
            decision = try body(self)
        } catch {
            rollBackQuietly()
            throw error
        }
        switch decision {
        case .commit:
            do {
                try query("COMMIT")
            } catch {
                rollBackQuietly()
                throw error
            }
        case .rollBack:
            try query("ROLLBACK")
        }
        return decision
    }

    private func rollBackQuietly() {
        if let handle, PQstatus(handle) == CONNECTION_OK {
            let rollback = PQexec(handle, "ROLLBACK")
            PQclear(rollback)
        }
    }

    // MARK: - Connection upkeep

    /// The open handle, opening or reopening it first when needed (outside transactions only).
    private func usableHandle() throws(PostgresError) -> OpaquePointer {
        if let handle {
            if PQstatus(handle) == CONNECTION_OK && !Self.serverHungUp(handle) { return handle }
            if inTransaction {
                throw PostgresError(
                    code: .connectionLost,
                    message: "connection lost inside a transaction; it was rolled back by the server")
            }
            PQfinish(handle)
            self.handle = nil
        }
        let opened = try open()
        handle = opened
        preparedNames = []
        return opened
    }

    private func open() throws(PostgresError) -> OpaquePointer {
        var keywords = ["dbname", "connect_timeout", "application_name"]
        var values = [
            configuration.url,
            String(max(2, configuration.connectTimeout.components.seconds + (configuration.connectTimeout.components.attoseconds > 0 ? 1 : 0))),
            configuration.applicationName,
        ]
        var options: [String] = []
        if let timeout = configuration.idleInTransactionTimeout {
            options.append("-c idle_in_transaction_session_timeout=\(max(1, timeout.inMilliseconds))")
        }
        if configuration.asynchronousCommit { options.append("-c synchronous_commit=off") }
        if let timeout = configuration.unresponsiveTimeout {
            let seconds = max(2, Int(timeout.components.seconds))
            keywords += ["keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout"]
            values += ["1", String(max(1, seconds / 2)), String(max(1, seconds / 6)), "3", String(seconds * 1000)]
        }
        if !options.isEmpty {
            keywords.append("options")
            values.append(options.joined(separator: " "))
        }
        let connection = withCStringArray(keywords + [nil]) { keys in
            withCStringArray(values + [nil]) { vals in PQconnectdbParams(keys, vals, 1) }
        }
        guard let connection else {
            throw PostgresError(code: .connectionFailed, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let reason = Self.errorMessage(connection)
            PQfinish(connection)
            throw PostgresError(
                code: .connectionFailed,
                message: "cannot connect to PostgreSQL (\(Self.redacted(configuration.url))): \(reason)")
        }
        // Notices ("relation … already exists, skipping") are not errors; keep them off stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        return connection
    }

    /// An idle connection has nothing to read. Input means the server is closing it (a
    /// shutdown notice, then end of file) — or, rarely, sent a harmless report; either way a
    /// fresh connection is the safe choice, since no transaction is open.
    private static func serverHungUp(_ connection: OpaquePointer) -> Bool {
        var descriptor = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) != 0
    }

    // MARK: - Results

    private func rows(of result: OpaquePointer?, on connection: OpaquePointer) throws(PostgresError) -> PostgresRows {
        guard let result else { throw lostOrFailed(connection) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            return Self.copyRows(result)
        case PGRES_EMPTY_QUERY:
            throw PostgresError(code: .invalidArgument, message: "the statement is empty")
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR:
            guard PQstatus(connection) == CONNECTION_OK, let state = Self.field(result, "C") else {
                throw lostOrFailed(connection)
            }
            throw PostgresError(
                code: .server,
                message: Self.field(result, "M") ?? Self.errorMessage(connection),
                sqlState: state,
                detail: Self.field(result, "D"))
        default:
            throw PostgresError(
                code: .unexpectedResult,
                message: "unexpected result status \(String(cString: PQresStatus(PQresultStatus(result))))")
        }
    }

    private func lostOrFailed(_ connection: OpaquePointer) -> PostgresError {
        let reason = Self.errorMessage(connection)
        if PQstatus(connection) != CONNECTION_OK {
            return PostgresError(
                code: .connectionLost,
                message:
                    "connection to PostgreSQL lost during the call (\(reason)); the statement may or may not have been applied; the next call reconnects"
            )
        }
        return PostgresError(code: .unexpectedResult, message: reason)
    }

    private static func copyRows(_ result: OpaquePointer) -> PostgresRows {
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        let columns = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        var rows: [[String?]] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<Int32(rowCount) {
            rows.append(
                (0..<Int32(columnCount)).map { column in
                    PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
                })
        }
        let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
        return PostgresRows(columns: columns, rows: rows, affectedRows: affected)
    }

    private static func field(_ result: OpaquePointer, _ code: Character) -> String? {
        guard let value = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
        return String(cString: value)
    }

    private static func errorMessage(_ connection: OpaquePointer) -> String {
        String(cString: PQerrorMessage(connection)).trimmingTrailingWhitespace()
    }

    /// The URL without its password, for error messages.
    static func redacted(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://"), let at = url[schemeEnd.upperBound...].firstIndex(of: "@") else {
            return url
        }
        let credentials = url[schemeEnd.upperBound..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return url }
        return String(url[..<colon]) + ":***" + String(url[at...])
    }
}

extension String {
    func trimmingTrailingWhitespace() -> String {
        var text = Substring(self)
        while let last = text.last, last.isWhitespace { text.removeLast() }
        return String(text)
    }
}

/// Calls `body` with a C array of NUL-terminated copies of `strings` (`nil` stays a null pointer).
func withCStringArray<R>(_ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { $0.flatMap { strdup($0) } }
    defer { for copy in copies { free(copy) } }
    return body(copies.map { $0.map { UnsafePointer($0) } })
}
