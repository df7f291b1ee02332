import CounterNode
import Foundation
import PostgresDriver
import RedisDriver
import TestSupport
import Testing

@Suite("serve with a Redis that is not a usable cluster")
struct ClusterStartTests {
    /// A database of its own, empty, so "nothing written" can be seen as "no table appeared".
    static func withEmptyDatabase(_ body: (String) async throws -> Void) async throws {
        let pool = PostgresPool(configuration: TestEnvironment.postgres(poolSize: 1))
        let name = "counter_empty_\(UInt32.random(in: 0...UInt32.max))"
        try await pool.query("CREATE DATABASE \(name)")
        var url = TestEnvironment.postgresURL
        url = String(url[..<url.lastIndex(of: "/")!]) + "/" + name
        do {
            try await body(url)
        } catch {
            await pool.close()
            throw error
        }
        let probe = PostgresPool(configuration: PostgresConfiguration(url: url))
        let tables = try await probe.query("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        #expect(try tables.first?.int64(0) == 0, "the node wrote to PostgreSQL before refusing to start")
        await probe.close()
        try await pool.query("DROP DATABASE \(name)")
        await pool.close()
    }

    static func serve(redisURL: String, postgresURL: String, prefix: String) async -> (NodeCommand.ExitStatus, String) {
        let transcript = NodeCommandTests.Transcript()
        let status = await NodeCommand.run(
            arguments: [
                "serve", "--listen", "127.0.0.1:0", "--redis-url", redisURL, "--postgres-url", postgresURL,
                "--key-prefix", prefix, "--demo-posts", "10",
            ],
            environment: [:], output: transcript.output)
        return (status, transcript.text)
    }

    @Test(
        "malformed cluster URLs: exit 2 naming the problem, before anything is touched",
        arguments: [
            ("redis-cluster://", "at least one seed"),
            ("redis-cluster://127.0.0.1", "not host:port"),
            ("redis-cluster://127.0.0.1:1,,127.0.0.1:2", "empty seed node"),
            ("redis-cluster://127.0.0.1:70000", "not host:port"),
            ("redis-cluster://127.0.0.1:7000/1", "no database number"),
        ])
    func malformedURL(url: String, problem: String) async throws {
        try await Self.withEmptyDatabase { postgresURL in
            let (status, text) = await Self.serve(redisURL: url, postgresURL: postgresURL, prefix: "bad-url")
            #expect(status == .usage)
            #expect(text.contains("--redis-url") && text.contains(problem), "\(text)")
        }
    }

    @Test("a seed that is not a cluster node: exit 2, nothing written to Redis or PostgreSQL")
    func notACluster() async throws {
        let single = try RedisConfiguration(url: TestEnvironment.redisURL)
        let prefix = TestEnvironment.uniqueKeyPrefix("notcluster").replacingOccurrences(of: ":", with: "-")
        try await Self.withEmptyDatabase { postgresURL in
            let (status, text) = await Self.serve(
                redisURL: "redis-cluster://\(single.host):\(single.port)",
                postgresURL: postgresURL, prefix: prefix)
            #expect(status == .usage)
            #expect(text.contains("is not a cluster node"), "\(text)")
        }
        let redis = RedisConnection(configuration: single)
        let keys = try await scanKeys(matching: "\(prefix)*") { try await redis.send($0) }
        #expect(keys.isEmpty, "\(keys.prefix(5))")
        await redis.close()
    }

    @Test("a cluster whose slots are not all served: exit 2 naming the missing slots, nothing written")
    func uncoveredSlots() async throws {
        let node = try await LoneClusterNode(slots: 0...8000)
        defer { node.stop() }
        try await Self.withEmptyDatabase { postgresURL in
            let (status, text) = await Self.serve(
                redisURL: "redis-cluster://127.0.0.1:\(node.port)",
                postgresURL: postgresURL, prefix: "holes")
            #expect(status == .usage)
            #expect(text.contains("leaves slots without a master: 8001-16383"), "\(text)")
        }
        let redis = RedisConnection(configuration: RedisConfiguration(host: "127.0.0.1", port: node.port))
        #expect(try await redis.send(RedisCommand("DBSIZE")).integer == 0)
        await redis.close()
    }

    @Test("no seed reachable: exit 1 with each seed's reason")
    func unreachableSeeds() async throws {
        try await Self.withEmptyDatabase { postgresURL in
            let (status, text) = await Self.serve(
                redisURL: "redis-cluster://127.0.0.1:1,127.0.0.1:2",
                postgresURL: postgresURL, prefix: "unreachable")
            #expect(status == .failure)
            #expect(text.contains("no Redis Cluster node answered") && text.contains("127.0.0.1:1") && text.contains("127.0.0.1:2"), "\(text)")
        }
    }
}
