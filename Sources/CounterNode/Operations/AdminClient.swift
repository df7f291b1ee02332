import CounterClient
import Foundation

/// The operator subcommands' view of a running node's admin API: `CounterServiceClient` for the
/// calls, with its failures sorted into what the commands report (and exit with).
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

    /// An answer: parsed, and as the node sent it (what `--json` prints).
    struct Answer: Sendable {
        let json: JSONValue
        let text: String
    }

    let client: CounterServiceClient

    /// - Parameter timeoutSeconds: how long one call may take.
    init(baseURL: String, token: String?, timeoutSeconds: Double) throws(Failure) {
        guard let url = URL(string: baseURL) else { throw .unreachable("\(baseURL) is not a URL") }
        var configuration = CounterServiceClient.Configuration(baseURL: url, adminToken: token)
        configuration.timeoutSeconds = timeoutSeconds
        configuration.retry = .never
        client = CounterServiceClient(configuration: configuration)
    }

    /// `GET path` (with `query`), the answer's JSON.
    func get(_ path: String, query: [(String, String)] = []) async throws(Failure) -> Answer {
        try await send("GET", path, query: query, body: nil)
    }

    /// `POST path` with `body` (JSON), the answer's JSON.
    func post(_ path: String, query: [(String, String)] = [], body: [UInt8]? = nil) async throws(Failure) -> Answer {
        try await send("POST", path, query: query, body: body)
    }

    private func send(_ method: String, _ path: String, query: [(String, String)], body: [UInt8]?) async throws(Failure) -> Answer {
        let data: Data
        do {
            data = try await client.adminRequest(method, path, query: query, body: body.map { Data($0) })
        } catch {
            throw Self.failure(error, method: method, path: path, node: client.configuration.baseURL)
        }
        guard let json = try? JSONParser.parse(Array(data)) else {
            throw .invalidAnswer("\(method) \(path) answered with a body that is not JSON")
        }
        return Answer(json: json, text: String(decoding: data, as: UTF8.self))
    }

    static func failure(_ error: CounterClientError, method: String, path: String, node: URL) -> Failure {
        switch error {
        case .server(401, _, let message, _): return .unauthorized(message)
        case .server(let status, let code, let message, _): return .refused(status: status, code: code, message: message)
        case .connection(let message, false): return .unreachable("no node answered at \(node.absoluteString): \(message)")
        case .connection(let message, true): return .invalidAnswer("\(method) \(path): the connection broke (\(message)); its effect is unknown")
        case .timedOut(let seconds): return .timedOut("\(method) \(path) got no answer within \(Int(seconds.rounded())) s")
        case .invalidResponse(let why), .invalidArgument(let why): return .invalidAnswer(why)
        }
    }
}
