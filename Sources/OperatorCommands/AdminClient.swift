import CounterClient
import Foundation

/// The operator subcommands' view of a running node's admin API: `CounterServiceClient`'s typed
/// calls, with their failures sorted into what the commands report (and exit with).
struct AdminClient: Sendable {
    /// Why a call did not give an answer the command can use.
    enum Failure: Error, Sendable, Equatable {
        /// No node answered at the address (connection refused, name not found).
        case unreachable(String)
        /// The node refused the admin token (401).
        case unauthorized(String)
        /// The node answered with an error (`status`, its error code and message).
        case refused(status: Int, code: String, message: String)
        /// The answer was not the JSON the command expects, or the connection broke mid-call.
        case invalidAnswer(String)
        /// The node took longer than the timeout to answer.
        case timedOut(String)
    }

    let client: CounterServiceClient

    /// - Parameter timeout: how long one call may take.
    init(baseURL: String, token: String?, timeout: Duration) throws(Failure) {
        guard let url = URL(string: baseURL) else { throw .unreachable("\(baseURL) is not a URL") }
        var configuration = CounterServiceClient.Configuration(baseURL: url, adminToken: token)
        configuration.timeout = timeout
        configuration.retry = .never
        client = CounterServiceClient(configuration: configuration)
    }

    /// Runs one client call; `what` (`"POST /admin/flush"`) names it in failures.
    func call<Answer>(_ what: String, _ body: (CounterServiceClient) async throws(CounterClientError) -> Answer) async throws(Failure) -> Answer {
        do {
            return try await body(client)
        } catch {
            throw Self.failure(error, call: what, node: client.configuration.baseURL)
        }
    }

    static func failure(_ error: CounterClientError, call: String, node: URL) -> Failure {
        switch error {
        case .server(401, _, let message, _): return .unauthorized(message)
        case .server(let status, let code, let message, _): return .refused(status: status, code: code, message: message)
        case .connection(let message, false): return .unreachable("no node answered at \(node.absoluteString): \(message)")
        case .connection(let message, true): return .invalidAnswer("\(call): the connection broke (\(message)); its effect is unknown")
        case .timedOut(let seconds): return .timedOut("\(call) got no answer within \(Int(seconds.rounded())) s")
        case .invalidResponse(let why), .invalidArgument(let why): return .invalidAnswer(why)
        case .unauthenticated(let why): return .unauthorized(why)
        }
    }
}
