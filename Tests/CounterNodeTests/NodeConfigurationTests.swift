import CounterNode
import Foundation
import NodeHTTP
import Synchronization
import TestSupport
import Testing
import UserTokens

@Suite("Node configuration")
struct NodeConfigurationTests {
    @Test("defaults point at the local services")
    func defaults() throws {
        let (configuration, rest) = try NodeConfiguration.parse(arguments: [], environment: [:])
        #expect(configuration == NodeConfiguration())
        #expect(configuration.postgresURL.contains("55432"))
        #expect(configuration.redisURL == "redis://127.0.0.1:56379")
        #expect(rest.isEmpty)
    }

    @Test("environment variables set values, and flags win over them")
    func precedence() throws {
        let (configuration, rest) = try NodeConfiguration.parse(
            arguments: ["--redis-url", "redis://flag:1", "--postgres-pool-size=9", "operand"],
            environment: ["COUNTER_REDIS_URL": "redis://env:2", "COUNTER_POSTGRES_URL": "postgresql://env/db"])
        #expect(configuration.redisURL == "redis://flag:1")
        #expect(configuration.postgresURL == "postgresql://env/db")
        #expect(configuration.postgresPoolSize == 9)
        #expect(rest == ["operand"])
    }

    @Test("TLS: --tls-listen, --tls-cert and --tls-key together make the HTTPS listener; any of them alone is refused before serving")
    func tlsSettings() throws {
        let (none, _) = try NodeConfiguration.parse(arguments: [], environment: [:])
        #expect(none.http.tls == nil && none.servingRefusal == nil)
        let (all, _) = try NodeConfiguration.parse(
            arguments: ["--tls-listen", "0.0.0.0:8443", "--tls-cert", "/etc/counter/chain.pem"],
            environment: ["COUNTER_TLS_KEY": "/etc/counter/key.pem"])
        #expect(
            all.http.tls == HTTPTLSListener(host: "0.0.0.0", port: 8443, certificateFile: "/etc/counter/chain.pem", keyFile: "/etc/counter/key.pem"))
        #expect(all.servingRefusal == nil)
        for arguments in [["--tls-listen", "127.0.0.1:8443"], ["--tls-cert", "a.pem"], ["--tls-cert", "a.pem", "--tls-key", "b.pem"]] {
            let (some, _) = try NodeConfiguration.parse(arguments: arguments, environment: [:])
            #expect(some.http.tls == nil)
            #expect(some.servingRefusal == "TLS needs all of --tls-listen, --tls-cert and --tls-key", "\(arguments)")
        }
        #expect(throws: ConfigurationError.self) { try NodeConfiguration.parse(arguments: ["--tls-listen", "8443"], environment: [:]) }
        #expect(throws: ConfigurationError.self) { try NodeConfiguration.parse(arguments: ["--tls-cert", ""], environment: [:]) }
    }

    @Test("write-path settings are read from flags and environment")
    func writePathSettings() throws {
        let (configuration, _) = try NodeConfiguration.parse(
            arguments: ["--ack", "postgres", "--shards=8", "--flush-interval", "50ms"],
            environment: ["COUNTER_FLUSH_MAX_AGE": "750ms", "COUNTER_KEY_PREFIX": "likes-prod"])
        #expect(configuration.writePath.acknowledgement == .postgres)
        #expect(configuration.writePath.shardCount == 8)
        #expect(configuration.writePath.flushInterval == .milliseconds(50))
        #expect(configuration.writePath.flushMaxAge == .milliseconds(750))
        #expect(configuration.writePath.keyPrefix == "likes-prod")
        #expect(NodeConfiguration.settingsHelp.contains("default 200ms"))
        // The backlog's age limit: 120 s unless set; 0 turns it off.
        #expect(configuration.writePath.backlogMaximumAge == .seconds(120))
        #expect(try NodeConfiguration.parse(arguments: ["--backlog-max-age", "30"], environment: [:]).0.writePath.backlogMaximumAge == .seconds(30))
        #expect(try NodeConfiguration.parse(arguments: [], environment: ["COUNTER_BACKLOG_MAX_AGE": "0"]).0.writePath.backlogMaximumAge == nil)
        #expect(try NodeConfiguration.parse(arguments: ["--backlog-max-age", "2m"], environment: [:]).0.writePath.backlogMaximumAge == .seconds(120))
        // Eviction of idle posts: 10 minutes unless set, in any unit; off turns it off.
        #expect(configuration.writePath.hotIdle == .seconds(600))
        #expect(NodeConfiguration.settingsHelp.contains("default 10m"))
        for (text, idle) in [
            ("60s", Duration.seconds(60)), ("1s", .seconds(1)), ("500ms", .milliseconds(500)), ("2h", .seconds(7_200)), ("90", .seconds(90)),
        ] {
            #expect(try NodeConfiguration.parse(arguments: ["--hot-idle", text], environment: [:]).0.writePath.hotIdle == idle, "\(text)")
        }
        #expect(try NodeConfiguration.parse(arguments: [], environment: ["COUNTER_HOT_IDLE": "off"]).0.writePath.hotIdle == nil)
        // A memory target per Redis master: off unless set, in binary units.
        #expect(configuration.writePath.hotMemoryTarget == nil)
        #expect(try NodeConfiguration.parse(arguments: ["--hot-memory-target", "256mb"], environment: [:]).0.writePath.hotMemoryTarget == 256 << 20)
        #expect(try NodeConfiguration.parse(arguments: [], environment: ["COUNTER_HOT_MEMORY_TARGET": "4GB"]).0.writePath.hotMemoryTarget == 4 << 30)
    }

    @Test("every duration is written one way (500ms, 30s, 10m, 2h, 7d; a bare number is seconds), and --help shows each default so")
    func durationsInOneStyle() throws {
        let help = NodeConfiguration.settingsHelp
        for (flag, shown) in [
            ("--flush-interval", "200ms"), ("--flush-max-age", "1s"), ("--ack-replica-timeout", "500ms"), ("--lease", "3s"),
            ("--backlog-max-age", "2m"), ("--idle-timeout", "30s"), ("--shutdown-timeout", "25s"), ("--hot-idle", "10m"),
            ("--event-retention", "7d"),
        ] {
            #expect(help.contains("  \(flag) VALUE\n      env "), "\(flag)")
            let block = help.components(separatedBy: "  \(flag) VALUE\n")[1].split(separator: "\n").prefix(2).joined(separator: "\n")
            #expect(block.contains("default \(shown)\n") && block.contains("a duration"), "\(flag): \(block)")
        }
        let (configuration, _) = try NodeConfiguration.parse(
            arguments: ["--lease", "10s", "--shutdown-timeout", "1m", "--idle-timeout", "45", "--ready-max-lag", "5s"], environment: [:])
        #expect(configuration.lease == .seconds(10))
        #expect(configuration.shutdownTimeout == .seconds(60))
        #expect(configuration.http.idleTimeout == .seconds(45))
        #expect(configuration.readyMaxLagSeconds == 5)
        #expect(throws: ConfigurationError.self) { try NodeConfiguration.parse(arguments: ["--idle-timeout", "1500ms"], environment: [:]) }
        #expect(throws: ConfigurationError.self) { try NodeConfiguration.parse(arguments: ["--lease", "100ms"], environment: [:]) }
    }

    @Test(
        "a node's batches wait for Redis at most half its lease (its lease check has given up by then); the write path alone keeps the command timeout"
    )
    func batchRedisTimeoutFollowsTheLease() throws {
        let (configuration, _) = try NodeConfiguration.parse(arguments: ["--lease", "4s"], environment: [:])
        #expect(configuration.writePath.batchRedisTimeout == nil)
        #expect(configuration.nodeWritePath.batchRedisTimeout == .seconds(2))
        #expect(configuration.nodeWritePath.flushInterval == configuration.writePath.flushInterval)
    }

    @Test("the former names of the millisecond settings are still read, as the settings that replaced them; the new name wins")
    func formerNames() throws {
        let (configuration, _) = try NodeConfiguration.parse(
            arguments: ["--flush-interval-ms", "50", "--lease-ms=1500"],
            environment: ["COUNTER_FLUSH_MAX_AGE_MS": "750", "COUNTER_ACK_REPLICA_TIMEOUT_MS": "900", "COUNTER_ACK_REPLICA_TIMEOUT": "1s"])
        #expect(configuration.writePath.flushInterval == .milliseconds(50))
        #expect(configuration.lease == .milliseconds(1_500))
        #expect(configuration.writePath.flushMaxAge == .milliseconds(750))
        #expect(configuration.writePath.acknowledgementReplicaTimeout == .seconds(1))
        #expect(NodeConfiguration.settingsHelp.contains("--flush-interval-ms N (env COUNTER_FLUSH_INTERVAL_MS): read as --flush-interval Nms"))
        #expect(throws: ConfigurationError.self) { try NodeConfiguration.parse(arguments: ["--lease-ms", "100"], environment: [:]) }
    }

    @Test(
        "invalid values are refused with the setting's name",
        arguments: [
            ([], ["COUNTER_HOT_IDLE": "1.5s"], "COUNTER_HOT_IDLE"),
            (["--hot-idle", "50ms"], [String: String](), "--hot-idle"),
            (["--hot-idle", "-1s"], [String: String](), "--hot-idle"),
            (["--hot-memory-target", "1.5gb"], [String: String](), "--hot-memory-target"),
            (["--hot-memory-target", "100kb"], [String: String](), "--hot-memory-target"),
            (["--ack", "disk"], [String: String](), "--ack"),
            (["--shards", "0"], [:], "--shards"),
            (["--key-prefix", "a b"], [:], "--key-prefix"),
            (["--postgres-pool-size", "0"], [String: String](), "--postgres-pool-size"),
            (["--postgres-pool-size", "many"], [:], "--postgres-pool-size"),
            (["--redis-url"], [:], "needs a value"),
            ([], ["COUNTER_REDIS_URL": "http://x"], "COUNTER_REDIS_URL"),
        ])
    func invalid(arguments: [String], environment: [String: String], expected: String) {
        let error = #expect(throws: ConfigurationError.self) {
            try NodeConfiguration.parse(arguments: arguments, environment: environment)
        }
        #expect(error?.message.contains(expected) == true)
    }

    @Test("--help text lists every setting with its environment variable")
    func helpListsEverySetting() {
        for setting in NodeConfiguration.settings {
            #expect(NodeConfiguration.settingsHelp.contains(setting.flag))
            #expect(NodeConfiguration.settingsHelp.contains(setting.environment))
        }
    }
}

