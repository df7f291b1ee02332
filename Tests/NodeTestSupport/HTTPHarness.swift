import NodeAPI
import NodeHTTP
import Persistence
import TestSupport
import WritePath

/// A node's HTTP API on a free port over a write path on the test servers.
package struct HTTPHarness {
    package static let apiToken = "test-api-token-0123456789"
    package static let adminToken = "test-admin-token-0123456789"

    package let writePath: WritePathHarness
    package let server: HTTPServer
    package let api: CounterAPI
    /// The API's request tasks, running.
    package let requests: RunningServices
    package var port: Int { server.port }
    package var posts: [Int64] { writePath.posts }

    package static func start(
        posts: Int = 3, redis target: RedisTarget = .single, postgresURL: String = TestEnvironment.postgresURL,
        redisURL: String? = nil,
        configure: (inout HTTPServerConfiguration) -> Void = { _ in },
        writePath configureWritePath: (inout WritePathConfiguration) -> Void = { _ in },
        readyMaxLag: Duration? = nil, users: UserAccess? = nil
    ) async throws -> HTTPHarness {
        let writePath = try await WritePathHarness.start(
            posts: posts, postgresURL: postgresURL, redis: target, redisURL: redisURL,
            configure: configureWritePath)
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configure(&configuration)
        let storage = NodeStorage(postgres: writePath.pool, redis: writePath.redis, layout: writePath.layout)
        let api = try CounterAPI(
            service: writePath.service, tokens: AccessTokens(api: apiToken, admin: adminToken),
            storage: storage, readyMaxLag: readyMaxLag, users: users)
        let requests = try await RunningServices.start([api])
        let server = try HTTPServer(configuration: configuration, handler: api)
        try server.start()
        return HTTPHarness(writePath: writePath, server: server, api: api, requests: requests)
    }

    /// Sends one request on its own connection and returns the response.
    package func send(
        _ method: String, _ path: String, token: String? = HTTPHarness.apiToken, body: String? = nil,
        headers: [String: String] = [:]
    ) async throws -> RawHTTPResponse {
        let request = RawHTTPClient.request(method, path, token: token, body: body, headers: headers)
        let responses = try await RawHTTPClient.exchange(port: port, chunks: [request], responses: 1)
        guard let response = responses.first else { throw PrivateServersError(message: "no response to \(method) \(path)") }
        return response
    }

    /// The node's count of requests that came over HTTP/2 (`/metrics`); -1 when it has none.
    package func requestsOverHTTP2() async throws -> Int {
        let metrics = try await send("GET", "/metrics", token: HTTPHarness.adminToken).text
        let line = metrics.split(separator: "\n").first { $0.hasPrefix(#"counter_http_protocol_requests_total{protocol="HTTP/2"}"#) }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? -1
    }

    /// Stops as a node does: the server, the write path, then the API's request tasks (which
    /// the write path has answered by then).
    package func stop() async {
        await server.stop()
        await writePath.stop()
        try? await requests.stop()
    }
}
