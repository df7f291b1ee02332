import CounterCore
import CounterWire
import NodeCluster
import NodeHTTP
import Persistence
import ShardRouter
import WritePath

/// A user's changes that the nodes of a cluster acknowledged and PostgreSQL may not have yet: a
/// user's likes span every slot, so the node answering the list takes its own shards' and asks
/// each other live node of the slot map for its own (`GET /v1/users/{user}/likes/pending`, with
/// the caller's credentials), all at once, before it reads PostgreSQL.
///
/// Each answer names the slots it holds the changes of (those its node serves), and the list
/// goes on only when together they cover all 16,384: a slot between owners (claimed in the map
/// but not served yet, a dead node's whose lease has not run out, one handed over after its old
/// owner answered) is asked again, with the map read again, until it is covered or `ownerWait`
/// has passed (then `503 no_owner`). A node that does not answer makes the list `503
/// unavailable` naming it — never a list with a slot's changes left out.
struct ClusterPendingLikes {
    let service: CounterService
    let member: ClusterMember
    let forwarder: Forwarder
    let ownerWait: Duration

    func all(of user: Int64, credentialsOf request: HTTPRequest) async throws -> [PendingLike] {
        let deadline = ContinuousClock.now + ownerWait
        try? await member.refreshMapUnlessFresh()
        while true {
            let own = try await service.pendingLikes(ofUser: user)
            var covered = own.servedSlots
            var changes = own.changes
            for answer in try await others(of: user, credentialsOf: request) {
                covered.formUnion(answer.servedSlots)
                changes += answer.changes
            }
            guard let missing = covered.firstMissing else { return changes }
            guard ContinuousClock.now < deadline, !Task.isCancelled else {
                throw CounterError(
                    code: .notOwner,
                    message:
                        "no live node served slot \(missing) within \(ownerWait) (a takeover is under way): its changes cannot be listed yet; retry",
                    retryAfterSeconds: 1)
            }
            try await Task.sleep(for: .milliseconds(50))
            try? await member.refreshMap()
        }
    }

    /// Every other live node's answer.
    private func others(of user: Int64, credentialsOf request: HTTPRequest) async throws -> [UserPendingLikes] {
        let me = member.configuration.nodeID
        let peers = member.map.nodes.filter { $0.isLive && $0.id != me }
        let target = "/v1/users/\(user)/likes/pending"
        return try await withThrowingTaskGroup(of: UserPendingLikes.self) { group in
            for peer in peers {
                group.addTask {
                    switch await forwarder.get(target, credentialsOf: request, from: peer.advertiseURL) {
                    case .failure(let failure):
                        throw CounterError(
                            code: .unavailable, message: "node \(peer.id) did not answer for user \(user)'s changes: \(failure.why); retry",
                            retryAfterSeconds: 1)
                    case .success(let response):
                        guard response.status == 200, let body = try? WireDecoder.decode(PendingLikesBody.self, from: response.body),
                            body.pending.allSatisfy({
                                LikeChange.acknowledgementRange.contains($0.atMilliseconds)
                                    && $0.kind.map { ReactionKind($0).map { !$0.isLike } ?? false } ?? true
                            }),
                            body.slots.allSatisfy({ $0.count == 2 && $0[0] <= $0[1] })
                        else {
                            let text = String(decoding: response.body.prefix(300), as: UTF8.self)
                            throw CounterError(
                                code: .unavailable, message: "node \(peer.id) answered \(response.status) for user \(user)'s changes: \(text)",
                                retryAfterSeconds: 1)
                        }
                        return UserPendingLikes(
                            changes: body.pending.map {
                                PendingLike(
                                    postID: $0.postID, userID: user, kind: $0.kind.flatMap { ReactionKind($0) } ?? .like, liked: $0.liked,
                                    acknowledgedAt: $0.atMilliseconds)
                            },
                            servedSlots: SlotSet(ranges: body.slots.map { $0[0]...$0[1] }))
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }
}
