import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Talks to a running node's admin API for the operator subcommands (`flush`, `inspect`,
/// `stats`, `reconcile`, `dead-letters`), with the admin token as a bearer token.
struct AdminClient: Sendable {
    /// Why a call did not give an answer the command can use.
    enum Failure: Error, Sendable, Equatable {
        /// No node answered at the address (refused, unresolvable, timed out).
        case unreachable(String)
        /// The node refused the admin token (401).
        case unauthorized(String)
        /// The node answered with an error (`status`, its error code and message).
        case refused(status: Int, code: String, message: String)
        /// The answer was not the JSON the command expects.
        case invalidAnswer(String)
        /// The node took longer than the timeout to answer.
        case timedOut(String)
    }

    /// An answer: parsed, and as the node sent it (what `--json` prints).
    struct Answer: Sendable {
        let json: JSONValue
        let text: String
    }

    let baseURL: String
    let token: String?
    let timeoutSeconds: Double

    /// `GET path` (with `query` appended), the answer's JSON.
    func get(_ path: String, query: [(String, String)] = []) async throws(Failure) -> Answer {
        try await send("GET", path, query: query, body: nil)
    }

    /// `POST path` with `body` (JSON), the answer's JSON.
    func post(_ path: String, query: [(String, String)] = [], body: [UInt8]? = nil) async throws(Failure) -> Answer {
        try await send("POST", path, query: query, body: body)
    }

    private func send(_ method: String, _ path: String, query: [(String, String)], body: [UInt8]?) async throws(Failure) -> Answer {
        var components = URLComponents(string: baseURL + path)
        if !query.isEmpty { components?.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        guard let url = components?.url else { throw .unreachable("\(baseURL)\(path) is not a valid URL") }
        var request = URLRequest(url: url, timeoutInterval: timeoutSeconds)
        request.httpMethod = method
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = Data(body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await URLSession.shared.data(for: request)
        } catch let error as URLError where error.code == .timedOut {
            throw .timedOut("\(method) \(path) got no answer within \(Int(timeoutSeconds)) s")
        } catch {
            throw .unreachable("no node answered at \(baseURL): \(error.localizedDescription)")
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let value = try? JSONParser.parse(Array(data))
        guard (200..<300).contains(status) else {
            let code = value?["error"]?["code"]?.string ?? "http_\(status)"
            let message = value?["error"]?["message"]?.string ?? String(decoding: data.prefix(200), as: UTF8.self)
            if status == 401 { throw .unauthorized(message) }
            throw .refused(status: status, code: code, message: message)
        }
        guard let value else {
            throw .invalidAnswer("\(method) \(path) answered \(status) with a body that is not JSON")
        }
        return Answer(json: value, text: String(decoding: data, as: UTF8.self))
    }
}
