/// How to reach Redis — one server, or a Redis Cluster through its seed nodes — and the
/// client's limits.
public struct RedisConfiguration: Sendable, Hashable {
    /// One server, or a Redis Cluster whose masters are discovered from seed nodes.
    public enum Mode: String, Sendable, Hashable {
        /// `redis://`: one server holds every key.
        case single
        /// `redis-cluster://`: the masters of a Redis Cluster split the 16,384 slots.
        case cluster
    }

    /// `.single` for `redis://` URLs, `.cluster` for `redis-cluster://`. Defaults to `.single`.
    public var mode: Mode = .single
    /// Host name or IP address (of the first seed node, for a cluster). Defaults to `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// TCP port (of the first seed node, for a cluster). Defaults to `6379`.
    public var port: Int = 6379
    /// For a cluster: the nodes asked for the slot map, in order. For one server: that server.
    public var seeds: [RedisEndpoint] { seedList.isEmpty ? [RedisEndpoint(host: host, port: port)] : seedList }
    private var seedList: [RedisEndpoint] = []
    /// Password for `AUTH`, if the server wants one (every node of a cluster). Defaults to none.
    public var password: String? = nil
    /// Database number for `SELECT` (one server only; a cluster has database 0). Defaults to `0`.
    public var database: Int = 0
    /// How long to wait for a connection to open. Defaults to 2 s.
    public var connectTimeout: Duration = .seconds(2)
    /// How long to wait for a reply before the connection is dropped. Defaults to 5 s.
    public var commandTimeout: Duration = .seconds(5)
    /// Most commands one pipeline may carry. Defaults to `100_000`.
    public var maximumPipelineCommands: Int = 100_000
    /// Most bytes one pipeline may carry, encoded. Defaults to 64 MiB.
    public var maximumPipelineBytes: Int = 64 << 20
    /// Reconnect attempts back off from this delay, doubling. Defaults to 50 ms.
    public var reconnectInitialDelay: Duration = .milliseconds(50)
    /// ... up to this delay. Defaults to 2 s.
    public var reconnectMaximumDelay: Duration = .seconds(2)
    /// Cluster only: the slot map is read again this often, besides after redirects and
    /// connection failures. Defaults to 5 s.
    public var topologyRefreshPeriod: Duration = .seconds(5)

    public init(host: String = "127.0.0.1", port: Int = 6379) {
        self.host = host
        self.port = port
    }

    /// The same settings for one node of this deployment (a cluster master, say).
    public func node(_ endpoint: RedisEndpoint) -> RedisConfiguration {
        var configuration = self
        configuration.mode = .single
        configuration.host = endpoint.host
        configuration.port = endpoint.port
        configuration.seedList = []
        return configuration
    }

    /// Reads `redis://[:password@]host[:port][/database]` (one server) or
    /// `redis-cluster://[:password@]host:port[,host:port…]` (seed nodes of a Redis Cluster).
    /// - Throws: `RedisError(.invalidArgument)` naming what is wrong with the URL.
    public init(url: String) throws(RedisError) {
        self.init()
        if url.hasPrefix("redis-cluster://") {
            try readCluster(url: url)
        } else {
            try readSingle(url: url)
        }
    }

    private mutating func readSingle(url: String) throws(RedisError) {
        func invalid(_ why: String) -> RedisError {
            RedisError(
                code: .invalidArgument,
                message:
                    "invalid Redis URL \"\(url)\": \(why); expected redis://[:password@]host[:port][/database] or redis-cluster://host:port[,host:port…]"
            )
        }
        guard url.hasPrefix("redis://") else { throw invalid("it must start with redis:// or redis-cluster://") }
        var rest = Substring(url.dropFirst("redis://".count))
        if let at = rest.lastIndex(of: "@") {
            password = Self.password(in: rest[..<at])
            rest = rest[rest.index(after: at)...]
        }
        if let slash = rest.firstIndex(of: "/") {
            let databaseText = rest[rest.index(after: slash)...]
            if !databaseText.isEmpty {
                guard let database = Int(databaseText), database >= 0 else { throw invalid("database must be a number") }
                self.database = database
            }
            rest = rest[..<slash]
        }
        if let colon = rest.lastIndex(of: ":") {
            guard let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port) else {
                throw invalid("port must be between 1 and 65535")
            }
            self.port = port
            rest = rest[..<colon]
        }
        guard !rest.isEmpty else { throw invalid("the host is missing") }
        self.host = String(rest)
    }

    private mutating func readCluster(url: String) throws(RedisError) {
        func invalid(_ why: String) -> RedisError {
            RedisError(
                code: .invalidArgument,
                message: "invalid Redis Cluster URL \"\(url)\": \(why); expected redis-cluster://[:password@]host:port[,host:port…]")
        }
        mode = .cluster
        var rest = Substring(url.dropFirst("redis-cluster://".count))
        if let at = rest.lastIndex(of: "@") {
            password = Self.password(in: rest[..<at])
            rest = rest[rest.index(after: at)...]
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/") else { throw invalid("a cluster has no database number (it always uses database 0)") }
        guard !rest.isEmpty else { throw invalid("give at least one seed node") }
        var seeds: [RedisEndpoint] = []
        for part in rest.split(separator: ",", omittingEmptySubsequences: false) {
            guard !part.isEmpty else { throw invalid("an empty seed node between commas") }
            guard let endpoint = RedisEndpoint(part) else {
                throw invalid("seed node \"\(part)\" is not host:port with a port between 1 and 65535")
            }
            if !seeds.contains(endpoint) { seeds.append(endpoint) }
        }
        seedList = seeds
        host = seeds[0].host
        port = seeds[0].port
    }

    private static func password(in credentials: Substring) -> String? {
        let password = credentials.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).last.map(String.init)
        return password?.isEmpty == false ? password : nil
    }
}
