import NodeAPI
import NodeHTTP
import Persistence
import TestSupport
import WritePath

/// A node's API over a write path on the test servers, called in process: each request goes
/// through `CounterAPI.dispatch` — the route table, the middleware, the handler — as the HTTP
/// server hands it over, and back, without a socket.
package struct InProcessAPI {
    package let writePath: WritePathHarness
    package let api: CounterAPI
    /// The API's request tasks, running.
    package let requests: RunningServices
    package var posts: [Int64] { writePath.posts }

    package static func start(
        posts: Int = 3, tokens: AccessTokens = AccessTokens(api: HTTPHarness.apiToken, admin: HTTPHarness.adminToken),
        users: UserAccess? = nil, postgresURL: String = TestEnvironment.postgresURL,
        configure: (inout WritePathConfiguration) -> Void = { _ in }
    ) async throws -> InProcessAPI {
        let writePath = try await WritePathHarness.start(posts: posts, postgresURL: postgresURL, configure: configure)
        let storage = NodeStorage(postgres: writePath.pool, redis: writePath.redis, layout: writePath.layout)
        let api = try CounterAPI(service: writePath.service, tokens: tokens, storage: storage, users: users)
        let requests = try await RunningServices.start([api])
        return InProcessAPI(writePath: writePath, api: api, requests: requests)
    }

    /// `target` (`/path?name=value&…`, as sent) answered by the API.
    package func send(
        _ method: String, _ target: String, token: String? = HTTPHarness.apiToken, body: String? = nil,
        headers: [String: String] = [:]
    ) async -> HTTPResponse {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let rawQuery = parts.count > 1 ? String(parts[1]) : ""
        var query: [String: String] = [:]
        for pair in rawQuery.split(separator: "&") {
            let nameValue = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            query[String(nameValue[0])] = nameValue.count > 1 ? String(nameValue[1]) : ""
        }
        let request = HTTPRequest(
            method: method, path: String(parts[0]), query: query, rawQuery: rawQuery,
            authorization: token.map { "Bearer \($0)" }, headers: headers, body: Array((body ?? "").utf8))
        return await api.answer(request)
    }

    /// Stops as a node does: the write path, then the API's request tasks.
    package func stop() async {
        await writePath.stop()
        try? await requests.stop()
    }
}

extension CounterAPI {
    /// `request` answered as the HTTP server has it answered: at once, or later from any thread.
    package func answer(_ request: HTTPRequest) async -> HTTPResponse {
        switch dispatch(request) {
        case .respond(let response):
            return response
        case .later(let start):
            return await withCheckedContinuation { continuation in
                start { continuation.resume(returning: $0) }
            }
        }
    }
}
