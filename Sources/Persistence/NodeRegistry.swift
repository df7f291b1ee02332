import CounterCore

/// The nodes of a cluster in PostgreSQL (`counter_nodes`): each node id is held by one process at
/// a time, under a lease that PostgreSQL's clock keeps — never the node's own, which a paused or
/// skewed process cannot be trusted with. Every process start is a new incarnation, so a node
/// restarted under the same id is told apart from the process it replaces.
public struct NodeRegistry: Sendable {
    /// One registered node.
    public struct Node: Sendable, Equatable {
        public let id: String
        public let incarnation: Int64
        public let advertiseURL: String
        /// Whether its lease is still running, by PostgreSQL's clock.
        public let isLive: Bool

        public init(id: String, incarnation: Int64, advertiseURL: String, isLive: Bool) {
            self.id = id
            self.incarnation = incarnation
            self.advertiseURL = advertiseURL
            self.isLive = isLive
        }
    }

    /// A node id already held by a live process.
    public struct IDInUse: Error, Sendable, Equatable, CustomStringConvertible {
        public let nodeID: String
        public let advertiseURL: String

        public var description: String {
            "node id \"\(nodeID)\" is held by a running node (advertising \(advertiseURL)); give this node another --node-id, or stop that one"
        }
    }

    private let pool: PostgresPool

    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Takes `nodeID` for this process with a lease of `lease`, as a new incarnation.
    /// - Returns: the incarnation.
    /// - Throws: `IDInUse` when another process holds the id under a lease still running.
    public func register(nodeID: String, advertiseURL: String, lease: Duration) async throws -> Int64 {
        let rows = try await pool.query("""
            INSERT INTO counter_nodes (id, incarnation, advertise_url, lease_expires_at)
            VALUES ($1, nextval('counter_node_incarnations'), $2, now() + $3::bigint * interval '1 millisecond')
            ON CONFLICT (id) DO UPDATE
                SET incarnation = EXCLUDED.incarnation, advertise_url = EXCLUDED.advertise_url,
                    lease_expires_at = EXCLUDED.lease_expires_at, started_at = now()
                WHERE counter_nodes.lease_expires_at <= now()
            RETURNING incarnation
            """, [.text(nodeID), .text(advertiseURL), .int64(lease.inMilliseconds)])
        if let row = rows.first { return try row.int64(0) }
        let holder = try await pool.query("SELECT advertise_url FROM counter_nodes WHERE id = $1", [.text(nodeID)])
        throw IDInUse(nodeID: nodeID, advertiseURL: holder.first?.string(0) ?? "?")
    }

    /// Extends the lease of `incarnation` by `lease` from now (PostgreSQL's now).
    /// - Returns: `false` when that incarnation no longer holds the id (its lease ran out and
    ///   another process took it): the caller must stop acting as the node.
    public func renew(nodeID: String, incarnation: Int64, lease: Duration) async throws -> Bool {
        let rows = try await pool.query("""
            UPDATE counter_nodes SET lease_expires_at = now() + $3::bigint * interval '1 millisecond'
            WHERE id = $1 AND incarnation = $2
            RETURNING 1
            """, [.text(nodeID), .int64(incarnation), .int64(lease.inMilliseconds)])
        return !rows.isEmpty
    }

    /// Ends the lease of `incarnation` now (a node leaving in good order), so its slots can be
    /// taken without waiting for the lease to run out.
    public func release(nodeID: String, incarnation: Int64) async throws {
        try await pool.query("UPDATE counter_nodes SET lease_expires_at = now() WHERE id = $1 AND incarnation = $2",
                             [.text(nodeID), .int64(incarnation)])
    }

    /// Every registered node, live or not, by id.
    public func nodes() async throws -> [Node] {
        let rows = try await pool.query("""
            SELECT id, incarnation, advertise_url, lease_expires_at > now() FROM counter_nodes ORDER BY id
            """)
        return try rows.map { row in
            Node(id: row.string(0) ?? "", incarnation: try row.int64(1), advertiseURL: row.string(2) ?? "", isLive: try row.bool(3))
        }
    }
}
