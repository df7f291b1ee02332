import BenchKit
import Foundation
import RedisDriver

/// The `redis-lua` row of `compare`: the hot toggle as one Lua script in the Redis the node uses
/// (`RedisLuaToggleWorkload`), over the same number of connections, driven by the same load
/// generator over RESP. Its key is new per run and deleted afterwards.
enum RedisLuaPeer {
    /// Why the row cannot run against `redisURL`, or `nil` when it can: it speaks plain RESP to
    /// one server, without `AUTH` or `SELECT`.
    static func unsupported(_ redisURL: String) -> String? {
        guard let configuration = try? RedisConfiguration(url: redisURL) else { return "\(redisURL) is not a Redis URL" }
        if configuration.mode == .cluster { return "the node's Redis is a cluster" }
        if configuration.password != nil || configuration.database != 0 { return "the node's Redis needs AUTH or SELECT" }
        return nil
    }

    static func run(redisURL: String, options: LoadOptions) async throws -> LoadResult {
        let configuration = try RedisConfiguration(url: redisURL)
        let connection = RedisConnection(configuration: configuration)
        try await connection.connect()
        let sha = try await connection.send(.scriptLoad(RedisLuaToggleWorkload.script)).string ?? ""
        let key = "bench-lua:\(UInt64.random(in: 1...UInt64.max))"
        var load = options
        // Through a URL, so a host name is resolved to the IPv4 address the sockets need.
        load.endpoints = [try Endpoint(url: "http://\(configuration.host):\(configuration.port)")]
        load.wire = .resp
        let workload = RedisLuaToggleWorkload(sha: sha, key: key, userBase: Int64.random(in: 1...1_000_000) * 1_000_000_000)
        let result = await LoadGenerator(options: load, workload: workload).run { _, _, _, _ in }
        _ = try? await connection.send(.del([key]))
        await connection.close()
        return result
    }
}
