import Foundation
import Persistence
import TestSupport
import Testing

@Suite("Node registry against a real PostgreSQL")
struct NodeRegistryTests {
    static func uniqueID() -> String { "test-node-\(UUID().uuidString.prefix(8))" }

    @Test("a node id is held by one process at a time; the second is refused clearly, nothing changed")
    func oneHolder() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let registry = NodeRegistry(pool: pool, deployment: TestEnvironment.uniqueKeyPrefix("registry"))
        let id = Self.uniqueID()
        let first = try await registry.register(nodeID: id, advertiseURL: "http://127.0.0.1:9001", lease: .seconds(30))
        let refused = await #expect(throws: NodeRegistry.IDInUse.self) {
            try await registry.register(nodeID: id, advertiseURL: "http://127.0.0.1:9002", lease: .seconds(30))
        }
        #expect(refused?.description.contains("http://127.0.0.1:9001") == true)
        let nodes = try await registry.nodes().filter { $0.id == id }
        #expect(nodes.map(\.incarnation) == [first])
        #expect(nodes.map(\.advertiseURL) == ["http://127.0.0.1:9001"])
        #expect(nodes.map(\.isLive) == [true])
        #expect(nodes.map(\.isDraining) == [false])
        #expect(nodes.allSatisfy { $0.leaseRemainingMilliseconds > 0 && $0.leaseRemainingMilliseconds <= 30_000 })
        #expect(refused?.incarnation == first)
        await pool.close()
    }

    /// Waits (up to 30 s) until `id`'s lease has run out by PostgreSQL's clock; whether it has.
    static func waitForLapse(of id: String, in registry: NodeRegistry) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if try await registry.nodes().first(where: { $0.id == id })?.isLive == false { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    @Test("a lease that runs out (by PostgreSQL's clock) frees the id for a new incarnation; the old one can no longer renew")
    func expiry() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let registry = NodeRegistry(pool: pool, deployment: TestEnvironment.uniqueKeyPrefix("registry"))
        let id = Self.uniqueID()
        // Registered for 30 s, so the renewal finds the lease running however slow the machine
        // is; the renewal shortens it to 300 ms, which then run out (waited for, by PostgreSQL's
        // clock, however long a busy machine takes).
        let old = try await registry.register(nodeID: id, advertiseURL: "http://a", lease: .seconds(30))
        #expect(try await registry.renew(nodeID: id, incarnation: old, lease: .milliseconds(300)))
        #expect(try await registry.nodes().first { $0.id == id }.map { $0.leaseRemainingMilliseconds <= 300 } == true)
        #expect(try await Self.waitForLapse(of: id, in: registry), "the 300 ms lease never ran out")
        let new = try await registry.register(nodeID: id, advertiseURL: "http://b", lease: .seconds(30))
        #expect(new > old)
        #expect(try await registry.renew(nodeID: id, incarnation: old, lease: .seconds(30)) == false, "the old incarnation is fenced")
        #expect(try await registry.renew(nodeID: id, incarnation: new, lease: .seconds(30)))
        await pool.close()
    }

    @Test("a renewal tells whether the lease had already run out: a node cut off for longer than its lease learns it")
    func renewalAfterLapse() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let registry = NodeRegistry(pool: pool, deployment: TestEnvironment.uniqueKeyPrefix("registry"))
        let id = Self.uniqueID()
        // Registered for 30 s, so the first renewal finds the lease running however slow the
        // machine is; that renewal shortens it to 400 ms.
        let incarnation = try await registry.register(nodeID: id, advertiseURL: "http://a", lease: .seconds(30))
        #expect(try await registry.renewal(nodeID: id, incarnation: incarnation, lease: .milliseconds(400)) == .renewed)
        #expect(try await Self.waitForLapse(of: id, in: registry), "the 400 ms lease never ran out")
        #expect(try await registry.renewal(nodeID: id, incarnation: incarnation, lease: .seconds(30)) == .renewedAfterLapse)
        #expect(try await registry.renewal(nodeID: id, incarnation: incarnation, lease: .seconds(30)) == .renewed)
        #expect(try await registry.renewal(nodeID: id, incarnation: incarnation + 1, lease: .seconds(30)) == .superseded)
        await pool.close()
    }

    @Test("a node that leaves in good order frees its id at once")
    func release() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let registry = NodeRegistry(pool: pool, deployment: TestEnvironment.uniqueKeyPrefix("registry"))
        let id = Self.uniqueID()
        let incarnation = try await registry.register(nodeID: id, advertiseURL: "http://a", lease: .seconds(60))
        try await registry.release(nodeID: id, incarnation: incarnation)
        #expect(try await registry.nodes().first { $0.id == id }?.isLive == false)
        let next = try await registry.register(nodeID: id, advertiseURL: "http://a", lease: .seconds(60))
        #expect(next > incarnation)
        await pool.close()
    }

    @Test(
        "every live node of a deployment holds the same settings: another is refused naming both; a node of an older version counts as likes only; none live, any may start"
    )
    func settingsAgree() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let registry = NodeRegistry(pool: pool, deployment: TestEnvironment.uniqueKeyPrefix("settings"))
        let (a, b) = (Self.uniqueID(), Self.uniqueID())
        let first = try await registry.register(nodeID: a, advertiseURL: "http://a", lease: .seconds(30), settings: "like,love one 20/20")
        let refused = await #expect(throws: NodeRegistry.SettingsDisagree.self) {
            try await registry.register(nodeID: b, advertiseURL: "http://b", lease: .seconds(30), settings: "like")
        }
        #expect(refused == NodeRegistry.SettingsDisagree(nodeID: a, theirs: "like,love one 20/20", mine: "like"))
        #expect(try await registry.nodes().map(\.id) == [a], "the refused node is not registered")
        _ = try await registry.register(nodeID: b, advertiseURL: "http://b", lease: .seconds(30), settings: "like,love one 20/20")
        // Once no node holding them is live, other settings may start.
        try await registry.release(nodeID: a, incarnation: first)
        let second = try #require(try await registry.nodes().first { $0.id == b })
        try await registry.release(nodeID: b, incarnation: second.incarnation)
        _ = try await registry.register(nodeID: a, advertiseURL: "http://a", lease: .seconds(30), settings: "like")
        // A row without settings (a node of a version before them) is likes only.
        try await pool.query("UPDATE counter_nodes SET settings = NULL WHERE deployment = $1 AND id = $2", [.text(registry.deployment), .text(a)])
        _ = try await registry.register(nodeID: b, advertiseURL: "http://b", lease: .seconds(30))
        await #expect(throws: NodeRegistry.SettingsDisagree.self) {
            try await registry.register(nodeID: Self.uniqueID(), advertiseURL: "http://c", lease: .seconds(30), settings: "open many 20/20")
        }
        await pool.close()
    }
}
