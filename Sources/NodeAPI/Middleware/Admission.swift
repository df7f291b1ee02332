import NodeHTTP
import UserTokens

/// The step after the metrics: the route, the caller's token, the ids in the path and the method,
/// each refusal answered at once on the HTTP thread, in that order — a bad token is named before
/// a bad id, a bad id before a wrong method.
struct Admission: Sendable {
    let authentication: Authentication

    enum Outcome {
        case answer(HTTPResponse)
        case proceed(RouteRequest)
    }

    func admit(_ match: RouteMatch, _ request: HTTPRequest, method: HTTPMethod?) -> Outcome {
        switch match {
        case .notFound:
            return .answer(.error(.notFound, message: "no route \(request.method) \(request.path)"))
        case .invalidID(let what):
            // A bad id is named to anyone who may use one of the routes it could be meant for.
            if case .refused(let response) = authentication.caller(access: .apiOrUser, request) { return .answer(response) }
            return .answer(.error(.invalidID, message: "\(what) \(PathPattern.reason(what))"))
        case .found(let route, let ids):
            let caller: Caller
            switch authentication.caller(access: route.access, onlyWith: route.onlyWith, request) {
            case .refused(let response): return .answer(response)
            case .caller(let admitted): caller = admitted
            }
            guard let method, route.methods.contains(method) else {
                return .answer(
                    .error(
                        .methodNotAllowed, message: "\(request.method) is not allowed on \(route.label); use \(route.allowed)",
                        headers: ["Allow": route.allowed]))
            }
            return .proceed(RouteRequest(http: request, route: route, ids: ids, caller: caller))
        }
    }

    /// The codes this step answers on `route`.
    static func codes(of route: Route) -> Set<ErrorCode> {
        var codes: Set<ErrorCode> = [.methodNotAllowed]
        if route.pattern.literalCount < route.pattern.segments.count { codes.insert(.invalidID) }
        let tokenRefusals = Set(TokenRefusal.Code.allCases.map(ErrorCode.init))
        switch route.access {
        case .open: break
        case .api, .admin, .any, .events: codes.insert(.unauthorized)
        // Off without a secret or key set (or the seed's route without its setting); with the
        // API token, a Counter-User header that is not an id.
        case .user: codes.formUnion(tokenRefusals.union([.unauthorized, .notFound, .invalidID]))
        case .apiOrUser: codes.formUnion(tokenRefusals.union([.unauthorized]))
        }
        return codes
    }
}
