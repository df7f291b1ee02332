/// How to reach Redis, and the client's limits.
public struct RedisConfiguration: Sendable, Hashable {
    /// Host name or IP address. Defaults to `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// TCP port. Defaults to `6379`.
    public var port: Int = 6379
    /// Password for `AUTH`, if the server wants one. Defaults to none.
    public var password: String? = nil
    /// Database number for `SELECT` (standalone Redis only). Defaults to `0`.
    public var database: Int = 0
    /// Seconds to wait for a connection to open. Defaults to `2`.
    public var connectTimeoutSeconds: Double = 2
    /// Seconds to wait for a reply before the connection is dropped. Defaults to `5`.
    public var commandTimeoutSeconds: Double = 5
    /// Most commands one pipeline may carry. Defaults to `100_000`.
    public var maximumPipelineCommands: Int = 100_000
    /// Most bytes one pipeline may carry, encoded. Defaults to 64 MiB.
    public var maximumPipelineBytes: Int = 64 << 20
    /// Reconnect attempts back off from this many seconds, doubling. Defaults to `0.05`.
    public var reconnectInitialDelaySeconds: Double = 0.05
    /// ... up to this many seconds. Defaults to `2`.
    public var reconnectMaximumDelaySeconds: Double = 2

    public init(host: String = "127.0.0.1", port: Int = 6379) {
        self.host = host
        self.port = port
    }

    /// Reads `redis://[:password@]host[:port][/database]`.
    /// - Throws: `RedisError(.invalidArgument)` naming what is wrong with the URL.
    public init(url: String) throws(RedisError) {
        func invalid(_ why: String) -> RedisError {
            RedisError(code: .invalidArgument, message: "invalid Redis URL \"\(url)\": \(why); expected redis://[:password@]host[:port][/database]")
        }
        guard url.hasPrefix("redis://") else { throw invalid("it must start with redis://") }
        var rest = Substring(url.dropFirst("redis://".count))
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            let password = credentials.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).last.map(String.init)
            self.password = password?.isEmpty == false ? password : nil
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
}
