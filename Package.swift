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
            name: "CMicroHTTPD", pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]),
        // Linux's epoll, which Glibc's module leaves out (header only, nothing to link).
        .systemLibrary(name: "CLinuxEvents"),

        // Pure routing: post -> logical slot -> shard, and Redis-Cluster-compatible hash tags.
        .target(name: "ShardRouter"),

        // PostgreSQL and Redis clients, the Redis key layout, the flusher's SQL, migrations.
        .target(name: "Persistence", dependencies: ["CLibPQ", "CHiredis", "ShardRouter"]),

        // The node: configuration, commands (the operator ones call the admin API through
        // CounterClient), shards, flusher and HTTP API.
        .target(name: "CounterNode", dependencies: ["ShardRouter", "Persistence", "CMicroHTTPD", "CounterClient"]),

        // The client library apps add: HTTP client, optimistic like state machine, @Observable
        // models. Foundation and Observation only; it depends on nothing of the server.
        .target(name: "CounterClient"),

        // Thin executables.
        .executableTarget(name: "CounterNodeCLI", dependencies: ["CounterNode"]),
        .executableTarget(name: "Bench", dependencies: ["BenchKit", "CounterNode", "Persistence", "ShardRouter"]),
        // The bench's parts: histogram, Zipf, correctness check (pure), load generator.
        .target(name: "BenchKit", dependencies: ["Persistence", "CLinuxEvents"]),

        // Shared by the test targets: where the test servers are, private servers for restart tests.
        .target(name: "TestSupport", dependencies: ["Persistence"], path: "Tests/TestSupport"),
        .testTarget(name: "BenchKitTests", dependencies: ["BenchKit"]),
        .testTarget(name: "CounterClientTests", dependencies: ["CounterClient"]),
        .testTarget(name: "ShardRouterTests", dependencies: ["ShardRouter", "Persistence"]),
        .testTarget(name: "PersistenceTests", dependencies: ["Persistence", "ShardRouter", "TestSupport"]),
        // A child process the crash tests kill with SIGKILL mid-stream.
        .executableTarget(name: "CrashDriver", dependencies: ["CounterNode", "Persistence"], path: "Tests/CrashDriver"),
        .testTarget(name: "CounterNodeTests", dependencies: ["BenchKit", "CounterClient", "CounterNode", "Persistence", "ShardRouter", "TestSupport", "CrashDriver", "CounterNodeCLI"]),
    ],
    swiftLanguageModes: [.v6]
)
