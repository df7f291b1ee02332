import CounterCore
import NodeHTTP
import UserTokens

/// Who a request comes from, once its token is checked.
enum Caller: Equatable {
    /// A route open to all (health), or a node without tokens (loopback only).
    case anyone
    /// A backend with the API or admin token.
    case service
    /// An end user, from a verified token (or a backend acting for them, when allowed).
    case user(Int64)
}

/// A request's caller, or the answer that turns it away.
enum CallerOrRefusal {
    case caller(Caller)
    case refused(HTTPResponse)
}

/// Decides who a request comes from, or the answer that turns it away. Runs on the HTTP thread,
/// once per request: a token already verified costs a SHA-256 and a dictionary lookup.
struct Authentication: Sendable {
    let tokens: AccessTokens
    let users: UserAccess?

    /// The caller of `request` on a route of `access` that answers only with `setting` on.
    func caller(access: Route.Access, onlyWith setting: Route.Setting? = nil, _ request: HTTPRequest) -> CallerOrRefusal {
        switch access {
        case .open:
            return .caller(.anyone)
        case .api, .admin, .any, .events:
            return serviceCaller(access, request)
        case .user:
            guard let users, users.configuration.isEnabled else {
                return .refused(.error(.notFound, message: "the user routes are off: the node needs --user-token-secret or --user-token-jwks"))
            }
            if setting == .seedRoute, !users.configuration.seedRoute {
                return .refused(.error(.notFound, message: "no route \(request.method) \(request.path) (the seed's route is off: --seed-route true)"))
            }
            guard let token = Self.bearer(request.authorization) else { return .refused(Self.missingToken) }
            if users.configuration.apiTokenOnUserRoutes, let api = tokens.api,
                AccessTokens.constantTimeEqual(Array(token), Array(api.utf8))
            {
                guard let text = request.actingUser, let user = EntityID.parse(text) else {
                    return .refused(
                        .error(
                            .invalidID,
                            message: "with the API token, the user routes need a Counter-User header with the user id (a positive 64-bit integer)"))
                }
                return .caller(.user(user))
            }
            return userCaller(token, users)
        case .apiOrUser:
            // A backend's token first; anything else that is presented must be a user's.
            if let users, users.configuration.isEnabled, let token = Self.bearer(request.authorization),
                !tokens.isServiceToken(Array(token))
            {
                return userCaller(token, users)
            }
            return serviceCaller(.api, request)
        }
    }

    private func serviceCaller(_ access: Route.Access, _ request: HTTPRequest) -> CallerOrRefusal {
        if let refusal = tokens.refusal(request.authorization, for: access) {
            return .refused(.error(.unauthorized, message: refusal, headers: ["WWW-Authenticate": "Bearer"]))
        }
        return .caller(tokens.api == nil && access == .api ? .anyone : .service)
    }

    private func userCaller(_ token: Substring.UTF8View, _ users: UserAccess) -> CallerOrRefusal {
        do {
            return .caller(.user(try users.verifier.user(of: Array(token))))
        } catch {
            users.countRefusal(error.code)
            return .refused(
                .error(
                    ErrorCode(error.code), message: error.message,
                    headers: ["WWW-Authenticate": #"Bearer error="invalid_token""#]))
        }
    }

    static let missingToken = HTTPResponse.error(
        .unauthorized, message: "missing bearer token: send Authorization: Bearer <token>",
        headers: ["WWW-Authenticate": "Bearer"])

    /// The token of an `Authorization: Bearer <token>` header.
    static func bearer(_ authorization: String?) -> Substring.UTF8View? {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return nil }
        return authorization.dropFirst(7).utf8
    }
}
