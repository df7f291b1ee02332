import CounterCore
import Foundation
import NodeAPI
import NodeCluster
import NodeHTTP
import PostgresDriver
import RedisDriver
import UserTokens
import WritePath

/// The settings as flags and environment variables read them: the table `--help` shows, the
/// forms each is written in, and `parse`.
extension NodeConfiguration {
    /// One configurable setting: its flag, environment variable, default and meaning.
    public struct Setting: Sendable {
        public let flag: String
        public let environment: String
        public let summary: String
        let defaultValue: @Sendable (NodeConfiguration) -> String
        let apply: @Sendable (inout NodeConfiguration, String) -> String? // nil on success, else why not
    }

    /// Every setting, in the order `--help` shows them.
    public static let settings: [Setting] = [
        Setting(
            flag: "--postgres-url", environment: "COUNTER_POSTGRES_URL",
            summary: "PostgreSQL connection URL (libpq syntax)",
            defaultValue: { $0.postgresURL },
            apply: {
                $0.postgresURL = $1
                return nil
            }),
        Setting(
            flag: "--redis-url", environment: "COUNTER_REDIS_URL",
            summary:
                "Redis URL: redis://[:password@]host[:port][/database] for one server, or redis-cluster://[:password@]host:port[,host:port…] for a Redis Cluster's seed nodes",
            defaultValue: { $0.redisURL },
            apply: { configuration, value in
                do { _ = try RedisConfiguration(url: value) } catch let error as RedisError { return error.message } catch { return "\(error)" }
                configuration.redisURL = value
                return nil
            }),
        Setting(
            flag: "--postgres-pool-size", environment: "COUNTER_POSTGRES_POOL_SIZE",
            summary: "PostgreSQL connections the node opens at most (1-256)",
            defaultValue: { String($0.postgresPoolSize) },
            apply: { configuration, value in
                guard let size = Int(value), (1...256).contains(size) else { return "must be a whole number from 1 to 256" }
                configuration.postgresPoolSize = size
                return nil
            }),
        integer(
            "--shards", "COUNTER_SHARDS", "shards, each the single owner of its posts and slots, with its own Redis connection and write-behind",
            1...256,
            get: { $0.writePath.shardCount }, set: { $0.writePath.shardCount = $1 }),
        choice(
            "--ack", "COUNTER_ACK",
            "when writes are answered: redis (after the Redis write), memory (before it; may lose the newest changes), postgres (after the flush commits), replicated (after the Redis write reached --ack-replicas replicas; a Redis failover loses none; not confirmed in time: 503 not_replicated)",
            refusal: "must be redis, memory, postgres or replicated",
            get: { $0.writePath.acknowledgement }, set: { $0.writePath.acknowledgement = $1 }),
        integer(
            "--ack-replicas", "COUNTER_ACK_REPLICAS", "with --ack replicated: replicas of each master a write must reach before it is answered",
            1...16,
            get: { $0.writePath.acknowledgementReplicas }, set: { $0.writePath.acknowledgementReplicas = $1 }),
        duration(
            "--ack-replica-timeout", "COUNTER_ACK_REPLICA_TIMEOUT",
            "with --ack replicated: how long a write waits for its replicas before it is answered 503 not_replicated",
            .milliseconds(1) ... .seconds(60),
            get: { $0.writePath.acknowledgementReplicaTimeout }, set: { $0.writePath.acknowledgementReplicaTimeout = $1 }),
        integer(
            "--backlog-limit", "COUNTER_BACKLOG_LIMIT", "changes a shard lets wait for PostgreSQL before refusing writes with 503", 1...1_000_000_000,
            get: { $0.writePath.backlogLimitPerShard }, set: { $0.writePath.backlogLimitPerShard = $1 }),
        duration(
            "--backlog-max-age", "COUNTER_BACKLOG_MAX_AGE",
            "how long a shard's oldest change may wait for PostgreSQL before the shard refuses writes with 503 backlog_full",
            .zero ... .seconds(86_400), zero: "no limit",
            get: { $0.writePath.backlogMaximumAge ?? .zero }, set: { $0.writePath.backlogMaximumAge = $1 == .zero ? nil : $1 }),
        Setting(
            flag: "--hot-idle", environment: "COUNTER_HOT_IDLE",
            summary:
                "a post untouched this long leaves Redis once PostgreSQL has all of it; its reads are then answered from PostgreSQL (\(durationForm), at least 100ms; off: never)",
            defaultValue: { $0.writePath.hotIdle?.settingText ?? "off" },
            apply: { configuration, value in
                if value == "off" || value == "0" {
                    configuration.writePath.hotIdle = nil
                    return nil
                }
                guard let idle = Duration.parsingSetting(value), idle >= .milliseconds(100) else {
                    return "must be a duration of at least 100ms, like 60s or 10m, or off"
                }
                configuration.writePath.hotIdle = idle
                return nil
            }),
        Setting(
            flag: "--hot-memory-target", environment: "COUNTER_HOT_MEMORY_TARGET",
            summary:
                "Redis used_memory per master above which the least recently touched posts are evicted before they are idle (256mb, 4gb; off: idle time only)",
            defaultValue: { $0.writePath.hotMemoryTarget.map(ByteSize.text) ?? "off" },
            apply: { configuration, value in
                if value == "off" {
                    configuration.writePath.hotMemoryTarget = nil
                    return nil
                }
                guard let bytes = ByteSize.parse(value), bytes >= 1 << 20 else { return "must be a size of at least 1mb, like 256mb or 4gb, or off" }
                configuration.writePath.hotMemoryTarget = bytes
                return nil
            }),
        integer(
            "--max-queued-operations", "COUNTER_MAX_QUEUED_OPERATIONS",
            "operations a shard holds waiting to be decided (about 200 bytes each); more get 503 overloaded", 1...100_000_000,
            get: { $0.writePath.maximumQueuedOperationsPerShard }, set: { $0.writePath.maximumQueuedOperationsPerShard = $1 }),
        integer(
            "--unknown-posts-remembered", "COUNTER_UNKNOWN_POSTS_REMEMBERED",
            "posts a shard remembers as not existing for 5 s, so PostgreSQL is not asked again (about 100 bytes each; the oldest go first)",
            1...10_000_000,
            get: { $0.writePath.unknownPostsRemembered }, set: { $0.writePath.unknownPostsRemembered = $1 }),
        duration(
            "--flush-interval", "COUNTER_FLUSH_INTERVAL", "a flush runs at least this often while changes wait", .milliseconds(1) ... .seconds(3_600),
            get: { $0.writePath.flushInterval }, set: { $0.writePath.flushInterval = $1 }),
        integer(
            "--flush-batch-size", "COUNTER_FLUSH_BATCH_SIZE", "changes that trigger a flush at once; also about the most one flush carries",
            1...1_000_000,
            get: { $0.writePath.flushBatchSize }, set: { $0.writePath.flushBatchSize = $1 }),
        duration(
            "--flush-max-age", "COUNTER_FLUSH_MAX_AGE", "a change waits at most about this long, from when its slot's log first had a change waiting",
            .milliseconds(1) ... .seconds(3_600),
            get: { $0.writePath.flushMaxAge }, set: { $0.writePath.flushMaxAge = $1 }),
        Setting(
            flag: "--listen", environment: "COUNTER_LISTEN", summary: "HTTP address and port (IPv4), host:port",
            defaultValue: { "\($0.http.host):\($0.http.port)" },
            apply: { configuration, value in
                guard let colon = value.lastIndex(of: ":"), let port = Int(value[value.index(after: colon)...]),
                    (0...65535).contains(port), !value[..<colon].isEmpty
                else { return "must be host:port, like 127.0.0.1:8080" }
                configuration.http.host = String(value[..<colon])
                configuration.http.port = port
                return nil
            }),
        bearerToken("--api-token", "COUNTER_API_TOKEN", "bearer token for /v1 and /metrics (required unless listening on loopback)", \.api),
        bearerToken("--admin-token", "COUNTER_ADMIN_TOKEN", "bearer token for /admin and /metrics (required unless listening on loopback)", \.admin),
        boolean(
            "--events", "COUNTER_EVENTS",
            "whether every flush also writes a change event for each like and unlike it commits (the outbox read by GET /v1/events or logical replication); set it the same on every node",
            get: { $0.writePath.events }, set: { $0.writePath.events = $1 }),
        Setting(
            flag: "--reactions", environment: "COUNTER_REACTIONS",
            summary:
                "the reaction kinds: a list of names ([a-z0-9_]{1,32}, like,love,haha,wow,sad,angry), or open (any such name); like's rows stay likes and posts.likes_count; the same on every node",
            defaultValue: { configuration in
                switch configuration.writePath.reactions.kinds {
                case .fixed(let list): return list.map(\.name).joined(separator: ",")
                case .open: return "open"
                }
            },
            apply: { configuration, value in
                switch ReactionModel.parseKinds(value) {
                case .success(let kinds):
                    configuration.writePath.reactions.kinds = kinds
                    return nil
                case .failure(let error):
                    return error.message
                }
            }),
        choice(
            "--reactions-per-user", "COUNTER_REACTIONS_PER_USER",
            "one (a user holds one kind of a post: a new kind replaces the old in one step) or many (each kind its own toggle); the same on every node",
            refusal: "must be one or many",
            get: { $0.writePath.reactions.perUser }, set: { $0.writePath.reactions.perUser = $1 }),
        integer(
            "--reaction-kinds-per-post", "COUNTER_REACTION_KINDS_PER_POST",
            "distinct kinds a post may hold with --reactions open; a new kind beyond it is refused 409 too_many_kinds",
            1...1_000,
            get: { $0.writePath.reactions.kindsPerPost }, set: { $0.writePath.reactions.kindsPerPost = $1 }),
        integer(
            "--reaction-summary-kinds", "COUNTER_REACTION_SUMMARY_KINDS",
            "kinds a feed page gives per post with include reactions (the largest counts first; the total counts them all)",
            1...1_000,
            get: { $0.writePath.reactions.summaryKinds }, set: { $0.writePath.reactions.summaryKinds = $1 }),
        Setting(
            flag: "--event-retention", environment: "COUNTER_EVENT_RETENTION",
            summary:
                "change events older than this are pruned, oldest first, in small batches (\(durationForm), at least 60s; off: kept until deleted by hand)",
            defaultValue: { $0.eventRetention?.settingText ?? "off" },
            apply: { configuration, value in
                if value == "off" {
                    configuration.eventRetention = nil
                    return nil
                }
                guard let age = Duration.parsingSetting(value), age >= .seconds(60) else {
                    return "must be a duration of at least 60s, like 24h or 7d, or off"
                }
                configuration.eventRetention = age
                return nil
            }),
        bearerToken("--events-token", "COUNTER_EVENTS_TOKEN", "bearer token for GET /v1/events only (the admin token is taken there too)", \.events),
        Setting(
            flag: "--user-token-secret", environment: "COUNTER_USER_TOKEN_SECRET",
            summary:
                "HS256 shared secret of the app's identity provider (at least 32 bytes): end users' tokens signed with it are accepted on the user routes",
            defaultValue: { $0.users.secret == nil ? "(none)" : "(set)" },
            apply: { configuration, value in
                guard HMACSecret(value) != nil else { return "must be at least \(HMACSecret.minimumBytes) bytes" }
                configuration.users.secret = value
                return nil
            }),
        Setting(
            flag: "--user-token-jwks", environment: "COUNTER_USER_TOKEN_JWKS",
            summary:
                "JWKS file path or http(s):// URL with the identity provider's RS256/ES256 public keys; read at start and every --user-token-jwks-refresh",
            defaultValue: { $0.users.keySetLocation ?? "(none)" },
            apply: { configuration, value in
                guard !value.isEmpty else { return "must be a file path or an http(s):// URL" }
                if value.contains("://") {
                    guard value.hasPrefix("http://") || value.hasPrefix("https://"), URL(string: value)?.host != nil else {
                        return "must be a file path or an http(s):// URL"
                    }
                }
                configuration.users.keySetLocation = value
                return nil
            }),
        duration(
            "--user-token-jwks-refresh", "COUNTER_USER_TOKEN_JWKS_REFRESH",
            "how often the JWKS is read again (a rotated key is picked up without a restart)", .seconds(1) ... .seconds(86_400), step: .seconds(1),
            get: { $0.users.keySetRefresh }, set: { $0.users.keySetRefresh = $1 }),
        optionalText(
            "--user-token-issuer", "COUNTER_USER_TOKEN_ISSUER", "when set, end users' tokens must carry this \"iss\"",
            get: { $0.users.rules.issuer }, set: { $0.users.rules.issuer = $1 }),
        optionalText(
            "--user-token-audience", "COUNTER_USER_TOKEN_AUDIENCE", "when set, end users' tokens must name this in \"aud\"",
            get: { $0.users.rules.audience }, set: { $0.users.rules.audience = $1 }),
        Setting(
            flag: "--user-token-claim", environment: "COUNTER_USER_TOKEN_CLAIM",
            summary: "the claim holding the user id (a positive 64-bit integer in digits)",
            defaultValue: { $0.users.rules.userClaim },
            apply: { configuration, value in
                guard !value.isEmpty, value.count <= 64 else { return "must be a claim name (1-64 characters)" }
                configuration.users.rules.userClaim = value
                return nil
            }),
        duration(
            "--user-token-leeway", "COUNTER_USER_TOKEN_LEEWAY", "how far a token's exp and nbf may be off, for clocks that differ",
            .zero ... .seconds(600), step: .seconds(1),
            get: { .seconds($0.users.rules.leewaySeconds) }, set: { $0.users.rules.leewaySeconds = $1.components.seconds }),
        boolean(
            "--api-token-on-user-routes", "COUNTER_API_TOKEN_ON_USER_ROUTES",
            "whether the user routes also take the API token, with the user named in a Counter-User header (for a gateway that authenticated the user itself)",
            get: { $0.users.apiTokenOnUserRoutes }, set: { $0.users.apiTokenOnUserRoutes = $1 }),
        boolean(
            "--seed-route", "COUNTER_SEED_ROUTE",
            "whether POST /api/posts/{id}/like answers, toggling the token's user's like in the seed's shape {\"is_liked\",\"likes_count\"}",
            get: { $0.users.seedRoute }, set: { $0.users.seedRoute = $1 }),
        integer(
            "--user-write-rate", "COUNTER_USER_WRITE_RATE",
            "writes per second each end user may make on the user routes; more are answered 429 (0: no limit)", 0...1_000_000,
            get: { $0.users.writesPerSecond }, set: { $0.users.writesPerSecond = $1 }),
        integer(
            "--user-write-burst", "COUNTER_USER_WRITE_BURST", "writes an end user may make at once after a pause", 1...1_000_000,
            get: { $0.users.burst }, set: { $0.users.burst = $1 }),
        integer(
            "--user-limit-users", "COUNTER_USER_LIMIT_USERS",
            "end users whose write limits are kept at most (about 100 bytes each; idle ones go first)", 16...100_000_000,
            get: { $0.users.trackedUsers }, set: { $0.users.trackedUsers = $1 }),
        integer(
            "--max-connections", "COUNTER_MAX_CONNECTIONS",
            "open HTTP connections at most; more are closed at once (each holds a file descriptor and, while a request is read, up to 10 KiB of headers and 64 KiB of body)",
            1...1_000_000,
            get: { $0.http.maximumConnections }, set: { $0.http.maximumConnections = $1 }),
        Setting(
            flag: "--node", environment: "COUNTER_NODE_URL",
            summary: "the running node that flush, inspect, stats, reconcile and dead-letters talk to",
            defaultValue: { $0.nodeURL },
            apply: { configuration, value in
                guard value.hasPrefix("http://") || value.hasPrefix("https://"),
                    let components = URLComponents(string: value), let host = components.host, !host.isEmpty,
                    components.url != nil
                else {
                    return "must be a URL like http://127.0.0.1:8080"
                }
                configuration.nodeURLSetting = value.hasSuffix("/") ? String(value.dropLast()) : value
                return nil
            }),
        Setting(
            flag: "--tls-listen", environment: "COUNTER_TLS_LISTEN",
            summary:
                "also serve HTTPS on this address (IPv4 host:port, with --tls-cert and --tls-key): HTTP/2 or HTTP/1.1 by ALPN, for apps calling the node directly; --listen stays cleartext (HTTP/1.1, and HTTP/2 by prior knowledge) for gateways and peers",
            defaultValue: { $0.tlsListen.map { "\($0.host):\($0.port)" } ?? "(none)" },
            apply: { configuration, value in
                guard let colon = value.lastIndex(of: ":"), let port = Int(value[value.index(after: colon)...]), (0...65_535).contains(port),
                    !value[..<colon].isEmpty
                else { return "must be host:port" }
                configuration.tlsListen = NodeConfiguration.ListenAddress(host: String(value[..<colon]), port: port)
                return nil
            }),
        optionalText(
            "--tls-cert", "COUNTER_TLS_CERT", "the PEM certificate chain --tls-listen serves", absent: "(none)",
            get: { $0.tlsCertificateFile }, set: { $0.tlsCertificateFile = $1 }),
        optionalText(
            "--tls-key", "COUNTER_TLS_KEY", "the PEM private key of --tls-cert", absent: "(none)",
            get: { $0.tlsKeyFile }, set: { $0.tlsKeyFile = $1 }),
        duration(
            "--idle-timeout", "COUNTER_IDLE_TIMEOUT", "how long an idle or slow HTTP connection is kept", .seconds(1) ... .seconds(3_600),
            step: .seconds(1),
            get: { $0.http.idleTimeout }, set: { $0.http.idleTimeout = $1 }),
        boolean(
            "--migrate", "COUNTER_MIGRATE", "whether serve runs migrate first",
            get: { $0.migrateOnStart }, set: { $0.migrateOnStart = $1 }),
        integer(
            "--demo-posts", "COUNTER_DEMO_POSTS", "serve creates posts 1..N if missing, for trying the node out", 0...1_000_000,
            get: { $0.demoPosts }, set: { $0.demoPosts = $1 }),
        choice(
            "--log-level", "COUNTER_LOG_LEVEL", "least important log level written: debug, info, warn, error",
            refusal: "must be debug, info, warn or error", get: { $0.logLevel }, set: { $0.logLevel = $1 }),
        choice(
            "--log-format", "COUNTER_LOG_FORMAT",
            "how log lines are written: text (time=… level=… event=… key=value) or json (one object per line, the same fields)",
            refusal: "must be text or json", get: { $0.logFormat }, set: { $0.logFormat = $1 }),
        Setting(
            flag: "--node-id", environment: "COUNTER_NODE_ID",
            summary: "this node's id in its cluster, stable across restarts (letters, digits, - _ .; at most 64)",
            defaultValue: { $0.nodeID },
            apply: { configuration, value in
                guard !value.isEmpty, value.count <= 64,
                    value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") })
                else {
                    return "must be 1-64 ASCII letters, digits, -, _ and ."
                }
                configuration.nodeID = value
                return nil
            }),
        Setting(
            flag: "--advertise-url", environment: "COUNTER_ADVERTISE_URL",
            summary: "where other nodes and slot-aware clients reach this node (default: http://<listen host>:<port>)",
            defaultValue: { $0.advertiseURLSetting ?? "(from --listen)" },
            apply: { configuration, value in
                guard value.hasPrefix("http://"), let components = URLComponents(string: value), let host = components.host,
                    !host.isEmpty, components.port != nil, components.path.isEmpty || components.path == "/"
                else {
                    return "must be a URL like http://10.0.0.5:8080 (scheme, host and port; no path)"
                }
                configuration.advertiseURLSetting = value.hasSuffix("/") ? String(value.dropLast()) : value
                return nil
            }),
        duration(
            "--lease", "COUNTER_LEASE", "how long the node's lease lasts without renewal; a node silent this long loses its slots",
            .milliseconds(600) ... .seconds(600),
            get: { $0.lease }, set: { $0.lease = $1 }),
        duration(
            "--ready-max-lag", "COUNTER_READY_MAX_LAG", "/readyz fails while the oldest change waiting for PostgreSQL is older than this",
            .zero ... .seconds(86_400), step: .seconds(1), zero: "never",
            get: { .seconds($0.readyMaxLagSeconds) }, set: { $0.readyMaxLagSeconds = Int($1.components.seconds) }),
        duration(
            "--shutdown-timeout", "COUNTER_SHUTDOWN_TIMEOUT",
            "a shutdown that has not flushed everything this long after the first signal exits 0 and leaves the rest in the Redis logs for the next start, saying what it left",
            .zero ... .seconds(86_400), step: .seconds(1), zero: "no limit",
            get: { .seconds($0.shutdownTimeoutSeconds) }, set: { $0.shutdownTimeoutSeconds = Int($1.components.seconds) }),
        integer(
            "--max-moving-slots", "COUNTER_MAX_MOVING_SLOTS",
            "slots handed between live nodes at once (takeovers of dead nodes' slots are not limited)", 1...16_384,
            get: { $0.maximumMoves }, set: { $0.maximumMoves = $1 }),
        Setting(
            flag: "--key-prefix", environment: "COUNTER_KEY_PREFIX", summary: "prefix of every Redis key (letters, digits, - and _)",
            defaultValue: { $0.writePath.keyPrefix },
            apply: { configuration, value in
                guard !value.isEmpty, value.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
                    return "must be letters, digits, - and _"
                }
                configuration.writePath.keyPrefix = value
                return nil
            }),
    ]

    private static func integer(
        _ flag: String, _ environment: String, _ summary: String, _ range: ClosedRange<Int>,
        get: @escaping @Sendable (NodeConfiguration) -> Int,
        set: @escaping @Sendable (inout NodeConfiguration, Int) -> Void
    ) -> Setting {
        Setting(
            flag: flag, environment: environment, summary: "\(summary) (\(range.lowerBound)-\(range.upperBound))",
            defaultValue: { String(get($0)) },
            apply: { configuration, value in
                guard let number = Int(value), range.contains(number) else {
                    return "must be a whole number from \(range.lowerBound) to \(range.upperBound)"
                }
                set(&configuration, number)
                return nil
            })
    }

    /// A setting that takes one of `Value`'s names; `refusal` says which when another is given.
    private static func choice<Value: RawRepresentable>(
        _ flag: String, _ environment: String, _ summary: String, refusal: String,
        get: @escaping @Sendable (NodeConfiguration) -> Value,
        set: @escaping @Sendable (inout NodeConfiguration, Value) -> Void
    ) -> Setting where Value.RawValue == String {
        Setting(
            flag: flag, environment: environment, summary: summary,
            defaultValue: { get($0).rawValue },
            apply: { configuration, value in
                guard let chosen = Value(rawValue: value) else { return refusal }
                set(&configuration, chosen)
                return nil
            })
    }

    /// How every duration setting is written (and shown): a whole number with its unit.
    static let durationForm = "a duration: 500ms, 30s, 10m, 2h, 7d; a bare number is seconds"

    /// A duration setting, written and shown as `durationForm` says, within `range`, in whole
    /// `step`s; `zero`, when given, says what 0 means.
    private static func duration(
        _ flag: String, _ environment: String, _ summary: String, _ range: ClosedRange<Duration>, step: Duration = .milliseconds(1),
        zero: String? = nil,
        get: @escaping @Sendable (NodeConfiguration) -> Duration,
        set: @escaping @Sendable (inout NodeConfiguration, Duration) -> Void
    ) -> Setting {
        let bounds = "\(range.lowerBound.settingText) to \(range.upperBound.settingText)"
        let whole = step == .seconds(1) ? ", whole seconds" : ""
        return Setting(
            flag: flag, environment: environment,
            summary: "\(summary) (\(durationForm); \(bounds)\(whole)\(zero.map { "; 0: \($0)" } ?? ""))",
            defaultValue: { get($0).settingText },
            apply: { configuration, value in
                guard let duration = Duration.parsingSetting(value), range.contains(duration),
                    duration.inMilliseconds % step.inMilliseconds == 0
                else { return "must be a duration from \(bounds)\(whole), like 30s or 500ms" }
                set(&configuration, duration)
                return nil
            })
    }

    /// Settings' former names, still read (from the flag or the environment variable) as the
    /// setting that replaced them: each took a bare number of milliseconds.
    public static let formerNames: [(flag: String, environment: String, now: String)] = [
        ("--ack-replica-timeout-ms", "COUNTER_ACK_REPLICA_TIMEOUT_MS", "--ack-replica-timeout"),
        ("--flush-interval-ms", "COUNTER_FLUSH_INTERVAL_MS", "--flush-interval"),
        ("--flush-max-age-ms", "COUNTER_FLUSH_MAX_AGE_MS", "--flush-max-age"),
        ("--lease-ms", "COUNTER_LEASE_MS", "--lease"),
    ]

    /// The setting `flag` names, and its value as that setting reads it: a former name's bare
    /// milliseconds become `<n>ms`.
    private static func setting(named flag: String, value: String) -> (Setting, String)? {
        if let setting = settings.first(where: { $0.flag == flag }) { return (setting, value) }
        guard let former = formerNames.first(where: { $0.flag == flag }), let setting = settings.first(where: { $0.flag == former.now })
        else { return nil }
        return (setting, !value.isEmpty && value.allSatisfy { $0.isASCII && $0.isNumber } ? "\(value)ms" : value)
    }

    /// A bearer token of `tokens` (at least 16 characters; shown as set or not, never itself).
    private static func bearerToken(
        _ flag: String, _ environment: String, _ summary: String,
        _ token: WritableKeyPath<AccessTokens, String?> & Sendable
    ) -> Setting {
        Setting(
            flag: flag, environment: environment, summary: summary,
            defaultValue: { $0.tokens[keyPath: token] == nil ? "(none)" : "(set)" },
            apply: { configuration, value in
                guard value.count >= 16 else { return "must be at least 16 characters" }
                configuration.tokens[keyPath: token] = value
                return nil
            })
    }

    /// A setting that is off until given a non-empty text.
    private static func optionalText(
        _ flag: String, _ environment: String, _ summary: String, absent: String = "(any)",
        get: @escaping @Sendable (NodeConfiguration) -> String?,
        set: @escaping @Sendable (inout NodeConfiguration, String) -> Void
    ) -> Setting {
        Setting(
            flag: flag, environment: environment, summary: summary,
            defaultValue: { get($0) ?? absent },
            apply: { configuration, value in
                guard !value.isEmpty else { return "must not be empty" }
                set(&configuration, value)
                return nil
            })
    }

    private static func boolean(
        _ flag: String, _ environment: String, _ summary: String,
        get: @escaping @Sendable (NodeConfiguration) -> Bool,
        set: @escaping @Sendable (inout NodeConfiguration, Bool) -> Void
    ) -> Setting {
        Setting(
            flag: flag, environment: environment, summary: "\(summary): true or false",
            defaultValue: { String(get($0)) },
            apply: { configuration, value in
                guard let flag = Bool(value) else { return "must be true or false" }
                set(&configuration, flag)
                return nil
            })
    }

    /// Reads the environment, then `arguments` (`--flag value` or `--flag=value`); flags win.
    /// - Returns: the configuration and the arguments that are not settings, in order.
    /// - Throws: `ConfigurationError` naming the setting and what is wrong with its value.
    public static func parse(arguments: [String], environment: [String: String]) throws(ConfigurationError) -> (NodeConfiguration, [String]) {
        var configuration = NodeConfiguration()
        // A former name's variable first: the setting's own name wins when both are set.
        for former in formerNames {
            guard let value = environment[former.environment], let (setting, converted) = setting(named: former.flag, value: value) else { continue }
            if let why = setting.apply(&configuration, converted) {
                throw ConfigurationError(message: "\(former.environment)=\(value): \(why)")
            }
        }
        for setting in settings {
            if let value = environment[setting.environment], let why = setting.apply(&configuration, value) {
                throw ConfigurationError(message: "\(setting.environment)=\(value): \(why)")
            }
        }
        var rest: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let (flag, inlineValue) = split(argument)
            guard settings.contains(where: { $0.flag == flag }) || formerNames.contains(where: { $0.flag == flag }) else {
                rest.append(argument)
                index += 1
                continue
            }
            let value: String
            if let inlineValue {
                value = inlineValue
            } else {
                guard index + 1 < arguments.count else { throw ConfigurationError(message: "\(flag) needs a value") }
                index += 1
                value = arguments[index]
            }
            guard let (setting, converted) = setting(named: flag, value: value) else { preconditionFailure("\(flag) is a setting") }
            if let why = setting.apply(&configuration, converted) {
                throw ConfigurationError(message: "\(flag) \(value): \(why)")
            }
            index += 1
        }
        return (configuration, rest)
    }

    private static func split(_ argument: String) -> (String, String?) {
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }

    /// The settings as `--help` lists them: flag, environment variable, default, meaning.
    public static var settingsHelp: String {
        let defaults = NodeConfiguration()
        let listed = settings.map { setting in
            "  \(setting.flag) VALUE\n      env \(setting.environment), default \(setting.defaultValue(defaults))\n      \(setting.summary)"
        }
        let former = formerNames.map { "  \($0.flag) N (env \($0.environment)): read as \($0.now) Nms" }
        return (listed + ["", "Former names, still read (a bare number of milliseconds):"] + former).joined(separator: "\n")
    }
}
