import Synchronization

/// A small pool of `PostgresConnection`s. Connections open on demand up to
/// `configuration.maximumConnections`; callers beyond that wait in order for one to come back.
public final class PostgresPool: Sendable {
    /// Where the connections go and how many there may be.
    public let configuration: PostgresConfiguration

    private enum Lease: Sendable {
        case handedOver(PostgresConnection)
        case mayOpen
        case closed
    }

    private struct State {
        var idle: [PostgresConnection] = []
        var open = 0
        var waiters: [CheckedContinuation<Lease, Never>] = []
        var closed = false
    }

    private let state = Mutex(State())

    /// A pool that has opened nothing yet.
    public init(configuration: PostgresConfiguration) {
        precondition(configuration.maximumConnections >= 1, "a pool needs at least one connection")
        self.configuration = configuration
    }

    /// Lends `body` a connection of its own for its whole run, then takes it back.
    /// - Throws: what `body` throws; `PostgresError(.connectionFailed)` when no connection opens;
    ///   `.poolClosed` after `close()`.
    public func withConnection<T: Sendable>(
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let connection = try await lease()
        do {
            let value = try await body(connection)
            await giveBack(connection)
            return value
        } catch {
            await giveBack(connection)
            throw error
        }
    }

    /// Runs `body` in one transaction on a pooled connection (see `PostgresConnection.withTransaction`).
    public func withTransaction<T: Sendable>(
        _ body: @Sendable (isolated PostgresConnection) throws -> T
    ) async throws -> T {
        try await withConnection { connection in try await connection.withTransaction(body) }
    }

    /// Runs `body` in one transaction on a pooled connection, committed or rolled back as it
    /// decides (see `PostgresConnection.withTransaction(deciding:)`).
    public func withTransaction<T: Sendable>(
        deciding body: @Sendable (isolated PostgresConnection) throws -> TransactionDecision<T>
    ) async throws -> TransactionDecision<T> {
        try await withConnection { connection in try await connection.withTransaction(deciding: body) }
    }

    /// Callers waiting for a connection (all are lent out), first come first served.
    public var waitingCount: Int { state.withLock { $0.waiters.count } }

    /// One statement on a pooled connection.
    @discardableResult
    public func query(_ sql: String, _ parameters: [PostgresValue] = []) async throws -> PostgresRows {
        try await withConnection { connection in try await connection.query(sql, parameters) }
    }

    /// One prepared statement on a pooled connection (prepared there the first time).
    @discardableResult
    public func query(prepared statement: PreparedStatement, _ parameters: [PostgresValue] = []) async throws -> PostgresRows {
        try await withConnection { connection in try await connection.query(prepared: statement, parameters) }
    }

    /// Closes idle connections and refuses new leases; connections lent out close when returned.
    public func close() async {
        let (idle, waiters) = state.withLock { state in
            state.closed = true
            defer {
                state.idle = []
                state.waiters = []
            }
            return (state.idle, state.waiters)
        }
        for waiter in waiters { waiter.resume(returning: .closed) }
        for connection in idle { await connection.close() }
    }

    private func lease() async throws -> PostgresConnection {
        while true {
            let immediate: Lease? = state.withLock { state in
                if state.closed { return .closed }
                if let connection = state.idle.popLast() { return .handedOver(connection) }
                if state.open < configuration.maximumConnections {
                    state.open += 1
                    return .mayOpen
                }
                return nil
            }
            let lease: Lease
            if let immediate {
                lease = immediate
            } else {
                lease = await withCheckedContinuation { continuation in
                    let queued: Lease? = state.withLock { state -> Lease? in
                        // Re-check: a connection may have come back since the first look.
                        if state.closed { return Lease.closed }
                        if let connection = state.idle.popLast() { return .handedOver(connection) }
                        if state.open < configuration.maximumConnections {
                            state.open += 1
                            return .mayOpen
                        }
                        state.waiters.append(continuation)
                        return nil
                    }
                    if let queued { continuation.resume(returning: queued) }
                }
            }
            switch lease {
            case .handedOver(let connection):
                return connection
            case .closed:
                throw PostgresError(code: .poolClosed, message: "the PostgreSQL pool is closed")
            case .mayOpen:
                let connection = PostgresConnection(configuration: configuration)
                do {
                    try await connection.connect()
                    return connection
                } catch {
                    // Free the slot and let the next waiter try for itself.
                    let waiter = state.withLock { state in
                        state.open -= 1
                        return state.waiters.isEmpty ? nil : state.waiters.removeFirst()
                    }
                    if let waiter {
                        state.withLock { $0.open += 1 }
                        waiter.resume(returning: .mayOpen)
                    }
                    throw error
                }
            }
        }
    }

    private func giveBack(_ connection: PostgresConnection) async {
        let (waiter, closeIt): (CheckedContinuation<Lease, Never>?, Bool) = state.withLock { state in
            if state.closed {
                state.open -= 1
                return (nil, true)
            }
            if !state.waiters.isEmpty { return (state.waiters.removeFirst(), false) }
            state.idle.append(connection)
            return (nil, false)
        }
        waiter?.resume(returning: .handedOver(connection))
        if closeIt { await connection.close() }
    }
}
