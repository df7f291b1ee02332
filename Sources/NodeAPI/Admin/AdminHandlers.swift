import CounterCore
import CounterWire
import NodeHTTP

/// The operators' handlers on this node (`/admin/…`): flush, statistics, a post's inspection,
/// reconcile, and the dead letters.
enum AdminHandlers {
    /// `POST /admin/flush[?wait=false]`.
    static func flush(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        let wait = try waitArgument(request.http)
        if wait {
            try await api.service.flush()
        } else {
            await api.service.requestFlush()
        }
        let pending = await api.service.stats().reduce(0) { $0 + $1.pendingChanges }
        return .json(FlushResult(flushed: wait, pendingChanges: pending))
    }

    /// `GET /admin/stats`.
    static func stats(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        .json(StatisticsAnswer.make(await api.service.stats(), redis: api.storage.servers.redisReport()))
    }

    /// `GET /admin/posts/{post}[?user=…]`.
    static func inspect(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        let user: Int64?
        if let text = request.query["user"] {
            guard let parsed = EntityID.parse(text) else {
                return .error(.invalidID, message: "user id \"\(text)\" is not a positive 64-bit integer")
            }
            user = parsed
        } else {
            user = nil
        }
        return .json(try await api.inspector.inspect(post: request.ids.post, user: user))
    }

    /// `POST /admin/reconcile`.
    static func reconcile(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        try await AdminAnswers.reconcile(request.body, api.reconciler)
    }

    /// `GET /admin/dead-letters[?count=…]`.
    static func deadLetters(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        var count = 100
        if let text = request.query["count"] {
            // Digits only, on what the client sent (nothing is percent-decoded).
            guard let parsed = EntityID.parse(text), parsed <= 10_000 else {
                return .error(.invalidArgument, message: "count \"\(text)\" is not a whole number from 1 to 10,000")
            }
            count = Int(parsed)
        }
        return AdminAnswers.letters(try await api.deadLetters.list(count: count))
    }

    /// `POST /admin/dead-letters/replay`.
    static func replay(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        try await AdminAnswers.replay(request.body, api.deadLetters)
    }

    /// `POST /admin/dead-letters/drop`.
    static func drop(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        try await AdminAnswers.drop(request.body, api.deadLetters)
    }

    /// A flush call's `?wait=`: by default the answer waits until PostgreSQL has everything
    /// acknowledged before the request; `false` starts the flush and answers at once.
    static func waitArgument(_ request: HTTPRequest) throws(RequestError) -> Bool {
        switch request.query["wait"] {
        case nil, "true": return true
        case "false": return false
        case let text?: throw RequestError(code: .invalidArgument, message: "wait is \"true\" or \"false\", not \"\(text)\"")
        }
    }
}
