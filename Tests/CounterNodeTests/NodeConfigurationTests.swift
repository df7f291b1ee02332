import CounterNode
import Testing

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

    @Test("invalid values are refused with the setting's name", arguments: [
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
    @Test("usage errors exit 2; unbuilt subcommands exit 3; help exits 0")
    func exitStatuses() async {
        #expect(await NodeCommand.run(arguments: [], environment: [:]) == .usage)
        #expect(await NodeCommand.run(arguments: ["frobnicate"], environment: [:]) == .usage)
        #expect(await NodeCommand.run(arguments: ["migrate", "--no-such-flag"], environment: [:]) == .usage)
        #expect(await NodeCommand.run(arguments: ["migrate", "--postgres-pool-size", "0"], environment: [:]) == .usage)
        #expect(await NodeCommand.run(arguments: ["serve"], environment: [:]) == .notBuilt)
        #expect(await NodeCommand.run(arguments: ["--help"], environment: [:]) == .success)
        #expect(await NodeCommand.run(arguments: ["migrate", "--help"], environment: [:]) == .success)
    }

    @Test("migrate against an unreachable server exits 1")
    func migrateUnreachable() async {
        #expect(await NodeCommand.run(arguments: ["migrate", "--postgres-url", "postgresql://x@127.0.0.1:1/x"], environment: [:]) == .failure)
    }
}
