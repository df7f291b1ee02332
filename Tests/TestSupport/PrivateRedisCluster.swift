import Foundation

/// A Redis Cluster of a test's own — three masters with a replica each, started with
/// `scripts/services` (cluster mode) in a temporary data folder on free ports — so a test can
/// reshard it or kill a master without disturbing other tests.
public final class PrivateRedisCluster: Sendable {
    public let dataDirectory: URL
    /// The first of the six ports; node `i` listens on `firstPort + i`.
    public let firstPort: Int

    /// The seed nodes, as the node is given them.
    public var url: String { "redis-cluster://127.0.0.1:\(firstPort),127.0.0.1:\(firstPort + 1),127.0.0.1:\(firstPort + 2)" }
    public var ports: [Int] { (0..<6).map { firstPort + $0 } }

    private init() throws {
        dataDirectory = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("counter-cluster-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            at: dataDirectory, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755])
        firstPort = try Self.freePortBlock()
    }

    /// Starts the cluster, runs `body` with it, and stops and removes it afterwards, also when
    /// `body` throws.
    public static func with<T>(_ body: (PrivateRedisCluster) async throws -> T) async throws -> T {
        let cluster = try PrivateRedisCluster()
        do {
            try await cluster.services("start")
            let value = try await body(cluster)
            try await cluster.tearDown()
            return value
        } catch {
            try? await cluster.tearDown()
            throw error
        }
    }

    /// The process id of the node on `port`, from its pid file.
    public func pid(ofNodeOn port: Int) throws -> pid_t {
        let file = dataDirectory.appendingPathComponent("redis-cluster/\(port)/redis.pid")
        guard let text = try? String(contentsOf: file, encoding: .utf8),
            let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw PrivateServersError(message: "no pid file for the cluster node on port \(port)")
        }
        return pid
    }

    /// Runs `redis-cli` with `arguments`, waits for it, and returns its standard output; throws
    /// when it exits non-zero.
    @discardableResult
    public func redisCLI(_ arguments: [String]) async throws -> String {
        let process = try ChildProcess(["/usr/bin/redis-cli"] + arguments)
        let status = try await process.waitForExit()
        let output = process.output.joined(separator: "\n")
        guard status == 0 else {
            throw PrivateServersError(message: "redis-cli \(arguments.joined(separator: " ")) exited with \(status): \(output)")
        }
        return output
    }

    /// One line of `CLUSTER NODES`.
    public struct Node: Sendable {
        public let port: Int
        public let id: String
        public let isMaster: Bool
        /// For a replica, its master's id; "-" for a master.
        public let masterID: String
        public let slotRanges: [ClosedRange<Int>]
        public var slots: Int { slotRanges.reduce(0) { $0 + $1.count } }
        public func serves(_ slot: Int) -> Bool { slotRanges.contains { $0.contains(slot) } }
    }

    /// `CLUSTER NODES` as seen from the node on `port`, without nodes marked failed.
    public func nodes(askingPort port: Int) async throws -> [Node] {
        let text = try await redisCLI(["-p", String(port), "cluster", "nodes"])
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count >= 8, let portText = fields[1].split(separator: "@").first?.split(separator: ":").last,
                let nodePort = Int(portText), !fields[2].contains("fail")
            else { return nil }
            let ranges = fields.dropFirst(8).compactMap { range -> ClosedRange<Int>? in
                guard !range.hasPrefix("[") else { return nil }
                let bounds = range.split(separator: "-").compactMap { Int($0) }
                return bounds.count == 2 ? bounds[0]...bounds[1] : bounds.first.map { $0...$0 }
            }
            return Node(port: nodePort, id: fields[0], isMaster: fields[2].contains("master"), masterID: fields[3], slotRanges: ranges)
        }
    }

    /// Stops every node and removes the data.
    public func tearDown() async throws {
        try await services("stop")
        try? FileManager.default.removeItem(at: dataDirectory)
    }

    private func services(_ command: String) async throws {
        try await runServicesScript(
            [command, "redis"],
            environment: [
                "COUNTER_DATA_DIR": dataDirectory.path, "COUNTER_REDIS_MODE": "cluster", "COUNTER_REDIS_CLUSTER_PORT": String(firstPort),
            ])
    }

    /// A first port P such that P…P+5 and their cluster bus ports (+10000) are free a moment ago.
    static func freePortBlock() throws -> Int {
        for _ in 0..<200 {
            let first = Int.random(in: 20_000...29_000)
            let ports = (0..<6).flatMap { [first + $0, first + $0 + 10_000] }
            if ports.allSatisfy({ PrivateServers.isFree($0) }) { return first }
        }
        throw PrivateServersError(message: "no block of six free ports (and their bus ports) found")
    }
}
