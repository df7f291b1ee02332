import Foundation
import PostgresDriver
import TestSupport
import Testing

/// A node while PostgreSQL is away (a failover's promotion, a restart): within its lease it keeps
/// taking writes into Redis and stays ready, says so in its log and metrics, and flushes the
/// backlog once PostgreSQL answers; past its lease it stops deciding and is not ready.
@Suite("counter-node while PostgreSQL is away")
struct PostgresOutageTests {
    static func curl(_ arguments: [String]) async throws -> (body: String, status: Int) {
        try await ServeProcessTests.curl(arguments)
    }

    /// The value of the unlabelled metric `name` in `/metrics`.
    static func metric(_ name: String, base: String) async throws -> Double? {
        let (body, _) = try await curl(["\(base)/metrics"])
        return body.split(separator: "\n").lazy.compactMap { line -> Double? in
            let parts = line.split(separator: " ")
            return parts.count == 2 && parts[0] == name ? Double(parts[1]) : nil
        }.first
    }

    @Test(
        "within its lease, PostgreSQL stopped: the node logs postgres_unreachable, stays ready, holds slot moves, takes writes into Redis; PostgreSQL back: postgres_reachable with the time it was away, and the writes reach PostgreSQL"
    )
    func withinTheLease() async throws {
        try await PrivateServers.with { servers in
            let (node, base) = try await ServeProcessTests.serveDemo(on: servers, lease: "60s")
            #expect(try await Self.curl(["-X", "PUT", "\(base)/v1/posts/1/likes/5"]).status == 200)
            try await servers.run("stop", only: "postgres")
            let unreachable = try await node.waitForOutput(timeout: .seconds(60)) { $0.contains { $0.contains("event=postgres_unreachable") } }
            #expect(unreachable, "\(node.lastLines)")
            // The post is in Redis: a write is taken, and the node is ready (a balancer that took
            // every node out while PostgreSQL fails over would refuse everything instead).
            #expect(try await Self.curl(["-X", "PUT", "\(base)/v1/posts/1/likes/6"]).status == 200)
            let ready = try await Self.curl(["\(base)/readyz"])
            #expect(ready.status == 200, "\(ready.body)")
            #expect(
                ready.body.contains(#""status":"ready""#) && ready.body.contains("postgres:") && ready.body.contains("while the lease holds"),
                "\(ready.body)")
            #expect(try await Self.metric("counter_postgres_unreachable_seconds", base: base) ?? 0 > 0)
            #expect(try await Self.metric("counter_slot_moves_held", base: base) == 1)
            try await servers.run("start", only: "postgres")
            let reachable = try await node.waitForOutput(timeout: .seconds(60)) { $0.contains { $0.contains("event=postgres_reachable") } }
            #expect(reachable, "\(node.lastLines)")
            #expect(
                node.output.contains { $0.contains("event=postgres_reachable") && $0.contains("unreachable_ms=") && $0.contains("lease_kept=true") })
            #expect(try await Self.metric("counter_postgres_outages_total", base: base) == 1)
            #expect(try await Self.metric("counter_postgres_unreachable_seconds", base: base) == 0)
            // The backlog goes to PostgreSQL: a flush asked now answers once it has.
            #expect(try await Self.curl(["-X", "POST", "\(base)/admin/flush"]).body == #"{"flushed":true,"pending_changes":0}"#)
            let pool = PostgresPool(configuration: PostgresConfiguration(url: servers.postgresURL))
            let count = try await pool.query("SELECT likes_count FROM posts WHERE id = 1").first?.int64(0)
            #expect(count == 2, "both likes in PostgreSQL")
            await pool.close()
            node.kill(SIGTERM)
            #expect(try await node.waitForExit() == 0)
        }
    }

    @Test("past its lease, PostgreSQL stopped: the node stops deciding and is not ready, naming PostgreSQL and the lease")
    func pastTheLease() async throws {
        try await PrivateServers.with { servers in
            let (node, base) = try await ServeProcessTests.serveDemo(on: servers, lease: "2s")
            try await servers.run("stop", only: "postgres")
            let lapsed = try await node.waitForOutput(timeout: .seconds(60)) { $0.contains { $0.contains("event=lease_lapsed") } }
            #expect(lapsed, "\(node.lastLines)")
            // Told at once: the probe's one-second cache does not outlive a change of the lease.
            let answer = try await Self.curl(["\(base)/readyz"])
            #expect(answer.status == 503)
            #expect(answer.body.contains("postgres:") && answer.body.contains("cluster: no lease renewal"), "\(answer.body)")
            #expect(try await Self.curl(["-X", "PUT", "\(base)/v1/posts/1/likes/6"]).status == 503)
            try await servers.run("start", only: "postgres")
            node.kill(SIGTERM)
            _ = try await node.waitForExit()
        }
    }
}
