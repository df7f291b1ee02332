import BenchKit
import CounterWire
import Foundation

/// The nodes a bench run talks to, read from the node at `--url` before the run: every live node
/// of its cluster (flushed before the correctness check, and whose CPU is counted), and the
/// routes of a slot-aware run.
struct ClusterView {
    /// The node at `--url`, then every other live node of its cluster.
    let nodes: [Endpoint]
    /// The map, when the node is part of a cluster (it answers `/v1/cluster`).
    let map: ClusterMapBody?

    /// Reads `GET /v1/cluster` from `entry`. A node that answers `404` runs alone.
    /// - Throws: `BenchCheckFailure` when the node cannot be reached or answers otherwise.
    static func read(from entry: Endpoint, token: String?) throws -> ClusterView {
        let (status, body) = try OneShotHTTP.send(to: entry, method: "GET", path: "/v1/cluster", token: token, timeoutSeconds: 10)
        if status == 404 { return ClusterView(nodes: [entry], map: nil) }
        guard status == 200, let map = try? WireDecoder.decode(ClusterMapBody.self, from: Data(body.utf8)) else {
            throw BenchCheckFailure(message: "GET /v1/cluster on \(entry) answered \(status): \(body.prefix(200))")
        }
        var nodes = [entry]
        for node in map.nodes where node.live {
            guard let endpoint = try? Endpoint(url: node.url), !nodes.contains(endpoint) else { continue }
            nodes.append(endpoint)
        }
        return ClusterView(nodes: nodes, map: map)
    }

    /// `POST /admin/flush` on every node, so PostgreSQL has everything acknowledged.
    func flushAll(token: String?) throws {
        for node in nodes {
            let (status, body) = try OneShotHTTP.send(to: node, method: "POST", path: "/admin/flush", token: token)
            guard status == 200 else { throw BenchCheckFailure(message: "POST /admin/flush on \(node) answered \(status): \(body)") }
        }
    }
}
