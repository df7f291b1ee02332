import CounterNode

/// Where the bench finds PostgreSQL and Redis: the node's own defaults (the `scripts/services`
/// servers), then `COUNTER_POSTGRES_URL` / `COUNTER_REDIS_URL`, then `--postgres-url` /
/// `--redis-url`.
struct BenchServers {
    var postgresURL: String
    var redisURL: String

    init(environment: [String: String]) {
        let defaults = NodeConfiguration()
        postgresURL = environment["COUNTER_POSTGRES_URL"] ?? defaults.postgresURL
        redisURL = environment["COUNTER_REDIS_URL"] ?? defaults.redisURL
    }

    /// Takes `flag` if it names a server; returns whether it did.
    mutating func take(_ flag: String, from reader: inout BenchArguments) throws -> Bool {
        switch flag {
        case "--postgres-url": postgresURL = try reader.value(flag)
        case "--redis-url": redisURL = try reader.value(flag)
        default: return false
        }
        return true
    }
}
