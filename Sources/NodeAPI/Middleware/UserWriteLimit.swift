import NodeHTTP
import ShardRouter
import WritePath

/// The step after admission: an end user's write on a rate-limited route takes a token from the
/// user's bucket (`UserRateLimiter`), or is answered `429` there and then, touching nothing.
/// Counted where the post's slot is served: a request this node forwards is counted by the node
/// it goes to, so each write takes one token, wherever it came in.
struct UserWriteLimit: Sendable {
    /// `nil`: no limits.
    let limiter: UserRateLimiter?
    let ownership: OwnedSlots
    /// Whether requests for slots other nodes serve are forwarded to them (a node of a cluster).
    let forwards: Bool

    /// The `429` for `request`, or `nil` to let it go ahead.
    func refusal(_ request: RouteRequest, method: HTTPMethod?) -> HTTPResponse? {
        guard request.route.rateLimited, method != .get, case .user(let user) = request.caller, let limiter else { return nil }
        if forwards && ownership.state(of: HashSlot(post: request.ids.post).rawValue) == .notOwned { return nil }
        guard let wait = limiter.admit(user) else { return nil }
        return .error(
            .rateLimited,
            message: "user \(user) may write \(Int(limiter.writesPerSecond)) times a second (\(limiter.burst) at once); try again in \(wait) s",
            retryAfterSeconds: wait)
    }

    /// The codes this step answers on `route`, for `method`.
    static func codes(of route: Route, method: HTTPMethod) -> Set<ErrorCode> {
        route.rateLimited && method != .get ? [.rateLimited] : []
    }
}
