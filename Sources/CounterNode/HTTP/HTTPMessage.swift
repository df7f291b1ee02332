/// A complete HTTP request as the handlers see it: the HTTP library stays behind `HTTPServer`.
public struct HTTPRequest: Sendable {
    public let method: String
    /// The path without the query string, as sent (not decoded).
    public let path: String
    /// Query arguments, decoded.
    public let query: [String: String]
    /// The `Authorization` header, if any.
    public let authorization: String?
    public let body: [UInt8]

    public init(method: String, path: String, query: [String: String] = [:], authorization: String? = nil, body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.authorization = authorization
        self.body = body
    }
}

/// A complete HTTP response.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var contentType: String
    public var headers: [String: String]
    public var body: [UInt8]

    public init(status: Int, contentType: String = "application/json", headers: [String: String] = [:], body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.headers = headers
        self.body = body
    }

    /// The service's error format: `{"error":{"code":"…","message":"…"}}`.
    public static func error(_ status: Int, code: String, message: String, retryAfterSeconds: Int? = nil, headers: [String: String] = [:]) -> HTTPResponse {
        var writer = JSONWriter()
        writer.objectStart()
        writer.key("error")
        writer.objectStart()
        writer.field("code", code)
        writer.field("message", message)
        writer.objectEnd()
        writer.objectEnd()
        var all = headers
        if let retryAfterSeconds { all["Retry-After"] = String(retryAfterSeconds) }
        return HTTPResponse(status: status, headers: all, body: writer.bytes)
    }
}

/// Answers requests. Called on a task, never on the HTTP library's threads.
public protocol HTTPHandler: Sendable {
    func handle(_ request: HTTPRequest) async -> HTTPResponse
    /// An answer that needs no waiting (health checks), given on the HTTP thread itself; `nil`
    /// sends the request on.
    func immediateResponse(to request: HTTPRequest) -> HTTPResponse?
    /// Takes the request without a task of its own: returns `true` and later calls `respond`
    /// exactly once (from any thread), or returns `false` to have `handle` run on a task. Called
    /// on the HTTP thread: it must not block.
    func start(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) -> Bool
}

extension HTTPHandler {
    public func immediateResponse(to request: HTTPRequest) -> HTTPResponse? { nil }
    public func start(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) -> Bool { false }
}
