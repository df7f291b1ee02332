import PostgresDriver
import RedisDriver

/// The servers the storage lives on, as a node reports on them: whether they answer (`/readyz`),
/// and what this process saw of each Redis node (`/admin/stats`, `/metrics`).
public struct StorageServers: Sendable {
    private let postgres: PostgresPool
    private let redis: RedisClient

    /// Pings through `postgres` and `redis`; reports what `redis`'s topology saw (shared with every
    /// client of the process).
    public init(postgres: PostgresPool, redis: RedisClient) {
        self.postgres = postgres
        self.redis = redis
    }

    /// `PING` to every Redis master (the one server, for a Redis that is not a cluster).
    /// - Throws: the first failure; `RedisError(.clusterUnavailable)` when slots have no master.
    public func pingRedis() async throws {
        try await redis.pingMasters()
    }

    /// `SELECT 1` on a pooled connection.
    public func pingPostgres() async throws {
        _ = try await postgres.query("SELECT 1")
    }

    /// The Redis deployment as this process sees it now.
    public func redisReport() -> RedisReport {
        let topology = redis.topology
        let refresh = topology.refreshState()
        return RedisReport(
            mode: topology.configuration.mode.rawValue, mapRefreshes: refresh.refreshes,
            secondsSinceMapRefresh: refresh.secondsSinceRefresh, lastMapError: refresh.lastError,
            nodes: topology.nodeStates())
    }
}

/// The Redis deployment as one process sees it: one server or a cluster, how often its slot map
/// was read, and per node (the masters, and nodes it has met) what it saw.
public struct RedisReport: Sendable, Equatable {
    /// What this process saw of one node (the Redis driver's `RedisNodeState`, named here so a
    /// module above storage names it without importing a driver).
    public typealias Node = RedisNodeState

    /// `single` or `cluster`.
    public let mode: String
    /// Times the cluster's slot map was read (0 for one server).
    public let mapRefreshes: Int
    /// Seconds since the map was last read; `nil` before the first read.
    public let secondsSinceMapRefresh: Double?
    /// Why the last read of the map failed, if it did.
    public let lastMapError: String?
    /// Each node, in endpoint order.
    public let nodes: [Node]

    public init(mode: String, mapRefreshes: Int, secondsSinceMapRefresh: Double?, lastMapError: String?, nodes: [Node]) {
        self.mode = mode
        self.mapRefreshes = mapRefreshes
        self.secondsSinceMapRefresh = secondsSinceMapRefresh
        self.lastMapError = lastMapError
        self.nodes = nodes
    }
}
