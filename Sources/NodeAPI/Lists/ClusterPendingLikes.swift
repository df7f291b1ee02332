import CounterWire
import NodeCluster
import NodeHTTP
import WritePath

/// A user's changes that the *other* nodes of a cluster acknowledged and PostgreSQL may not have
/// yet: a user's likes span every slot, so the node answering the list asks each live node of
/// the slot map for its own (`GET /v1/users/{user}/likes/pending`, with the caller's
/// credentials), all at once, before it reads PostgreSQL.
///
/// The answer is exact as of the map it reads (refreshed unless fresh): while a slot has no live
/// owner (a takeover under way) the changes its log holds are nobody's to give, so the list
/// waits for an owner, up to `ownerWait`, then answers `503 no_owner`; a node that does not
/// answer makes the list `503 unavailable` naming it — never a list with its changes left out.
struct ClusterPendingLikes {
    let member: ClusterMember
    let forwarder: Forwarder
    let ownerWait: Duration

    func others(of user: Int64, credentialsOf request: HTTPRequest) async throws -> [PendingLike] {
        let me = member.configuration.nodeID
        let deadline = ContinuousClock.now + ownerWait
        try? await member.refreshMapUnlessFresh()
        while true {
            let ownerless = member.map.firstOwnerlessSlot
            if ownerless == nil { break }
            guard ContinuousClock.now < deadline, !Task.isCancelled else {
                throw CounterError(code: .notOwner, message: "no live node owned slot \(ownerless ?? 0) within \(ownerWait) (a takeover is under way): its changes cannot be listed yet; retry",
                                   retryAfterSeconds: 1)
            }
            try await Task.sleep(for: .milliseconds(50))
            try? await member.refreshMap()
        }
        let peers = member.map.nodes.filter { $0.isLive && $0.id != me }
        let target = "/v1/users/\(user)/likes/pending"
        return try await withThrowingTaskGroup(of: [PendingLike].self) { group in
            for peer in peers {
                group.addTask {
                    switch await forwarder.get(target, credentialsOf: request, from: peer.advertiseURL) {
                    case .failure(let failure):
                        throw CounterError(code: .unavailable, message: "node \(peer.id) did not answer for user \(user)'s changes: \(failure.why); retry",
                                           retryAfterSeconds: 1)
                    case .success(let response):
                        guard response.status == 200, let body = try? WireDecoder.decode(PendingLikesBody.self, from: response.body) else {
                            let text = String(decoding: response.body.prefix(300), as: UTF8.self)
                            throw CounterError(code: .unavailable, message: "node \(peer.id) answered \(response.status) for user \(user)'s changes: \(text)",
                                               retryAfterSeconds: 1)
                        }
                        return body.pending.map { PendingLike(postID: $0.postID, userID: user, liked: $0.liked, acknowledgedAt: $0.atMilliseconds) }
                    }
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
    }
}
