import CounterCore
import NodeHTTP
import WritePath

/// A like or reaction route's handler: which operation a request asks for, of which kind (the
/// path's `{kind}` on the reaction routes, else `like`), and how its answer is written.
/// The middleware hands it straight to `CounterService.submit` from the HTTP thread (the hot
/// path: no task per request, the answer built in the write path's completion), and to `perform`
/// when it runs again here, awaited, after the map named this node the slot's owner.
struct LikeRoute: Sendable {
    enum Operation: Sendable {
        case toggle
        /// `GET` reads, `PUT` likes, `DELETE` unlikes.
        case byMethod
    }

    enum Answer: Sendable {
        /// `LikeStatus`.
        case likeStatus
        /// `{"is_liked":…,"likes_count":…}`, as the seed's Laravel endpoint answered.
        case seed
        /// `ReactionStatus`: every kind's count, the total, the user's kinds.
        case reactionStatus
    }

    let operation: Operation
    let answer: Answer

    init(_ operation: Operation, answer: Answer = .likeStatus) {
        self.operation = operation
        self.answer = answer
    }

    func operation(for method: HTTPMethod?) -> LikeOperation {
        switch operation {
        case .toggle: return .toggle
        case .byMethod: return method == .put ? .like : method == .delete ? .unlike : .read
        }
    }

    /// The user whose like it is: the path's, or on the user routes the caller's; `nil` for a
    /// caller that is not a user on a route without one in its path (the middleware lets none by).
    static func user(of request: RouteRequest) -> Int64? {
        if request.ids.user != 0 { return request.ids.user }
        if case .user(let user) = request.caller { return user }
        return nil
    }

    /// The kind a request names: the path's, or `like`.
    static func kind(of request: RouteRequest) -> ReactionKind {
        request.ids.kind ?? .like
    }

    func response(_ state: LikeState) -> HTTPResponse {
        switch answer {
        case .likeStatus: return HTTPResponse(status: 200, body: HotAnswers.likeStatus(state))
        case .seed: return HTTPResponse(status: 200, body: HotAnswers.seedStatus(state))
        case .reactionStatus: return HTTPResponse(status: 200, body: HotAnswers.reactionStatus(state, userID: state.userID))
        }
    }

    /// The request run here and awaited: the slow path's form of the same handler.
    func perform(_ service: CounterService, _ request: RouteRequest) async throws -> HTTPResponse {
        guard let user = Self.user(of: request) else { throw CounterError(code: .invalidArgument, message: "no user for \(request.route.label)") }
        let state = try await service.perform(
            operation(for: HTTPMethod(rawValue: request.http.method)), post: request.ids.post, user: user, kind: Self.kind(of: request),
            waitingForSlot: request.waitingForSlot)
        return response(state)
    }
}
