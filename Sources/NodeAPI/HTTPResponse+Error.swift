import NodeHTTP

extension HTTPResponse {
    /// The service's error format (`ErrorBody`): `{"error":{"code":"…","message":"…"}}`.
    public static func error(_ status: Int, code: String, message: String, retryAfterSeconds: Int? = nil, headers: [String: String] = [:]) -> HTTPResponse {
        var all = headers
        if let retryAfterSeconds { all["Retry-After"] = String(retryAfterSeconds) }
        return HTTPResponse(status: status, headers: all, body: HotAnswers.error(code: code, message: message))
    }
}
