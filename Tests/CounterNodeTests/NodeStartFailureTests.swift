import Foundation
import NodeTestSupport
import Persistence
import TestSupport
import Testing

/// `serve` starts its parts in order — the request tasks, the end users' keys, the write path, the
/// schema, the HTTP server, the membership, the announcement — each once the one before has
/// started. A step that fails stops, in reverse, every part that had started (the write path
/// drains), starts nothing after it, and the node exits with `cannot start`. One test per step
/// that can fail; the order is read from the node's `service_started`/`service_stopped` lines.
@Suite("serve: a failure at each start step stops what started, in reverse", .timeLimit(.minutes(3)))
struct NodeStartFailureTests {
    struct Outcome {
        let status: Int32
        let started: [String]
        let stopped: [String]
        let failed: String?
        let lines: [String]
    }

    /// Runs `serve` with `arguments` (after the common ones), which must fail at start.
    static func serve(_ arguments: [String], port: Int? = nil, prefix: String? = nil) async throws -> Outcome {
        let listen = try port ?? PrivateServers.freePort()
        var servers: [String] = []
        if !arguments.contains("--postgres-url") { servers += ["--postgres-url", TestEnvironment.postgresURL] }
        if !arguments.contains("--redis-url") { servers += ["--redis-url", TestEnvironment.redisURL] }
        let node = try ChildProcess(
            [
                ChildProcess.builtProduct("counter-node"), "serve", "--listen", "127.0.0.1:\(listen)",
                "--key-prefix", prefix ?? TestEnvironment.uniqueKeyPrefix("start").replacingOccurrences(of: ":", with: "-"),
                "--log-level", "debug", "--lease", "1500ms",
            ] + servers + arguments,
            mergingStandardError: true)
        // A node that started after all (a test's premise broke) is stopped, so the expectations
        // fail at once and print its lines instead of waiting out a timeout.
        if try await node.waitUntilListening() { node.kill(SIGTERM) }
        let status = try await node.waitForExit()
        let lines = node.output
        func services(_ event: String) -> [String] {
            lines.filter { $0.contains("event=\(event) ") }.compactMap { line in
                line.split(separator: " ").first { $0.hasPrefix("service=") }.map { String($0.dropFirst("service=".count)) }
            }
        }
        let failed = lines.first { $0.contains("event=service_stopped ") && $0.contains(" error=") }
            .flatMap { $0.split(separator: " ").first { $0.hasPrefix("service=") } }.map { String($0.dropFirst("service=".count)) }
        return Outcome(status: status, started: services("service_started"), stopped: services("service_stopped"), failed: failed, lines: lines)
    }

    /// The failing step's own stop comes first; then every started one, last first.
    static func expectStoppedInReverse(
        _ outcome: Outcome, failing: String, started: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(outcome.status != 0, "exit status", sourceLocation: sourceLocation)
        #expect(outcome.lines.contains { $0.hasPrefix("counter-node: cannot start:") }, "\(outcome.lines.suffix(5))", sourceLocation: sourceLocation)
        #expect(outcome.started == started, "started", sourceLocation: sourceLocation)
        #expect(outcome.failed == failing, "the failing step", sourceLocation: sourceLocation)
        #expect(outcome.stopped == [failing] + started.reversed(), "\(outcome.lines.suffix(12))", sourceLocation: sourceLocation)
        #expect(!outcome.lines.contains { $0.contains("counter-node listening on") }, sourceLocation: sourceLocation)
    }

    @Test("the end users' key set cannot be read: only the request tasks had started")
    func userKeys() async throws {
        let outcome = try await Self.serve(["--user-token-jwks", "/nonexistent/keys.json"])
        Self.expectStoppedInReverse(outcome, failing: "user_keys", started: ["requests"])
    }

    @Test("Redis cannot be reached: the write path fails to start; the request tasks stop")
    func writePath() async throws {
        let closed = try PrivateServers.freePort()
        let outcome = try await Self.serve(["--redis-url", "redis://127.0.0.1:\(closed)"])
        Self.expectStoppedInReverse(outcome, failing: "write_path", started: ["requests"])
    }

    @Test("the schema cannot be migrated: the write path that had started drains and stops, then the request tasks")
    func schema() async throws {
        let outcome = try await Self.serve(["--postgres-url", "postgresql://counter@127.0.0.1:1/none"])
        Self.expectStoppedInReverse(outcome, failing: "schema", started: ["requests", "write_path"])
    }

