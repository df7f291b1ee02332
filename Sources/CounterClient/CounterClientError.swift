import Foundation

/// Why a call to CounterService failed. Server errors keep the service's own error code and
/// message (`{"error":{"code":…,"message":…}}`).
public enum CounterClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The service answered with an error status.
    /// - Parameters:
    ///   - status: the HTTP status (`400`, `401`, `404`, `429`, `503`, …).
    ///   - code: the service's error code (`post_not_found`, `backlog_full`, `unauthorized`, …).
    ///   - message: the service's message, for people.
    ///   - retryAfterSeconds: the `Retry-After` header, when the service sent one.
    case server(status: Int, code: String, message: String, retryAfterSeconds: Double?)
    /// No answer: the connection could not be made or broke. `requestMayHaveSucceeded` is `true`
    /// when the request may have reached the service before the failure (its effect is unknown).
    case connection(message: String, requestMayHaveSucceeded: Bool)
    /// No answer within the timeout; the request may or may not have taken effect.
    case timedOut(seconds: Double)
    /// An answer the client cannot read.
    case invalidResponse(String)
    /// An argument the service would refuse (a non-positive id, an empty feed page, …); nothing
    /// was sent.
    case invalidArgument(String)
    /// The user's token could not be had (`Configuration.userToken` threw); nothing was sent.
    case unauthenticated(String)

    /// Whether trying the same call again later may succeed: `503`, `429`, connection failures
    /// and timeouts. Only idempotent calls are retried automatically.
    public var isRetryable: Bool {
        switch self {
        case .server(let status, _, _, _): return status == 503 || status == 429
        case .connection, .timedOut: return true
        case .invalidResponse, .invalidArgument, .unauthenticated: return false
        }
    }

    /// Whether the call may have taken effect on the service although it failed.
    public var outcomeUnknown: Bool {
        switch self {
        case .connection(_, let mayHave): return mayHave
        case .timedOut: return true
        default: return false
        }
    }

    /// The HTTP status, for `.server`.
    public var status: Int? {
        if case .server(let status, _, _, _) = self { return status }
        return nil
    }

    /// The service's error code, for `.server`.
    public var serverCode: String? {
        if case .server(_, let code, _, _) = self { return code }
        return nil
    }

    public var description: String {
        switch self {
        case .server(let status, let code, let message, _): return "\(status) \(code): \(message)"
        case .connection(let message, _): return "connection failed: \(message)"
        case .timedOut(let seconds): return "no answer within \(seconds) s"
        case .invalidResponse(let why): return "unreadable answer: \(why)"
        case .invalidArgument(let why): return "invalid argument: \(why)"
        case .unauthenticated(let why): return "no user token: \(why)"
        }
    }
}
