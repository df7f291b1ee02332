/// A complete HTTP request as the handlers see it: the HTTP library stays behind `HTTPServer`.
public struct HTTPRequest: Sendable {
    public let method: String
    /// The path without the query string, as sent (not percent-decoded).
    public let path: String
    /// Query arguments as sent (not percent-decoded; `+` stays `+`): `RequestTarget`.
    public let query: [String: String]
    /// The query string as sent, without `?`; empty when there is none.
    public let rawQuery: String
    /// The `Authorization` header, if any.
    public let authorization: String?
    /// The request headers the handler asked for (`HTTPHandler.requestHeaders`), by lower-case
    /// name, as sent.
    public let headers: [String: String]
    public let body: [UInt8]
    /// The protocol the request came over (`.http1` for requests made in the process: the
    /// forwarder's, the tests').
    public let httpProtocol: HTTPProtocol

    public init(
        method: String, path: String, query: [String: String] = [:], rawQuery: String = "", authorization: String? = nil,
        headers: [String: String] = [:], body: [UInt8] = [], httpProtocol: HTTPProtocol = .http1
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.rawQuery = rawQuery
        self.authorization = authorization
        // The server passes lower-case keys already; others (tests, the forwarder) may not.
        self.headers =
            headers.keys.allSatisfy { !$0.contains(where: \.isUppercase) }
            ? headers
            : Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
        self.httpProtocol = httpProtocol
    }
}

/// The protocol a request came over.
public enum HTTPProtocol: String, Sendable, CaseIterable {
    /// HTTP/1.0 or HTTP/1.1.
    case http1 = "HTTP/1.1"
    /// HTTP/2, in cleartext (prior knowledge) or over TLS (ALPN).
    case http2 = "HTTP/2"
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
}

/// What a handler does with a request.
public enum HTTPDisposition: Sendable {
    /// Answer at once, on the HTTP thread (health checks, refusals: nothing to wait for).
    case respond(HTTPResponse)
    /// Answer later: the server suspends the connection and calls the closure with a `respond`
    /// that must be called exactly once, from any thread.
    case later(@Sendable (_ respond: @escaping @Sendable (HTTPResponse) -> Void) -> Void)
}

/// A request the server turns away itself, before or instead of the handler.
public enum HTTPRefusal: Sendable, Equatable {
    /// The server is stopping: the request arrived on a connection still open, or was still
    /// waiting for its answer when the wait ran out.
    case shuttingDown
    /// The body exceeds `HTTPServerConfiguration.maximumBodyBytes` (`limit`).
    case bodyTooLarge(limit: Int)
    /// The request line and headers exceed `HTTPServerConfiguration.maximumHeaderBytes`
    /// (`limit`). Answered 431, and the connection is closed.
    case headersTooLarge(limit: Int)
    /// The request's framing or target is one that intermediaries may read differently from
    /// this server (a request smuggled behind a load balancer): both `Content-Length` and
    /// `Transfer-Encoding`, a transfer coding other than `chunked`, `Content-Length` twice, a
    /// NUL byte in an HTTP/2 `:path`. Answered 400, and the connection is closed. (Whitespace in a
    /// header name and a NUL in an HTTP/1 target never get this far: the engine's parser refuses
    /// them with its own 400.)
    case malformed(String)
}

/// Answers requests.
public protocol HTTPHandler: Sendable {
    /// The request headers, beyond `Authorization`, the handler reads (`HTTPRequest.headers`);
    /// the transport knows none of its own.
    var requestHeaders: [String] { get }
    /// Decides what to do with `request`. Called on the HTTP library's thread: it must not block.
    func dispatch(_ request: HTTPRequest) -> HTTPDisposition
    /// The answer for a request the server turns away itself, in the handler's error format.
    /// Called on any thread; it must not block.
    func response(for refusal: HTTPRefusal) -> HTTPResponse
}

extension HTTPHandler {
    public var requestHeaders: [String] { [] }
}
