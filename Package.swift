// swift-tools-version:6.0
import PackageDescription

/// CounterService: a like/reaction counter that answers at once from actor-isolated shards backed
/// by Redis, and writes membership and counts to PostgreSQL in batches. See docs/ARCHITECTURE.md.
let package = Package(
    name: "CounterService",
    // Linux ignores this. On Apple platforms: CounterClient's models need Observation (iOS 17,
    // macOS 14); the server's targets use Synchronization's Mutex and Atomic (macOS 15).
    platforms: [.macOS(.v15), .iOS(.v17)],
    products: [
        .executable(name: "counter-node", targets: ["CounterNodeCLI"]),
        .executable(name: "counter-bench", targets: ["Bench"]),
        .executable(name: "counter-events-example", targets: ["EventsConsumerExample"]),
        .library(name: "ShardRouter", targets: ["ShardRouter"]),
        // For apps: the HTTP client and the optimistic like button model (Foundation only).
        .library(name: "CounterClient", targets: ["CounterClient"]),
    ],
    targets: [
        // C libraries from Debian's -dev packages, one system-library target each.
        .systemLibrary(
            name: "CLibPQ", pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]),
        .systemLibrary(
            name: "CHiredis", pkgConfig: "hiredis",
            providers: [.apt(["libhiredis-dev"])]),
        .systemLibrary(
            // No pkg-config: its flags for libcrypto are ones SwiftPM refuses, and the headers
            // are in the default include path.
            name: "COpenSSL",
            providers: [.apt(["libssl-dev"])]),
        // Linux's epoll, which Glibc's module leaves out (header only, nothing to link).
        .systemLibrary(name: "CLinuxEvents"),
        // HTTP/2 framing for the load generator's HTTP/2 client (libnghttp2-dev).
        .systemLibrary(
            name: "CNGHTTP2", pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]),
        // The HTTP engine: h2o (libh2o-evloop-dev) serving HTTP/1.1 and HTTP/2, behind a small C
        // interface of ours (include/counter_h2o.h) that NodeHTTP's server drives.
        .target(
            name: "CH2O",
            cSettings: [.define("H2O_USE_LIBUV", to: "0")],
            linkerSettings: [.linkedLibrary("h2o-evloop"), .linkedLibrary("ssl"), .linkedLibrary("crypto")]),

        // The small shared core every module may use: decimal integers as ASCII bytes, entity ids,
        // Duration in seconds. Pure.
        .target(name: "CounterCore"),
        // Every request and response body of the HTTP API, defined once (Codable), for the node,
        // the client library and the operator commands, and the one JSON writer that encodes them.
        // Foundation and CounterCore only.
        .target(name: "CounterWire", dependencies: ["CounterCore"]),
        // Pure routing: post -> logical slot -> shard, and Redis-Cluster-compatible hash tags.
        .target(name: "ShardRouter"),

        // The drivers: clients of the servers, knowing nothing of what the service stores. Each
        // imports one C library (`internal import`); both run their blocking calls on a thread per
        // connection (`BlockingIO`).
        .target(name: "BlockingIO"),
        // The PostgreSQL client (libpq): connections, the pool, statements, values, rows, errors.
        .target(name: "PostgresDriver", dependencies: ["BlockingIO", "CLibPQ", "CounterCore"]),
        // The Redis client (hiredis): connections, commands, replies, errors, and routing by hash
        // slot to one server or a Redis Cluster's masters (redirects, the slot map, fenced writes).
        .target(name: "RedisDriver", dependencies: ["BlockingIO", "CHiredis", "CounterCore", "ShardRouter"]),
        // The service's storage on the drivers, its one owner: the schema and its SQL (flush,
        // lists, events, slot table, registry, the operators' checks), the Redis key layout, the
        // log entry format, the epoch keys.
        .target(name: "Persistence", dependencies: ["CounterCore", "PostgresDriver", "RedisDriver", "ShardRouter"]),
        // The write path: shard actors, their pure batch logic, the write-behind flushers. Knows
        // no wire format: it answers with its own LikeState and ShardStats.
        .target(name: "WritePath", dependencies: ["CounterCore", "Persistence", "PostgresDriver", "RedisDriver", "ShardRouter"]),
        // Running as one node of several: membership and leases in PostgreSQL, which slots this
        // node claims, hands off, serves and drops (`MembershipRound`, pure), and the slot map.
        .target(name: "NodeCluster", dependencies: ["CounterCore", "Persistence", "PostgresDriver", "RedisDriver", "ShardRouter", "WritePath"]),
        // The HTTP transport: h2o (CH2O) behind HTTPRequest/HTTPResponse/HTTPHandler, HTTP/1.1 and
        // HTTP/2; and the peers' HTTP/1.1 client. Knows no route.
        .target(name: "NodeHTTP", dependencies: ["CH2O", "CLinuxEvents", "CounterCore"]),
        // End-user tokens: JWT parsing, claim rules (pure), signatures through OpenSSL, the
        // verified-token cache, and the JWKS key set read from a file or URL.
        .target(name: "UserTokens", dependencies: ["COpenSSL", "CounterCore"]),
        // The HTTP API: routes, auth, metrics, the admin answers, on top of the write path.
        .target(
            name: "NodeAPI",
            dependencies: ["CounterCore", "CounterWire", "NodeCluster", "NodeHTTP", "Persistence", "ShardRouter", "UserTokens", "WritePath"]),
        // The operator subcommands (flush, inspect, stats, reconcile, dead-letters): clients of
        // a running node's admin API through CounterClient.
        .target(name: "OperatorCommands", dependencies: ["CounterClient", "CounterCore", "CounterWire"]),
        // The node's composition root: configuration, command line, `serve` and its lifecycle.
        .target(
            name: "CounterNode",
            dependencies: [
                "CounterCore", "NodeAPI", "NodeCluster", "NodeHTTP", "OperatorCommands", "Persistence", "PostgresDriver", "RedisDriver", "UserTokens",
                "WritePath",
            ]),

        // The client library apps add: HTTP client, optimistic like state machine, @Observable
        // models. Foundation, Observation, the wire format (with its small core) and the pure slot
        // hash (for slot-aware routing) only; none of the server's I/O.
        .target(name: "CounterClient", dependencies: ["CounterCore", "CounterWire", "ShardRouter"]),

        // Thin executables.
        .executableTarget(name: "CounterNodeCLI", dependencies: ["CounterNode"]),
        // The change events' consumer a backend copies: follows GET /v1/events with a cursor file.
        .executableTarget(name: "EventsConsumerExample", dependencies: ["CounterClient", "CounterWire"], path: "Examples/EventsConsumer"),
        .executableTarget(
            name: "Bench",
            dependencies: [
                "BenchKit", "ChildProcesses", "CounterCore", "CounterNode", "CounterWire", "Persistence", "PostgresDriver", "RedisDriver",
                "ShardRouter",
                "UserTokens", "WritePath",
            ]),
        // Child processes with a clean signal mask (the bench's chaos run, the tests).
        .target(name: "ChildProcesses"),
        // The bench's parts: histogram, Zipf, correctness check (pure), load generator.
        .target(name: "BenchKit", dependencies: ["CounterCore", "CounterWire", "PostgresDriver", "ShardRouter", "CLinuxEvents", "CNGHTTP2"]),

        // Shared by the test targets: where the test servers are, private servers a test may
        // restart, child processes, services kept running, seeded fuzz input.
        .target(
            name: "TestSupport", dependencies: ["ChildProcesses", "CounterCore", "Persistence", "PostgresDriver", "RedisDriver"],
            path: "Tests/TestSupport"),
        // Harnesses of a node's parts on the test servers (a write path, its HTTP API, several
        // node processes), for the tests of those parts.
        .target(
            name: "NodeTestSupport",
            dependencies: [
                "CounterCore", "CounterWire", "NodeAPI", "NodeHTTP", "Persistence", "PostgresDriver", "RedisDriver", "ShardRouter", "TestSupport",
                "WritePath",
            ], path: "Tests/NodeTestSupport"),
        // One test target per module tested.
        .testTarget(name: "BenchKitTests", dependencies: ["BenchKit", "CounterWire", "ShardRouter", "TestSupport"]),
        .testTarget(name: "CounterClientTests", dependencies: ["CounterClient", "CounterWire", "TestSupport"]),
        .testTarget(name: "CounterWireTests", dependencies: ["CounterWire"]),
        .testTarget(name: "CounterCoreTests", dependencies: ["CounterCore"]),
        .testTarget(name: "UserTokensTests", dependencies: ["CounterCore", "UserTokens", "TestSupport"]),
        .testTarget(name: "ShardRouterTests", dependencies: ["ShardRouter", "CounterCore", "Persistence", "TestSupport"]),
        .testTarget(name: "NodeClusterTests", dependencies: ["NodeCluster", "ShardRouter"]),
        .testTarget(name: "DriverTests", dependencies: ["CounterCore", "PostgresDriver", "RedisDriver", "ShardRouter", "TestSupport"]),
        .testTarget(
            name: "PersistenceTests", dependencies: ["CounterCore", "Persistence", "PostgresDriver", "RedisDriver", "ShardRouter", "TestSupport"]),
        // A child process the crash tests kill with SIGKILL mid-stream.
        .executableTarget(
            name: "CrashDriver", dependencies: ["CounterCore", "Persistence", "PostgresDriver", "RedisDriver", "WritePath"], path: "Tests/CrashDriver"
        ),
        .testTarget(
            name: "WritePathTests",
            dependencies: [
                "CounterCore", "NodeAPI", "NodeTestSupport", "Persistence", "PostgresDriver", "RedisDriver", "ShardRouter", "TestSupport",
                "WritePath",
                "CrashDriver",
            ]),
        .testTarget(name: "NodeHTTPTests", dependencies: ["NodeHTTP", "TestSupport"]),
        .testTarget(
            name: "NodeAPITests",
            dependencies: [
                "BenchKit", "CounterClient", "CounterCore", "CounterWire", "NodeAPI", "NodeHTTP", "NodeTestSupport", "Persistence",
                "PostgresDriver", "RedisDriver", "ShardRouter", "TestSupport", "UserTokens", "WritePath", "ClientProbe",
            ]),
        // `counter-node serve` whose flushes also fill a test's audit table (`AuditTable`): the
        // several-nodes tests' node.
        .executableTarget(name: "AuditedNode", dependencies: ["CounterNode", "TestSupport"], path: "Tests/AuditedNode"),
        // The client library in a process of its own, for the test that runs it over HTTPS (and
        // so HTTP/2, by ALPN) with the test's certificate trusted.
        .executableTarget(name: "ClientProbe", dependencies: ["CounterClient"], path: "Tests/ClientProbe"),
        // The node as a process: serve, several nodes, the operator commands, the configuration.
        .testTarget(
            name: "CounterNodeTests",
            dependencies: [
                "BenchKit", "CounterClient", "CounterNode", "CounterWire", "NodeHTTP", "NodeTestSupport", "Persistence", "PostgresDriver",
                "RedisDriver",
                "ShardRouter", "TestSupport", "UserTokens", "CounterNodeCLI", "AuditedNode",
            ]),
    ],
    swiftLanguageModes: [.v6]
)