    @Test("the HTTP port is taken: the schema, the write path and the request tasks stop, in that order")
    func http() async throws {
        let (held, port) = try PrivateServers.boundSocket(listening: true)
        defer { close(held) }
        let outcome = try await Self.serve([], port: port)
        Self.expectStoppedInReverse(outcome, failing: "http", started: ["requests", "write_path", "schema"])
        #expect(outcome.lines.contains { $0.contains("cannot listen") || $0.contains("refused to start") }, "\(outcome.lines.suffix(4))")
    }

    @Test("the node id is held by a live node: the HTTP server, the schema, the write path and the request tasks stop, in that order")
    func membership() async throws {
        let prefix = TestEnvironment.uniqueKeyPrefix("start").replacingOccurrences(of: ":", with: "-")
        let port = try PrivateServers.freePort()
        let holder = try ChildProcess(
            [
                ChildProcess.builtProduct("counter-node"), "serve", "--listen", "127.0.0.1:\(port)",
                "--key-prefix", prefix, "--node-id", "taken", "--lease", "4s",
                "--postgres-url", TestEnvironment.postgresURL, "--redis-url", TestEnvironment.redisURL,
            ],
            mergingStandardError: true)
        // The holder's lease is long enough that a loaded machine cannot delay two renewals past
        // it (the second node waits once for the lease to run out before it gives up).
        try #require(try await holder.waitUntilListening(), "\(holder.lastLines)")
        let outcome = try await Self.serve(["--node-id", "taken"], prefix: prefix)
        holder.kill(SIGTERM)
        _ = try await holder.waitForExit()
        Self.expectStoppedInReverse(outcome, failing: "membership", started: ["requests", "write_path", "schema", "http"])
        #expect(outcome.lines.contains { $0.contains("is held by a running node") }, "\(outcome.lines.suffix(4))")
    }

    @Test("the reaction settings contradict the data (a kind rows still hold is not listed): the schema step refuses, saying what to run")
    func reactionSettingsContradictData() async throws {
        try await TestEnvironment.withScratchDatabase { pool, url in
            _ = try await SchemaMigrator.migrate(pool)
            try await pool.withConnection { connection in
                try await connection.runScript(
                    """
                    INSERT INTO posts (id) VALUES (1);
                    INSERT INTO reactions (user_id, post_id, kind) VALUES (7, 1, 'tada');
                    INSERT INTO reaction_counts (post_id, kind, count) VALUES (1, 'tada', 1);
                    """)
            }
            let outcome = try await Self.serve(["--postgres-url", url, "--reactions", "like,love"])
            Self.expectStoppedInReverse(outcome, failing: "schema", started: ["requests", "write_path"])
            #expect(outcome.lines.contains { $0.contains("kinds --reactions does not list: tada (1)") }, "\(outcome.lines.suffix(4))")
            // The same data under likes only is refused too; with tada listed, the node starts.
            let likesOnly = try await Self.serve(["--postgres-url", url])
            #expect(likesOnly.failed == "schema")
        }
    }

    @Test("a live node of the deployment holds other reaction settings: the membership refuses to join, naming both")
    func reactionSettingsDisagree() async throws {
        let prefix = TestEnvironment.uniqueKeyPrefix("start").replacingOccurrences(of: ":", with: "-")
        let port = try PrivateServers.freePort()
        let holder = try ChildProcess(
            [
                ChildProcess.builtProduct("counter-node"), "serve", "--listen", "127.0.0.1:\(port)",
                "--key-prefix", prefix, "--node-id", "first", "--lease", "4s", "--reactions", "like,love",
                "--postgres-url", TestEnvironment.postgresURL, "--redis-url", TestEnvironment.redisURL,
            ],
            mergingStandardError: true)
        try #require(try await holder.waitUntilListening(), "\(holder.lastLines)")
        let outcome = try await Self.serve(["--node-id", "second", "--reactions", "like,love,haha"], prefix: prefix)
        holder.kill(SIGTERM)
        _ = try await holder.waitForExit()
        Self.expectStoppedInReverse(outcome, failing: "membership", started: ["requests", "write_path", "schema", "http"])
        #expect(
            outcome.lines.contains { $0.contains("runs with the reaction settings") && $0.contains("like,love one 20/20") },
            "\(outcome.lines.suffix(4))")
    }
}