@Suite("counter-node command line")
struct NodeCommandTests {
    /// Collects what a command writes, so tests can read it and the test log stays quiet.
    final class Transcript: Sendable {
        private let lines = Mutex<[String]>([])
        var text: String { lines.withLock { $0.joined(separator: "\n") } }
        var output: NodeCommand.Output {
            NodeCommand.Output(
                standard: { line in self.lines.withLock { $0.append(line) } },
                error: { line in self.lines.withLock { $0.append("error: " + line) } })
        }
    }

    @Test("usage errors exit 2; an operator command without a node exits 3; help exits 0")
    func exitStatuses() async {
        func run(_ arguments: [String]) async -> (NodeCommand.ExitStatus, String) {
            let transcript = Transcript()
            let status = await NodeCommand.run(arguments: arguments, environment: [:], output: transcript.output)
            return (status, transcript.text)
        }
        let (missing, missingText) = await run([])
        #expect(missing == .usage)
        #expect(missingText.contains("missing subcommand"))
        let (unknown, unknownText) = await run(["frobnicate"])
        #expect(unknown == .usage)
        #expect(unknownText.contains("unknown subcommand \"frobnicate\""))
        let (badFlag, badFlagText) = await run(["migrate", "--no-such-flag"])
        #expect(badFlag == .usage)
        #expect(badFlagText.contains("--no-such-flag"))
        #expect(await run(["migrate", "--postgres-pool-size", "0"]).0 == .usage)
        #expect(await run(["stats", "--node", "http://127.0.0.1:1"]).0 == .unreachable)
        let (refused, refusedText) = await run(["serve", "--listen", "0.0.0.0:8080"])
        #expect(refused == .usage)
        #expect(refusedText.contains("--api-token"))
        let (help, helpText) = await run(["--help"])
        #expect(help == .success)
        #expect(helpText.contains("Exit status"))
        #expect(await run(["migrate", "--help"]).0 == .success)
    }

