import Persistence

/// Everything a node is configured with. Each setting has a default, a `COUNTER_*` environment
/// variable and a `--flag`; `NodeConfiguration.settings` lists them for `--help`.
public struct NodeConfiguration: Sendable, Equatable {
    /// PostgreSQL URL. Defaults to the local cluster of `scripts/services`.
    public var postgresURL: String = "postgresql://counter@127.0.0.1:55432/counter"
    /// Redis URL. Defaults to the local server of `scripts/services`.
    public var redisURL: String = "redis://127.0.0.1:56379"
    /// PostgreSQL connections in the node's pool. Defaults to `4`.
    public var postgresPoolSize: Int = 4

    public init() {}

    /// One configurable setting: its flag, environment variable, default and meaning.
    public struct Setting: Sendable {
        public let flag: String
        public let environment: String
        public let summary: String
        let defaultValue: @Sendable (NodeConfiguration) -> String
        let apply: @Sendable (inout NodeConfiguration, String) -> String?  // nil on success, else why not
    }

    /// Every setting, in the order `--help` shows them.
    public static let settings: [Setting] = [
        Setting(flag: "--postgres-url", environment: "COUNTER_POSTGRES_URL",
                summary: "PostgreSQL connection URL (libpq syntax)",
                defaultValue: { $0.postgresURL }, apply: { $0.postgresURL = $1; return nil }),
        Setting(flag: "--redis-url", environment: "COUNTER_REDIS_URL",
                summary: "Redis URL: redis://[:password@]host[:port][/database]",
                defaultValue: { $0.redisURL },
                apply: { configuration, value in
                    do { _ = try RedisConfiguration(url: value) } catch let error as RedisError { return error.message } catch { return "\(error)" }
                    configuration.redisURL = value
                    return nil
                }),
        Setting(flag: "--postgres-pool-size", environment: "COUNTER_POSTGRES_POOL_SIZE",
                summary: "PostgreSQL connections the node opens at most (1-256)",
                defaultValue: { String($0.postgresPoolSize) },
                apply: { configuration, value in
                    guard let size = Int(value), (1...256).contains(size) else { return "must be a whole number from 1 to 256" }
                    configuration.postgresPoolSize = size
                    return nil
                }),
    ]

    /// Reads the environment, then `arguments` (`--flag value` or `--flag=value`); flags win.
    /// - Returns: the configuration and the arguments that are not settings, in order.
    /// - Throws: `ConfigurationError` naming the setting and what is wrong with its value.
    public static func parse(arguments: [String], environment: [String: String]) throws(ConfigurationError) -> (NodeConfiguration, [String]) {
        var configuration = NodeConfiguration()
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
            guard let setting = settings.first(where: { $0.flag == flag }) else {
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
            if let why = setting.apply(&configuration, value) {
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
        return settings.map { setting in
            "  \(setting.flag) VALUE\n      env \(setting.environment), default \(setting.defaultValue(defaults))\n      \(setting.summary)"
        }.joined(separator: "\n")
    }

    /// The PostgreSQL pool configuration these settings describe.
    public var postgres: PostgresConfiguration {
        var configuration = PostgresConfiguration(url: postgresURL)
        configuration.maximumConnections = postgresPoolSize
        return configuration
    }
}

/// A setting with a value the node cannot use.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
