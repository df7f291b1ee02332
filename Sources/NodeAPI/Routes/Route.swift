import NodeHTTP

/// One route of the HTTP API, declared once in `APIRoutes`: its path (also its metrics label and
/// its path in the OpenAPI document), the methods it answers, who may call it, what the
/// middleware does around it, the error codes its handler answers, and the handler.
final class Route: Sendable {
    /// Which token the route needs: none, the API token (or the admin token), the admin token,
    /// either, an end user's token, the API token or a user's, or the events token (or the admin
    /// token).
    enum Access: Sendable { case open, api, admin, any, user, apiOrUser, events }

    /// How the handler runs.
    enum Handler: Sendable {
        /// Answered on the HTTP thread at once: nothing to wait for.
        case instant(@Sendable (CounterAPI, RouteRequest) -> HTTPResponse)
        /// A like, unlike, toggle or read: handed to the write path from the HTTP thread and
        /// answered in its completion, no task per request (the hot path).
        case like(LikeRoute)
        /// Runs as one of the API's request tasks (`RequestTasks`).
        case task(@Sendable (CounterAPI, RouteRequest) async throws -> HTTPResponse)
    }

    /// What happens when the post's slot is not served here (the write path says `notOwner`).
    enum Forwarding: Sendable, Equatable {
        /// Nothing: the refusal is the answer (or the route has no post).
        case none
        /// Sent on to the owner (`SlotForwarding`). `repeatable`: whether running it twice is
        /// harmless, so it may be sent again after a broken connection (everything but a toggle).
        case toOwner(repeatable: Bool)
    }

    /// A setting of the node that must be on for the route to answer (else `404`).
    enum Setting: Sendable { case seedRoute }

    let pattern: PathPattern
    /// In the order `Allow` lists them.
    let methods: [HTTPMethod]
    let access: Access
    let forwarding: Forwarding
    /// An end user's writes on it (every method but `GET`) take a token from their bucket
    /// (`UserWriteLimit`).
    let rateLimited: Bool
    let onlyWith: Setting?
    /// The error codes the handler answers; the middleware adds its own
    /// (`RequestChain.codes(of:method:)`).
    let errors: [ErrorCode]
    let handler: Handler

    init(
        _ path: String, _ methods: HTTPMethod..., access: Access, forwarding: Forwarding = .none, rateLimited: Bool = false,
        onlyWith: Setting? = nil, errors: [ErrorCode] = [], _ handler: Handler
    ) {
        precondition(!methods.isEmpty, "route \(path) answers no method")
        pattern = PathPattern(path)
        self.methods = methods
        self.access = access
        self.forwarding = forwarding
        self.rateLimited = rateLimited
        self.onlyWith = onlyWith
        self.errors = errors
        self.handler = handler
    }

    /// The label metrics use for the route: its path as declared.
    var label: String { pattern.text }

    /// The `Allow` header's value.
    var allowed: String { methods.map(\.rawValue).joined(separator: ", ") }
}

/// The methods the API answers; any other is refused `405`.
enum HTTPMethod: String, Sendable, CaseIterable {
    case get = "GET"
    case put = "PUT"
    case delete = "DELETE"
    case post = "POST"
}
