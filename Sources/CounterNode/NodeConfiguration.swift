import CounterCore
import Foundation
import NodeAPI
import NodeCluster
import NodeHTTP
import PostgresDriver
import RedisDriver
import UserTokens
import WritePath

/// Everything a node is configured with. Each setting has a default, a `COUNTER_*` environment
/// variable and a `--flag`; `NodeConfiguration.settings` lists them for `--help`.
public struct NodeConfiguration: Sendable, Equatable {
    /// PostgreSQL URL. Defaults to the local cluster of `scripts/services`.
    public var postgresURL: String = "postgresql://counter@127.0.0.1:55432/counter"
    /// Redis URL. Defaults to the local server of `scripts/services`.
    public var redisURL: String = "redis://127.0.0.1:56379"
    /// PostgreSQL connections in the node's pool. Defaults to `4`.
    public var postgresPoolSize: Int = 4
    /// Shards, acknowledgement mode, memory and flush settings of the write path.
    public var writePath = WritePathConfiguration()

    /// The write path of a node of a cluster: `writePath`, with a batch waiting for Redis at
    /// most half the lease. A Redis that silent has already made the node stop deciding (its
    /// lease check gives up after a quarter of the lease), and the shard's callers — and what
    /// queues behind the batch — should hear so rather than wait out the command timeout.
    public var nodeWritePath: WritePathConfiguration {
        var configuration = writePath
        configuration.batchRedisTimeout = lease / 2
        return configuration
    }
    /// Address, port and limits of the HTTP server.
    public var http = HTTPServerConfiguration()
    /// Bearer tokens for the API and the admin API. Default: none (only allowed on loopback).
    public var tokens = AccessTokens()
    /// End users: their tokens, the seed's route, their write limits. Off by default.
    public var users = UserAccessConfiguration()
    /// Change events older than this are pruned (with events on); `nil` keeps them. Defaults to 7 days.
    public var eventRetention: Duration? = .seconds(7 * 86_400)
    /// Whether `serve` runs `migrate` first. Defaults to `true`.
    public var migrateOnStart: Bool = true
    /// `serve` creates posts 1…N if they are missing, for trying the node out. Defaults to `0`.
    public var demoPosts: Int = 0
    /// The running node the operator commands talk to. Defaults to `--listen`'s address.
    public var nodeURLSetting: String?
    /// Least important log level written: debug, info, warn, error. Defaults to `info`.
    public var logLevel: LogLevel = .info
    /// How log lines are written: `text` (`key=value`) or `json` (one object per line). Defaults to `text`.
    public var logFormat: LogFormat = .text
    /// This node's id in its cluster, stable across restarts. Defaults to `node-1`, so one node
    /// needs no flag.
    public var nodeID: String = "node-1"
    /// Where the other nodes and slot-aware clients reach this node. Defaults to
    /// `http://<listen host>:<port>` (`127.0.0.1` when listening on `0.0.0.0`).
    public var advertiseURLSetting: String?
    /// How long the node's lease lasts without renewal (it is renewed every third of it): a node
    /// silent this long loses its slots to the others. Defaults to 3 s (renewals under load on
    /// two cores were measured up to 2.6 s apart).
    public var lease: Duration = .seconds(3)
    /// Most slots handed between live nodes at once. Defaults to 256.
    public var maximumMoves: Int = 256
    /// `/readyz` fails while the oldest change waiting for PostgreSQL is older than this many
    /// seconds; 0 never. Defaults to 60: far above a healthy flusher's lag (under a second), so
    /// only a PostgreSQL that is down or far behind takes the node out of a load balancer.
    public var readyMaxLagSeconds: Int = 60
    /// `readyMaxLagSeconds` as the API takes it: `nil` when it is off.
    public var readyMaxLag: Duration? { readyMaxLagSeconds > 0 ? .seconds(readyMaxLagSeconds) : nil }
    /// How long a shutdown may take from the first signal (handing slots off, answering what is
    /// in flight, flushing); then the node exits 0 and leaves what is not yet in PostgreSQL in its
    /// Redis logs, for the next start. 0: no limit. Defaults to 25 s, under Kubernetes' default
    /// grace period of 30 s, so the node logs what it left before a SIGKILL could cut it short.
    public var shutdownTimeoutSeconds: Int = 25
    /// `shutdownTimeoutSeconds` as a duration: `nil` when there is no limit.
    public var shutdownTimeout: Duration? { shutdownTimeoutSeconds > 0 ? .seconds(shutdownTimeoutSeconds) : nil }

