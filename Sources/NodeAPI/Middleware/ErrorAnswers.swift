import CounterCore
import NodeHTTP
import WritePath

/// The step around each handler: what it throws, as the API answers it — the write path's
/// refusals by their codes, a request the API cannot use `400`/`403`, anything else (a failure of
/// the node's own) `503 unavailable` with a stable message, the detail logged (`FailureLog`).
struct ErrorAnswers: Sendable {
    let failures: FailureLog

    /// `error`, thrown by the handler of the route labelled `route`, as the answer.
    func answer(_ error: any Error, route: String) -> HTTPResponse {
        switch error {
        case let error as CounterError: return .error(for: error)
        case let error as RequestError: return .error(error.code, message: error.message)
        default: return unavailable(route, error)
        }
    }

    /// The answer to a request that failed for a reason of the node's own (a server error that
    /// is not a `CounterError`): a stable message for the client, the detail for the log.
    func unavailable(_ route: String, _ error: any Error) -> HTTPResponse {
        failures.note(route: route, error: error)
        return .error(.unavailable, message: "the node could not complete the request; retry (the node's log says why)", retryAfterSeconds: 1)
    }

    /// The transport's own refusals, in the API's error format.
    static func refusal(_ refusal: HTTPRefusal) -> HTTPResponse {
        switch refusal {
        case .shuttingDown:
            return .error(.shuttingDown, message: "the node is shutting down", retryAfterSeconds: 1)
        case .bodyTooLarge(let limit):
            return .error(.bodyTooLarge, message: "the request body exceeds \(limit) bytes")
        case .headersTooLarge(let limit):
            return .error(.headersTooLarge, message: "the request line and headers exceed \(limit) bytes")
        case .malformed(let why):
            return .error(.badRequest, message: why)
        }
    }
}
