import Foundation
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import TestSupport
import Testing

/// Each node runs with a 30 s lease (`--lease 30s`): what these tests hold does not depend
/// on it, and with the default 3 s a node of a loaded machine whose renewals came late stopped
/// deciding (503, "cannot renew its cluster lease") in the middle of a test that is not about it.
@Suite("counter-node serve as a process")
struct ServeProcessTests {
    /// Runs curl and returns its output (the response body followed by the status code).
    static func curl(_ arguments: [String]) async throws -> (body: String, status: Int) {
        let process = try ChildProcess(["/usr/bin/curl", "-s", "-w", "\n%{http_code}"] + arguments)
        _ = try await process.waitForExit()
        let lines = process.output
        return (lines.dropLast().joined(separator: "\n"), Int(lines.last ?? "") ?? 0)
    }

    /// `counter-node serve` on `servers` with demo posts 1–3, on a free port, its log merged into
    /// its output; returns once it listens, with the URL it answers on.
    static func serveDemo(on servers: PrivateServers, lease: String = "30s", extra: [String] = []) async throws -> (node: ChildProcess, base: String)
    {
        let port = try PrivateServers.freePort()
        let node = try ChildProcess(
            [
                ChildProcess.builtProduct("counter-node"), "serve", "--lease", lease, "--listen", "127.0.0.1:\(port)",
                "--postgres-url", servers.postgresURL, "--redis-url", servers.redisURL, "--demo-posts", "3",
            ] + extra,
            mergingStandardError: true)
        try #require(try await node.waitUntilListening(), "\(node.lastLines)")
        return (node, "http://127.0.0.1:\(port)")
    }

