import CounterWire
import NodeHTTP
import WritePath

/// The lists' handlers: a post's likers, a user's likes and reactions (the caller's own with a
/// user's token),
/// and the changes of a user this node holds that PostgreSQL may not have yet.
enum ListHandlers {
    /// `GET /v1/posts/{post}/likers`.
    static func likers(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        let arguments = try LikeListAnswers.Arguments(request.query)
        return .json(try await api.lists.likers(of: request.ids.post, arguments, waitingForSlot: request.waitingForSlot))
    }

    /// `GET /v1/users/{user}/likes`: a user's token lists only its own user's.
    static func userLikes(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        if case .user(let caller) = request.caller, caller != request.ids.user {
            return .error(.forbidden, message: "a user's token lists only that user's own likes (GET /v1/me/likes)")
        }
        return try await likes(of: request.ids.user, api, request)
    }

    /// `GET /v1/me/likes`.
    static func myLikes(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        guard case .user(let user) = request.caller else {
            return .error(.unauthorized, message: "GET /v1/me/likes needs an end user's token")
        }
        return try await likes(of: user, api, request)
    }

    /// `GET /v1/users/{user}/reactions`: a user's token lists only its own user's.
    static func userReactions(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        if case .user(let caller) = request.caller, caller != request.ids.user {
            return .error(.forbidden, message: "a user's token lists only that user's own reactions (GET /v1/me/reactions)")
        }
        return try await reactions(of: request.ids.user, api, request)
    }

    /// `GET /v1/me/reactions`.
    static func myReactions(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        guard case .user(let user) = request.caller else {
            return .error(.unauthorized, message: "GET /v1/me/reactions needs an end user's token")
        }
        return try await reactions(of: user, api, request)
    }

    /// `GET /v1/users/{user}/likes/pending`: what the node answering a user's likes asks of the
    /// others.
    static func pending(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        let user = request.ids.user
        if case .user(let caller) = request.caller, caller != user {
            return .error(.forbidden, message: "a user's token reads only that user's own changes")
        }
        let pending = try await api.service.pendingLikes(ofUser: user)
        return .json(
            PendingLikesBody(
                userID: user,
                pending: pending.changes.map {
                    PendingLikesBody.Change(
                        postID: $0.postID, liked: $0.liked, atMilliseconds: $0.acknowledgedAt, kind: $0.kind.isLike ? nil : $0.kind.name)
                }, slots: pending.servedSlots.ranges.map { [$0.lowerBound, $0.upperBound] }))
    }

    /// A page of `user`'s likes: the changes waiting for PostgreSQL are every shard's of this
    /// node and, in a cluster, every other live node's (`ClusterPendingLikes`).
    private static func likes(of user: Int64, _ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        let arguments = try LikeListAnswers.Arguments(request.query)
        return .json(try await api.lists.likes(of: user, pending: try await pending(of: user, api, request), arguments))
    }

    /// A page of `user`'s reactions, pending changes gathered as for its likes.
    private static func reactions(of user: Int64, _ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        let arguments = try LikeListAnswers.Arguments(request.query)
        return .json(try await api.lists.reactions(of: user, pending: try await pending(of: user, api, request), arguments))
    }

    /// `user`'s changes waiting for PostgreSQL: every shard's of this node and, in a cluster,
    /// every other live node's (`ClusterPendingLikes`).
    private static func pending(of user: Int64, _ api: CounterAPI, _ request: RouteRequest) async throws -> [PendingLike] {
        guard let member = api.member, let forwarder = api.forwarding.forwarder else {
            return try await api.service.pendingLikes(ofUser: user).changes
        }
        return try await ClusterPendingLikes(
            service: api.service, member: member, forwarder: forwarder,
            ownerWait: api.service.configuration.slotMoveWait
        )
        .all(of: user, credentialsOf: request.http)
    }
}
