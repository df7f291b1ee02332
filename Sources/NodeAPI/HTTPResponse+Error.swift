import NodeHTTP
import WritePath

extension HTTPResponse {
    /// The service's error format (`ErrorBody`): `{"error":{"code":"…","message":"…"}}`, with
    /// the code's status.
    static func error(_ code: ErrorCode, message: String, retryAfterSeconds: Int? = nil, headers: [String: String] = [:]) -> HTTPResponse {
        var all = headers
        if let retryAfterSeconds { all["Retry-After"] = String(retryAfterSeconds) }
        return HTTPResponse(status: code.status, headers: all, body: HotAnswers.error(code: code.rawValue, message: message))
    }

    /// The answer to an operation the write path refused.
    static func error(for error: CounterError) -> HTTPResponse {
        switch error.code {
        case .unknownPost: return .error(.postNotFound, message: error.message)
        case .invalidArgument: return .error(.invalidArgument, message: error.message)
        case .unknownKind: return .error(.unknownKind, message: error.message)
        case .tooManyKinds: return .error(.tooManyKinds, message: error.message)
        case .backlogFull: return .error(.backlogFull, message: error.message, retryAfterSeconds: error.retryAfterSeconds ?? 1)
        case .overloaded: return .error(.overloaded, message: error.message, retryAfterSeconds: error.retryAfterSeconds ?? 1)
        case .shuttingDown: return .error(.shuttingDown, message: error.message, retryAfterSeconds: 1)
        case .slotMoving: return .error(.slotMoving, message: error.message, retryAfterSeconds: error.retryAfterSeconds ?? 1)
        case .notOwner: return .error(.noOwner, message: error.message, retryAfterSeconds: 1)
        case .notReplicated: return .error(.notReplicated, message: error.message, retryAfterSeconds: 1)
        default: return .error(.unavailable, message: error.message, retryAfterSeconds: error.retryAfterSeconds ?? 1)
        }
    }
}