    @Test("clients that send pipelined requests and leave at once do not end the node: it ignores SIGPIPE and keeps serving")
    func clientsLeavingMidAnswer() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let posts = try await TestEnvironment.createPosts(1, in: pool)
        let prefix = TestEnvironment.uniqueKeyPrefix("sigpipe").replacingOccurrences(of: ":", with: "-")
        let port = try PrivateServers.freePort()
        let node = try ChildProcess(
            [
                ChildProcess.builtProduct("counter-node"), "serve", "--lease", "30s", "--listen", "127.0.0.1:\(port)",
                "--postgres-url", TestEnvironment.postgresURL, "--redis-url", TestEnvironment.redisURL, "--key-prefix", prefix,
            ],
            mergingStandardError: true)
        try #require(try await node.waitUntilListening(), "\(node.lastLines)")
        // Each connection's first answer meets a closed socket (the client's kernel resets it),
        // and the next write fails with EPIPE: by default, SIGPIPE ends the process.
        try await RawHTTPClient.sendAndLeave(port: port, request: RawHTTPClient.request("GET", "/healthz"), pipelined: 20, connections: 200)
        try await RawHTTPClient.sendAndLeave(
            port: port, request: RawHTTPClient.request("POST", "/v1/posts/\(posts[0])/likes/5/toggle"), pipelined: 20, connections: 50)
        #expect(try await Self.curl(["http://127.0.0.1:\(port)/healthz"]) == (#"{"status":"ok"}"#, 200), "\(node.lastLines)")
        node.kill(SIGTERM)
        #expect(try await node.waitForExit() == 0, "\(node.lastLines)")
        await pool.close()
    }

    @Test("serve, driven with curl, then SIGTERM: it answers, exits 0, and every acknowledged change is in PostgreSQL")
    func serveThenTerminate() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let posts = try await TestEnvironment.createPosts(2, in: pool)
        let prefix = TestEnvironment.uniqueKeyPrefix("serve").replacingOccurrences(of: ":", with: "-")
        let port = try PrivateServers.freePort()
        let node = try ChildProcess(
            [
                ChildProcess.builtProduct("counter-node"), "serve", "--lease", "30s",
                "--listen", "127.0.0.1:\(port)", "--postgres-url", TestEnvironment.postgresURL,
                "--redis-url", TestEnvironment.redisURL, "--key-prefix", prefix,
                "--api-token", "serve-test-token-0123456789", "--admin-token", "serve-admin-token-0123456789",
                // Nothing flushes on its own during the test: only the shutdown does.
                "--flush-interval", "1h", "--flush-max-age", "1h", "--flush-batch-size", "1000000",
            ],
            mergingStandardError: true)
        try #require(try await node.waitUntilListening(), "\(node.lastLines)")
        let base = "http://127.0.0.1:\(port)"
        let auth = ["-H", "Authorization: Bearer serve-test-token-0123456789"]
        #expect(try await Self.curl(["\(base)/healthz"]) == (#"{"status":"ok"}"#, 200))
        #expect(try await Self.curl(["-X", "POST", "\(base)/v1/posts/\(posts[0])/likes/1/toggle"]).status == 401)
        var acknowledged: Set<Int64> = []
        for user: Int64 in 1...20 {
            let (body, status) = try await Self.curl(["-X", "PUT"] + auth + ["\(base)/v1/posts/\(posts[user % 2 == 0 ? 0 : 1])/likes/\(user)"])
            #expect(status == 200)
            #expect(body.contains(#""is_liked":true"#))
            acknowledged.insert(user)
        }
        let (toggled, _) = try await Self.curl(["-X", "POST"] + auth + ["\(base)/v1/posts/\(posts[0])/likes/2/toggle"])
        #expect(toggled.contains(#""is_liked":false"#))
        acknowledged.remove(2)
        let before = try await pool.query("SELECT count(*) FROM likes WHERE post_id = ANY($1::bigint[])", [.int64Array(posts)])
        #expect(try before.first?.int64(0) == 0, "nothing should be flushed before the shutdown")

        node.kill(SIGTERM)
        #expect(try await node.waitForExit() == 0)
        let rows = try await pool.query("SELECT user_id FROM likes WHERE post_id = ANY($1::bigint[])", [.int64Array(posts)])
        #expect(Set(try rows.map { try $0.int64(0) }) == acknowledged)
        let counts = try await pool.query("SELECT sum(likes_count) FROM posts WHERE id = ANY($1::bigint[])", [.int64Array(posts)])
        #expect(try counts.first?.int64(0) == Int64(acknowledged.count))
        await pool.close()
    }

    @Test("a second signal exits at once, even while the shutdown waits for PostgreSQL")
    func secondSignalExitsAtOnce() async throws {
        try await PrivateServers.with { servers in
            let (node, base) = try await Self.serveDemo(
                on: servers,
                extra: ["--flush-interval", "1h", "--flush-max-age", "1h", "--flush-batch-size", "1000000", "--shutdown-timeout", "3600"])
            #expect(try await Self.curl(["-X", "PUT", "\(base)/v1/posts/1/likes/5"]).status == 200)
            // With PostgreSQL gone, the graceful shutdown cannot finish its flush…
            try await servers.run("stop", only: "postgres")
            node.kill(SIGTERM)
            // (Two sent before the node takes the first are one to the kernel: it keeps one
            // pending signal of each kind. So the test waits until the first is taken.)
            let tookFirst = try await node.waitForOutput(timeout: .seconds(30)) { $0.contains { $0.contains("event=shutting_down") } }
            #expect(tookFirst, "\(node.lastLines)")
            #expect(kill(node.pid, 0) == 0, "the first signal should leave the node flushing (and retrying)")
            // …and a second signal ends it at once (its shutdown would otherwise wait an hour).
            node.kill(SIGTERM)
            #expect(try await node.waitForExit(timeout: .seconds(30)) == 130, "\(node.lastLines)")
            // The acknowledged change is still in its Redis log, for the next start to flush.
            let redis = RedisConnection(configuration: try RedisConfiguration(url: servers.redisURL))
            let log = RedisKeyLayout().changeLog(of: HashSlot(post: 1))
            #expect(try await redis.send(.xlen(log)).integer == 1)
            try await servers.run("start", only: "postgres")
        }
    }

    @Test(
        "the shutdown waits at most --shutdown-timeout: with PostgreSQL gone it exits 0 after it, says what it left in the Redis logs, and the next start flushes that"
    )
    func boundedShutdown() async throws {
        try await PrivateServers.with { servers in
            let port = try PrivateServers.freePort()
            let arguments = [
                ChildProcess.builtProduct("counter-node"), "serve", "--lease", "30s", "--listen", "127.0.0.1:\(port)",
                "--postgres-url", servers.postgresURL, "--redis-url", servers.redisURL, "--demo-posts", "3",
            ]
            let node = try ChildProcess(
                arguments + [
                    "--shutdown-timeout", "2", "--log-level", "info",
                    "--flush-interval", "1h", "--flush-max-age", "1h", "--flush-batch-size", "1000000",
                ],
                mergingStandardError: true)
            try #require(try await node.waitUntilListening(), "\(node.lastLines)")
            for user in 5...7 {
                #expect(try await Self.curl(["-X", "PUT", "http://127.0.0.1:\(port)/v1/posts/1/likes/\(user)"]).status == 200)
            }
            try await servers.run("stop", only: "postgres")
            let signalled = ContinuousClock.now
            node.kill(SIGTERM)
            #expect(try await node.waitForExit(timeout: .seconds(20)) == 0)
            let took = ContinuousClock.now - signalled
            #expect(took >= .seconds(2), "it drained until the timeout, \(took)")
            let lines = node.output
            let timeout = lines.first { $0.contains("event=shutdown_timeout") }
            #expect(
                timeout?.contains("level=warn") == true && timeout?.contains("left_changes=3") == true
                    && timeout?.contains("left_slots=1") == true && timeout?.contains("slots=\(HashSlot(post: 1).rawValue)") == true,
                "\(lines.suffix(10))")
            #expect(
                lines.contains { $0.contains("event=stopped") && $0.contains("flushed=false") && $0.contains("left_changes=3") },
                "\(lines.suffix(10))")
            // The acknowledged changes wait in their Redis log…
            let redis = RedisConnection(configuration: try RedisConfiguration(url: servers.redisURL))
            let log = RedisKeyLayout().changeLog(of: HashSlot(post: 1))
            #expect(try await redis.send(.xlen(log)).integer ?? 0 >= 1)
            // …and the next start flushes them.
            try await servers.run("start", only: "postgres")
            let next = try ChildProcess(arguments, mergingStandardError: true)
            try #require(try await next.waitUntilListening(), "\(next.lastLines)")
            next.kill(SIGTERM)
            #expect(try await next.waitForExit(timeout: .seconds(30)) == 0)
            #expect(next.output.contains { $0.contains("event=stopped") && $0.contains("flushed=true") })
            let pool = PostgresPool(configuration: PostgresConfiguration(url: servers.postgresURL))
            let rows = try await pool.query("SELECT user_id FROM likes WHERE post_id = 1 ORDER BY user_id")
            #expect(try rows.map { try $0.int64(0) } == [5, 6, 7])
            #expect(try await pool.query("SELECT likes_count FROM posts WHERE id = 1").first?.int64(0) == 3)
            await pool.close()
        }
    }

    @Test("--log-format json: every log line of a serve's life is one JSON object")
    func jsonLogs() async throws {
        let prefix = TestEnvironment.uniqueKeyPrefix("jsonlog").replacingOccurrences(of: ":", with: "-")
        let node = try ChildProcess(
            [
                ChildProcess.builtProduct("counter-node"), "serve", "--lease", "30s", "--listen", "127.0.0.1:\(try PrivateServers.freePort())",
                "--postgres-url", TestEnvironment.postgresURL, "--redis-url", TestEnvironment.redisURL,
                "--key-prefix", prefix, "--log-level", "info", "--log-format", "json",
            ], mergingStandardError: true)
        try #require(try await node.waitUntilListening(), "\(node.lastLines)")
        node.kill(SIGTERM)
        #expect(try await node.waitForExit() == 0)
        // Standard output's two lines are for people; every other line is the log.
        let logLines = node.output.filter { !$0.hasPrefix("counter-node listening on") && !$0.hasPrefix("try: ") }
        var events: [String] = []
        for line in logLines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String]
            #expect(object?["time"] != nil && object?["level"] != nil, "\(line)")
            if let event = object?["event"] { events.append(event) }
        }
        #expect(events.contains("listening") && events.contains("shutting_down") && events.last == "stopped", "\(events)")
    }

    @Test("serve refuses a non-loopback address without tokens, before touching anything")
    func refusesOpenAddress() async throws {
        let node = try ChildProcess([
            ChildProcess.builtProduct("counter-node"), "serve", "--lease", "30s", "--listen", "0.0.0.0:0",
            "--postgres-url", "postgresql://nobody@127.0.0.1:1/none",
        ])
        #expect(try await node.waitForExit() == 2)
    }

    @Test("serve whose HTTP port is taken exits 1 after stopping the write path it started")
    func portTaken() async throws {
        // Hold a listening socket on the port.
        let (holder, port) = try PrivateServers.boundSocket(listening: true)
        defer { close(holder) }
        let prefix = TestEnvironment.uniqueKeyPrefix("serve").replacingOccurrences(of: ":", with: "-")
        let node = try ChildProcess([
            ChildProcess.builtProduct("counter-node"), "serve", "--lease", "30s", "--listen", "127.0.0.1:\(port)",
            "--postgres-url", TestEnvironment.postgresURL, "--redis-url", TestEnvironment.redisURL,
            "--key-prefix", prefix,
        ])
        #expect(try await node.waitForExit() == 1)
        #expect(!node.output.contains { $0.hasPrefix("counter-node listening on") })
    }
}
