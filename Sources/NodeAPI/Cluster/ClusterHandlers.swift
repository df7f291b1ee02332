import CounterWire
import NodeHTTP

/// The cluster's handlers: the slot map, and a node's draining.
enum ClusterHandlers {
    /// `GET /v1/cluster`: the slot map as this node last read it.
    static func map(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        guard let member = api.member else {
            return .error(.notClustered, message: "this node runs as the only writer; it has no slot map")
        }
        return .json(ClusterAnswers.body(member.map, answeredBy: member.configuration.nodeID))
    }

    /// `POST /admin/cluster/drain`: `{"node_id":"…","draining":true}` marks a node draining (its
    /// slots go to the others), `false` not.
    static func drain(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        guard let member = api.member else {
            return .error(.notClustered, message: "this node runs as the only writer; it has no cluster to drain")
        }
        let drain = try RequestBody.decode(DrainRequest.self, request.body)
        let draining = drain.draining ?? true
        guard try await member.setDraining(nodeID: drain.nodeID, draining) else {
            return .error(.nodeNotFound, message: "no node \"\(drain.nodeID)\" is registered in this cluster")
        }
        return .json(DrainResult(nodeID: drain.nodeID, draining: draining))
    }
}
