import CounterWire
import ShardRouter
import Testing

@testable import BenchKit

@Suite("Slot-aware routes and endpoints (pure)")
struct SlotAwareRoutesTests {
    static func node(_ id: String, port: Int, _ ranges: [[Int]], live: Bool = true) -> ClusterNodeBody {
        ClusterNodeBody(
            id: id, url: "http://127.0.0.1:\(port)", incarnation: 1, live: live, draining: false, leaseRemainingMs: 3_000,
            ownedSlots: ranges.reduce(0) { $0 + $1[1] - $1[0] + 1 }, slots: ranges, lowestEpoch: 1, highestEpoch: 1)
    }

    @Test("every post goes to the node whose range holds its slot; nodes without slots, and dead ones, are left out")
    func ownerOfEachPost() throws {
        let map = ClusterMapBody(
            version: 7, answeredBy: "a",
            nodes: [
                Self.node("a", port: 8081, [[0, 5460]]),
                Self.node("idle", port: 8084, []),
                Self.node("b", port: 8082, [[5461, 10922]]),
                Self.node("c", port: 8083, [[10923, 16383]]),
                Self.node("gone", port: 8085, [[0, 10]], live: false),
            ], movesPending: 0)
        let routes = try SlotAwareRoutes(map: map)
        #expect(routes.endpoints.map(\.port) == [8081, 8082, 8083])
        #expect(routes.nodeIDs == ["a", "b", "c"])
        #expect(routes.slotCounts == [5461, 5462, 5461])
        for post in Int64(1)...2_000 {
            let slot = Int(HashSlot(post: post).rawValue)
            let expected = slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2
            #expect(routes.endpoint(ofPost: post) == expected, "post \(post), slot \(slot)")
        }
    }

    @Test("a map with no live owner is refused")
    func noOwner() {
        let map = ClusterMapBody(version: 1, answeredBy: "a", nodes: [Self.node("a", port: 8081, [[0, 16383]], live: false)], movesPending: 0)
        #expect(throws: Endpoint.Invalid.self) { _ = try SlotAwareRoutes(map: map) }
    }

    @Test("routing: first, spread by connection, slot-aware by post (feed queries by connection)")
    func routing() throws {
        let routes = try SlotAwareRoutes(
            map: ClusterMapBody(
                version: 1, answeredBy: "a",
                nodes: [
                    Self.node("a", port: 8081, [[0, 8191]]), Self.node("b", port: 8082, [[8192, 16383]]),
                ], movesPending: 0))
        #expect(ScenarioWorkload.Routing.first.endpoint(post: 5, connection: 3) == 0)
        #expect((0..<6).map { ScenarioWorkload.Routing.spread(count: 3).endpoint(post: 5, connection: $0) } == [0, 1, 2, 0, 1, 2])
        let aware = ScenarioWorkload.Routing.slotAware(routes)
        for post in Int64(1)...200 {
            #expect(aware.endpoint(post: post, connection: 1) == (HashSlot(post: post).rawValue < 8192 ? 0 : 1))
        }
        #expect(aware.endpoint(post: nil, connection: 3) == 1)
    }

    @Test(
        "endpoints parse http://host:port, resolve names, and refuse other forms",
        arguments: [
            ("http://127.0.0.1:8081", "127.0.0.1:8081"), ("http://127.0.0.1:80/v1", "127.0.0.1:80"), ("http://localhost:9000", "127.0.0.1:9000"),
        ])
    func endpoints(url: String, expected: String) throws {
        #expect(try Endpoint(url: url).description == expected)
    }

    @Test(
        "bad endpoint URLs are refused with the URL in the message",
        arguments: [
            "127.0.0.1:8080", "https://127.0.0.1:8080", "http://127.0.0.1", "http://:8080", "http://127.0.0.1:0", "http://127.0.0.1:70000",
            "http://127.0.0.1:80x", "http://no-such-host.invalid:8080",
        ])
    func badEndpoints(url: String) {
        let error = #expect(throws: Endpoint.Invalid.self) { _ = try Endpoint(url: url) }
        #expect(error?.message.contains(url) == true)
    }
}