    public init() {}

    /// `--tls-listen`, `--tls-cert` and `--tls-key`, each set or not: `http.tls` once all are.
    public var tlsListen: ListenAddress? {
        didSet { http.tls = tlsListener }
    }
    /// An address to listen on.
    public struct ListenAddress: Sendable, Equatable {
        public var host: String
        public var port: Int
    }
    public var tlsCertificateFile: String? {
        didSet { http.tls = tlsListener }
    }
    public var tlsKeyFile: String? {
        didSet { http.tls = tlsListener }
    }
    private var tlsListener: HTTPTLSListener? {
        guard let tlsListen, let tlsCertificateFile, let tlsKeyFile else { return nil }
        return HTTPTLSListener(host: tlsListen.host, port: tlsListen.port, certificateFile: tlsCertificateFile, keyFile: tlsKeyFile)
    }

    /// Why this configuration must not be served, if it must not: a non-loopback address needs
    /// both tokens; TLS needs its address and both its files.
    public var servingRefusal: String? {
        let loopback = http.host == "127.0.0.1" || http.host.hasPrefix("127.")
        if !loopback && (tokens.api == nil || tokens.admin == nil) {
            return "listening on \(http.host) (not loopback) needs --api-token and --admin-token"
        }
        let tlsSettings = [tlsListen != nil, tlsCertificateFile != nil, tlsKeyFile != nil]
        if tlsSettings.contains(true) && tlsSettings.contains(false) {
            return "TLS needs all of --tls-listen, --tls-cert and --tls-key"
        }
        return nil
    }

    /// The node the operator commands talk to: `--node`, or the `--listen` address.
    public var nodeURL: String {
        nodeURLSetting ?? "http://\(http.host):\(http.port)"
    }

    /// The advertised URL: `--advertise-url`, or the listening address with `port` (the bound
    /// port, for `--listen host:0`).
    public func advertiseURL(boundPort port: Int) -> String {
        if let advertiseURLSetting { return advertiseURLSetting }
        let host = http.host == "0.0.0.0" ? "127.0.0.1" : http.host
        return "http://\(host):\(port)"
    }

    /// How the node takes part in its cluster.
    public func membership(advertiseURL: String) -> ClusterMember.Configuration {
        var configuration = ClusterMember.Configuration(nodeID: nodeID, advertiseURL: advertiseURL)
        configuration.settings = writePath.reactions.agreementText
        configuration.lease = lease
        configuration.renewInterval = lease / 3
        configuration.maximumMoves = maximumMoves
        return configuration
    }

    /// A pool of the cluster membership's own: two connections for its rounds and map reads,
    /// one more for lease renewals alone (a claim in a round may wait for a paused node's locks;
    /// a renewal must not wait behind it).
    public func membershipPostgres(connections: Int) -> PostgresConfiguration {
        var configuration = PostgresConfiguration(url: postgresURL)
        configuration.maximumConnections = connections
        configuration.applicationName = "counter-service-membership"
        return configuration
    }

    /// The pool of the change events' readers (`GET /v1/events` and its long polls): connections
    /// of their own, so a consumer never waits behind the flushes for one.
    public func eventsPostgres(connections: Int) -> PostgresConfiguration {
        var configuration = PostgresConfiguration(url: postgresURL)
        configuration.maximumConnections = connections
        configuration.applicationName = "counter-service-events"
        return configuration
    }

    /// The PostgreSQL pool configuration these settings describe.
    public var postgres: PostgresConfiguration {
        var configuration = PostgresConfiguration(url: postgresURL)
        configuration.maximumConnections = postgresPoolSize
        // A paused node must not hold a flush transaction's locks on its slots' rows — which a
        // takeover waits for — much longer than its lease.
        configuration.idleInTransactionTimeout = lease
        return configuration
    }
}

/// A setting with a value the node cannot use.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
