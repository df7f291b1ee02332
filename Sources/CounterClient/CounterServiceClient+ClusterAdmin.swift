import CounterWire
import Foundation

/// The operator calls on a whole cluster (admin token): the node asked makes the one-node call
/// on every live node and merges the answers. Each answer says whether it is `complete` and
/// names the nodes that did not answer and the slots no live node owned. On a node that is the
/// only writer they are the one-node calls, answered in the same shape.
extension CounterServiceClient {
    /// `POST /admin/cluster/flush`: with `wait`, returns once every live node has PostgreSQL
    /// holding every change it acknowledged before the call.
    public func clusterFlush(wait: Bool = true) async throws(CounterClientError) -> ClusterFlushResult {
        try await call("POST", "/admin/cluster/flush" + (wait ? "" : "?wait=false"), admin: true, idempotent: false)
    }

    /// `GET /admin/cluster/stats`: every live node's statistics and their total.
    public func clusterStatistics() async throws(CounterClientError) -> ClusterStatistics {
        try await call("GET", "/admin/cluster/stats", admin: true, idempotent: true)
    }

    /// `POST /admin/cluster/reconcile`: `posts`, or a page of all posts after `after`, each
    /// checked (and with `repair`, repaired) by the owner of its slot.
    public func clusterReconcile(
        posts: [Int64]? = nil, after: Int64 = 0, limit: Int = 1_000,
        repair: Bool = false
    ) async throws(CounterClientError) -> ClusterReconcileReport {
        let request =
            posts.map { ReconcileRequest(postIDs: $0, repair: repair) }
            ?? ReconcileRequest(after: after, limit: limit, repair: repair)
        return try await call("POST", "/admin/cluster/reconcile", body: try Self.encode(request), admin: true, idempotent: !repair)
    }

    /// `POST /admin/cluster/dead-letters/replay`: the letters `ids` (all when `nil`), each
    /// replayed by the owner of its post's slot.
    public func clusterReplayDeadLetters(ids: [String]? = nil) async throws(CounterClientError) -> ClusterReplayResult {
        let body = try ids.map { ids throws(CounterClientError) in try Self.encode(DeadLetterSelection(ids: ids)) }
        return try await call("POST", "/admin/cluster/dead-letters/replay", body: body, admin: true, idempotent: false)
    }
}
