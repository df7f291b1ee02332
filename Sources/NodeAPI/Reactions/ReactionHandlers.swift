import CounterCore
import NodeHTTP
import WritePath

/// The reactions' handlers beside the hot ones (`LikeRoute` with `.reactionStatus`): a post's
/// summary.
enum ReactionHandlers {
    /// `GET /v1/posts/{post}/reactions?user=U`: every kind's count, the total, and the kinds user
    /// `U` holds (with an end user's token, the token's user: `user` may only name it). Without
    /// a user, the counts alone (`user_id` null, `mine` empty).
    static func summary(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        try QueryArguments.refuseUnknown(request.query, known: ["user"], route: request.route.label)
        var user: Int64?
        if let text = request.query["user"] {
            guard let named = EntityID.parse(text) else {
                throw RequestError(code: .invalidArgument, message: "user must be a positive 64-bit integer in plain digits, not \"\(text)\"")
            }
            user = named
        }
        if case .user(let caller) = request.caller {
            if let user, user != caller {
                throw RequestError(code: .forbidden, message: "a user's token reads only that user's own reactions")
            }
            user = caller
        }
        let state = try await api.service.perform(
            user == nil ? .count : .read, post: request.ids.post, user: user ?? 0, waitingForSlot: request.waitingForSlot)
        return HTTPResponse(status: 200, body: HotAnswers.reactionStatus(state, userID: user))
    }

    /// `GET /v1/posts/{post}/reactions/{kind}/users?limit&cursor`: who reacted with the kind,
    /// newest first, exact including what waits for PostgreSQL (as the likers list is).
    static func reactors(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        let arguments = try LikeListAnswers.Arguments(request.query)
        let kind = request.ids.kind ?? .like
        return .json(try await api.lists.reactors(of: request.ids.post, kind: kind, arguments, waitingForSlot: request.waitingForSlot))
    }
}
