import NodeHTTP

/// The operators' handlers on the whole cluster (`/admin/cluster/…` but the drain): the one-node
/// call made on every live node, the answers merged (`ClusterAdmin`).
enum ClusterAdminHandlers {
    /// `POST /admin/cluster/flush[?wait=false]`.
    static func flush(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        .json(await coordinator(api).flush(wait: try AdminHandlers.waitArgument(request.http), authorization: request.http.authorization))
    }

    /// `GET /admin/cluster/stats`.
    static func stats(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        .json(await coordinator(api).statistics(authorization: request.http.authorization))
    }

    /// `POST /admin/cluster/reconcile`.
    static func reconcile(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        .json(try await coordinator(api).reconcile(try AdminAnswers.reconcileRequest(request.body), authorization: request.http.authorization))
    }

    /// `POST /admin/cluster/dead-letters/replay`.
    static func replay(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        .json(try await coordinator(api).replay(ids: try AdminAnswers.replayIDs(request.body), authorization: request.http.authorization))
    }

    /// The coordinator of a cluster-wide call made to this node; it asks this node in process.
    private static func coordinator(_ api: CounterAPI) -> ClusterAdmin {
        ClusterAdmin(member: api.member, peers: api.adminPeers, records: api.storage.records, deadLetters: api.deadLetters) { request in
            await api.chain.answerInProcess(request, api: api)
        }
    }
}
