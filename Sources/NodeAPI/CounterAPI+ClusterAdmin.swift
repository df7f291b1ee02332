import NodeHTTP

/// The cluster-wide operator calls (`/admin/cluster/…`) and what they share with the one-node
/// calls.
extension CounterAPI {
    /// The coordinator of a cluster-wide operator call made to this node.
    var clusterAdmin: ClusterAdmin {
        ClusterAdmin(member: member, peers: adminPeers, postgres: lists.postgres, deadLetters: deadLetters) { request in
            await self.answer(APIRoute.match(request.path), request, caller: .service)
        }
    }

    /// A flush call's `?wait=`: by default the answer waits until PostgreSQL has everything
    /// acknowledged before the request; `false` starts the flush and answers at once.
    static func waitArgument(_ request: HTTPRequest) throws -> Bool {
        switch request.query["wait"] {
        case nil, "true": return true
        case "false": return false
        case let text?: throw RequestError(code: .invalidArgument, message: "wait is \"true\" or \"false\", not \"\(text)\"")
        }
    }
}