    @Test("user-token prints a token the node's verifier accepts for that user; bad input exits 2 and prints nothing")
    func userToken() async throws {
        let secret = "user-token-command-secret-0123456789"
        let transcript = Transcript()
        let status = await NodeCommand.run(
            arguments: ["user-token", "--user", "77", "--lifetime", "60", "--user-token-audience", "likes"],
            environment: ["COUNTER_USER_TOKEN_SECRET": secret], output: transcript.output)
        #expect(status == .success)
        let verifier = TokenVerifier(secret: HMACSecret(secret)!, keySet: false, rules: ClaimRules(audience: "likes"))
        #expect(try verifier.user(of: Array(transcript.text.utf8)) == 77)
        #expect(throws: TokenRefusal.self) { try verifier.user(of: Array(transcript.text.utf8), now: Date().timeIntervalSince1970 + 120) }
        for arguments in [
            ["user-token"], ["user-token", "--user", "0"], ["user-token", "--user", "7", "--lifetime", "0"],
            ["user-token", "--user", "7", "extra"], ["user-token", "--user"],
        ] {
            let refused = Transcript()
            #expect(await NodeCommand.run(arguments: arguments, environment: ["COUNTER_USER_TOKEN_SECRET": secret], output: refused.output) == .usage)
            #expect(refused.text.hasPrefix("error: "), "\(arguments): \(refused.text)")
        }
        let unsigned = Transcript()
        #expect(await NodeCommand.run(arguments: ["user-token", "--user", "7"], environment: [:], output: unsigned.output) == .usage)
        #expect(unsigned.text.contains("--user-token-secret"))
    }

    @Test("migrate against an unreachable server exits 1")
    func migrateUnreachable() async {
        let transcript = Transcript()
        let status = await NodeCommand.run(
            arguments: ["migrate", "--postgres-url", "postgresql://x@127.0.0.1:1/x"],
            environment: [:], output: transcript.output)
        #expect(status == .failure)
        #expect(transcript.text.contains("Connection refused"))
    }
}

@Suite("counter-node migrate against the test database")
struct NodeMigrateTests {
    @Test("migrate on a current schema says so and exits 0")
    func migrateCurrent() async throws {
        let transcript = NodeCommandTests.Transcript()
        let status = await NodeCommand.run(
            arguments: ["migrate"],
            environment: ["COUNTER_POSTGRES_URL": TestEnvironment.postgresURL],
            output: transcript.output)
        #expect(status == .success)
        let again = NodeCommandTests.Transcript()
        #expect(
            await NodeCommand.run(
                arguments: ["migrate"], environment: ["COUNTER_POSTGRES_URL": TestEnvironment.postgresURL],
                output: again.output) == .success)
        #expect(again.text.contains("schema is current"))
    }
}
