import CounterCore
import Synchronization
import Testing

@testable import RedisDriver

@Suite("Redis node log lines (no servers)")
struct RedisNodeLogTests {
    final class Lines: Sendable {
        let all = Mutex<[String]>([])
        var log: NodeLog { NodeLog(minimum: .debug) { line in self.all.withLock { $0.append(line) } } }
        func count(_ event: String) -> Int { all.withLock { $0.filter { $0.contains("event=\(event)") }.count } }
    }

    @Test("a node lost and found is logged once each way, even when its connections disagree call after call")
    func onceEachWay() throws {
        let lines = Lines()
        let topology = RedisTopology(configuration: try RedisConfiguration(url: "redis://127.0.0.1:1"), log: lines.log)
        let node = RedisEndpoint(host: "127.0.0.1", port: 1)
        let lost = RedisError(code: .connectionFailed, message: "refused")
        topology.record(node, pipelines: 1)
        #expect(lines.count("redis_node_unreachable") == 0 && lines.count("redis_node_reconnected") == 0)
        // One connection keeps failing while another works: 1,000 alternating calls.
        for _ in 0..<500 {
            topology.record(node, pipelines: 1, error: lost)
            topology.record(node, pipelines: 1)
        }
        #expect(lines.count("redis_node_unreachable") == 1)
        #expect(lines.count("redis_node_reconnected") == 1)
        #expect(topology.nodeStates().first { $0.endpoint == node }?.connected == true)
    }
}
