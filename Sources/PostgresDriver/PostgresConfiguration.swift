/// How to reach PostgreSQL.
public struct PostgresConfiguration: Sendable, Hashable {
    /// A libpq connection URL or key=value string, for example
    /// `postgresql://counter@127.0.0.1:55432/counter`. No default: the node reads
    /// `COUNTER_POSTGRES_URL`.
    public var url: String
    /// How long to wait for a connection to open (libpq counts whole seconds, at least 2).
    /// Defaults to 5 s.
    public var connectTimeout: Duration = .seconds(5)
    /// Name shown in `pg_stat_activity`. Defaults to `counter-service`.
    public var applicationName: String = "counter-service"
    /// Connections a `PostgresPool` opens at most. Defaults to `4`.
    public var maximumConnections: Int = 4
    /// How long a session may sit idle inside a transaction before PostgreSQL ends it
    /// (`idle_in_transaction_session_timeout`), so a paused process cannot hold the locks of a
    /// flush transaction — and block the node taking its slots over — for longer. `nil` (the
    /// default): the server's setting.
    public var idleInTransactionTimeout: Duration?
    /// Whether commits return before their WAL reaches disk (`synchronous_commit = off`): for
    /// writes that may be lost in a PostgreSQL crash without harm (lease renewals), which then
    /// never wait behind other transactions' disk flushes. Defaults to `false`.
    public var asynchronousCommit: Bool = false
    /// How long a connection whose server stopped answering (a network cut, a host gone) may
    /// take to fail: data sent and not acknowledged for this long (`tcp_user_timeout`), or an
    /// idle or waiting connection whose keepalive probes go unanswered from about this long on.
    /// Without it a statement sent into a cut waits for TCP's own retransmissions (about 15
    /// minutes). A slow statement on a live server is not cut short. `nil`: the system's
    /// settings. Defaults to 5 s.
    public var unresponsiveTimeout: Duration? = .seconds(5)

    public init(url: String) {
        self.url = url
    }
}
