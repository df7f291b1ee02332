/// Which Redis an integration test runs against: the single test server or the test Redis
/// Cluster (three masters, three replicas). Suites that must hold on both take it as an argument.
public enum RedisTarget: String, Sendable, CaseIterable, CustomStringConvertible {
    case single
    case cluster

    /// The URL the node is given: `redis://…` or `redis-cluster://…`.
    public var url: String {
        switch self {
        case .single: return TestEnvironment.redisURL
        case .cluster: return TestEnvironment.redisClusterURL
        }
    }

    public var description: String { self == .single ? "one Redis" : "Redis Cluster" }
}
