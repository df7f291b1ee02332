import CounterCore
import PostgresDriver

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
        /// Whether an operator asked it to give up its slots (`cluster drain`): live, but owning
        /// none.
        public let isDraining: Bool
        /// Milliseconds until its lease runs out, by PostgreSQL's clock (negative: ran out).
        public let leaseRemainingMilliseconds: Int64

        public init(
            id: String, incarnation: Int64, advertiseURL: String, isLive: Bool, isDraining: Bool = false,
            leaseRemainingMilliseconds: Int64 = 0
        ) {
            self.id = id
            self.incarnation = incarnation
            self.advertiseURL = advertiseURL
            self.isLive = isLive
            self.isDraining = isDraining
            self.leaseRemainingMilliseconds = leaseRemainingMilliseconds
        }
    }

    /// A node id already held by a live process.
    public struct IDInUse: Error, Sendable, Equatable, CustomStringConvertible {
        public let nodeID: String
        public let advertiseURL: String
        /// The incarnation holding it.
        public var incarnation: Int64 = 0
        /// Milliseconds until the holder's lease runs out unless it renews it.
        public var leaseRemainingMilliseconds: Int64 = 0

        public var description: String {
            "node id \"\(nodeID)\" is held by a running node (advertising \(advertiseURL)); give this node another --node-id, or stop that one"
        }
    }

    /// A live node of the deployment holds other settings that every node must share (the
    /// reaction model): the nodes would decide and write differently.
    public struct SettingsDisagree: Error, Sendable, Equatable, CustomStringConvertible {
        public let nodeID: String
        /// The live node's settings, and this node's.
        public let theirs: String
        public let mine: String

        public init(nodeID: String, theirs: String, mine: String) {
            self.nodeID = nodeID
            self.theirs = theirs
            self.mine = mine
        }

        public var description: String {
            "node \"\(nodeID)\" of this deployment runs with the reaction settings \"\(theirs)\", this node with \"\(mine)\": every node of a deployment must hold the same; start this node with that node's settings, or stop every node and start them all with the new ones"
        }
    }

    /// The shared settings of a node that never wrote any (one of a version before reactions):
    /// likes only.
    public static let likesOnlySettings = "like"

    private let pool: PostgresPool
    /// Whose nodes: deployments sharing a database (named by their Redis key prefix) each have
    /// their own.
    public let deployment: String

    public init(pool: PostgresPool, deployment: String) {
        self.pool = pool
        self.deployment = deployment
    }

    /// Takes `nodeID` for this process with a lease of `lease`, as a new incarnation, with the
    /// settings every node of the deployment must share (`settings`, compared as text).
    /// - Returns: the incarnation.
    /// - Throws: `IDInUse` when another process holds the id under a lease still running;
    ///   `SettingsDisagree` when a live node of the deployment holds other settings (checked
    ///   and registered under one lock of the deployment's, so two nodes starting at once with
    ///   different settings cannot both get in).
    public func register(nodeID: String, advertiseURL: String, lease: Duration, settings: String = likesOnlySettings) async throws -> Int64 {
        let deployment = self.deployment
        let outcome = try await pool.withTransaction { connection -> Result<Int64?, SettingsDisagree> in
            try connection.query("SELECT pg_advisory_xact_lock(hashtext($1))", [.text("counter_nodes:" + deployment)])
            let others = try connection.query(
                """
                SELECT id, coalesce(settings, $3) FROM counter_nodes
                WHERE deployment = $1 AND id <> $2 AND lease_expires_at > now() AND coalesce(settings, $3) <> $4
                ORDER BY id LIMIT 1
                """, [.text(deployment), .text(nodeID), .text(Self.likesOnlySettings), .text(settings)])
            if let other = others.first {
                return .failure(SettingsDisagree(nodeID: other.string(0) ?? "?", theirs: other.string(1) ?? "?", mine: settings))
            }
            let rows = try connection.query(
                """
                INSERT INTO counter_nodes (deployment, id, incarnation, advertise_url, lease_expires_at, settings)
                VALUES ($4, $1, nextval('counter_node_incarnations'), $2, now() + $3::bigint * interval '1 millisecond', $5)
                ON CONFLICT (deployment, id) DO UPDATE
                    SET incarnation = EXCLUDED.incarnation, advertise_url = EXCLUDED.advertise_url,
                        lease_expires_at = EXCLUDED.lease_expires_at, started_at = now(), draining = false,
                        settings = EXCLUDED.settings
                    WHERE counter_nodes.lease_expires_at <= now()
                RETURNING incarnation
                """, [.text(nodeID), .text(advertiseURL), .int64(lease.inMilliseconds), .text(deployment), .text(settings)])
            return .success(try rows.first.map { try $0.int64(0) })
        }
        if let incarnation = try outcome.get() { return incarnation }
        let holder = try await pool.query(
            """
            SELECT advertise_url, incarnation, (extract(epoch FROM lease_expires_at - now()) * 1000)::bigint
            FROM counter_nodes WHERE deployment = $2 AND id = $1
            """, [.text(nodeID), .text(deployment)])
        throw IDInUse(
            nodeID: nodeID, advertiseURL: holder.first?.string(0) ?? "?",
            incarnation: (try? holder.first?.int64(1)) ?? 0,
            leaseRemainingMilliseconds: (try? holder.first?.int64(2)) ?? 0)
    }

    /// Extends the lease of `incarnation` by `lease` from now (PostgreSQL's now).
    /// - Returns: `false` when that incarnation no longer holds the id (its lease ran out and
    ///   another process took it): the caller must stop acting as the node.
    public func renew(nodeID: String, incarnation: Int64, lease: Duration) async throws -> Bool {
        try await renewal(nodeID: nodeID, incarnation: incarnation, lease: lease) != .superseded
    }

    /// What a renewal found.
    public enum Renewal: Sendable, Equatable {
        /// The lease was still running; it runs `lease` from now.
        case renewed
        /// The lease had run out (by PostgreSQL's clock) before this renewal; it runs again,
        /// but another node may have taken the node's slots meanwhile: the caller must not
        /// decide for them until a round has read who owns them now.
        case renewedAfterLapse
        /// Another incarnation holds the id: the caller must stop acting as the node.
        case superseded
    }

    /// `renew`, telling whether the lease had run out before it.
    public func renewal(nodeID: String, incarnation: Int64, lease: Duration) async throws -> Renewal {
        let rows = try await pool.query(
            """
            UPDATE counter_nodes n SET lease_expires_at = now() + $3::bigint * interval '1 millisecond'
            FROM (SELECT lease_expires_at FROM counter_nodes WHERE deployment = $4 AND id = $1 AND incarnation = $2 FOR UPDATE) before
            WHERE n.deployment = $4 AND n.id = $1 AND n.incarnation = $2
            RETURNING before.lease_expires_at > now()
            """, [.text(nodeID), .int64(incarnation), .int64(lease.inMilliseconds), .text(deployment)])
        guard let row = rows.first else { return .superseded }
        return try row.bool(0) ? .renewed : .renewedAfterLapse
    }

    /// Ends the lease of `incarnation` now (a node leaving in good order), so its slots can be
    /// taken without waiting for the lease to run out.
    public func release(nodeID: String, incarnation: Int64) async throws {
        try await pool.query(
            "UPDATE counter_nodes SET lease_expires_at = now() WHERE deployment = $3 AND id = $1 AND incarnation = $2",
            [.text(nodeID), .int64(incarnation), .text(deployment)])
    }

    /// Every registered node, live or not, by id.
    public func nodes() async throws -> [Node] {
        let rows = try await pool.query(
            """
            SELECT id, incarnation, advertise_url, lease_expires_at > now(), draining,
                   (extract(epoch FROM lease_expires_at - now()) * 1000)::bigint
            FROM counter_nodes WHERE deployment = $1 ORDER BY id
            """, [.text(deployment)])
        return try rows.map { row in
            Node(
                id: row.string(0) ?? "", incarnation: try row.int64(1), advertiseURL: row.string(2) ?? "", isLive: try row.bool(3),
                isDraining: try row.bool(4), leaseRemainingMilliseconds: try row.int64(5))
        }
    }

    /// Marks `nodeID` as draining (it gives up its slots to the others and takes none) or not.
    /// - Returns: `false` when no node has that id.
    public func setDraining(nodeID: String, _ draining: Bool) async throws -> Bool {
        let rows = try await pool.query(
            "UPDATE counter_nodes SET draining = $2 WHERE deployment = $3 AND id = $1 RETURNING 1",
            [.text(nodeID), .bool(draining), .text(deployment)])
        return !rows.isEmpty
    }
}
