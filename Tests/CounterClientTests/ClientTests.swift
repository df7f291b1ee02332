import CounterClient
import Foundation
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Canned answers in place of the network, for the client's own logic: paths, tokens, decoding,
/// error mapping, retries. (The client against a real node is tested in CounterNodeTests.)
final class CannedTransport: HTTPTransport {
    struct Answer: Sendable {
        var status: Int
        var body: String
        var headers: [String: String] = [:]
    }
    private let answers: Mutex<[Answer]>
    private let requests = Mutex<[URLRequest]>([])
    /// One arrival per request sent, to wait on.
    let sends = Arrivals()

    init(_ answers: [Answer]) { self.answers = Mutex(answers) }

    var sent: [URLRequest] { requests.withLock { $0 } }

    func send(_ request: URLRequest) async throws(CounterClientError) -> (Data, HTTPURLResponse) {
        requests.withLock { $0.append(request) }
        sends.arrive()
        guard let answer = answers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else {
            throw .connection(message: "connection reset", requestMayHaveSucceeded: true)
        }
        let response = HTTPURLResponse(url: request.url!, statusCode: answer.status, httpVersion: "HTTP/1.1", headerFields: answer.headers)!
        return (Data(answer.body.utf8), response)
    }
}

@Suite("Client logic")
struct ClientTests {
    static func client(_ transport: CannedTransport, retry: RetryPolicy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(1)))
        -> CounterServiceClient
    {
        var configuration = CounterServiceClient.Configuration(
            baseURL: URL(string: "http://127.0.0.1:9")!, apiToken: "api-token-0123456789",
            adminToken: "admin-token-0123456789")
        configuration.retry = retry
        return CounterServiceClient(configuration: configuration, transport: transport)
    }

    static let liked = #"{"post_id":1,"user_id":7,"is_liked":true,"likes_count":124}"#

    @Test("like sends PUT with the bearer token and decodes the answer")
    func like() async throws {
        let transport = CannedTransport([.init(status: 200, body: Self.liked)])
        let status = try await Self.client(transport).like(post: 1, user: 7)
        #expect(status == LikeStatus(postID: 1, userID: 7, isLiked: true, likesCount: 124))
        #expect(transport.sent.first?.httpMethod == "PUT")
        #expect(transport.sent.first?.url?.path == "/v1/posts/1/likes/7")
        #expect(transport.sent.first?.value(forHTTPHeaderField: "Authorization") == "Bearer api-token-0123456789")
    }

    @Test("idempotent calls retry 503 (after Retry-After) and connection failures; the server's code and message are kept")
    func retries() async throws {
        let transport = CannedTransport([
            .init(status: 503, body: #"{"error":{"code":"backlog_full","message":"later"}}"#, headers: ["Retry-After": "0"]),
            .init(status: 200, body: Self.liked),
        ])
        _ = try await Self.client(transport).unlike(post: 1, user: 7)
        #expect(transport.sent.count == 2)

        let failing = CannedTransport(
            Array(
                repeating: .init(status: 503, body: #"{"error":{"code":"backlog_full","message":"later"}}"#, headers: ["Retry-After": "0"]), count: 5)
        )
        await #expect(throws: CounterClientError.server(status: 503, code: "backlog_full", message: "later", retryAfterSeconds: 0)) {
            try await Self.client(failing).status(post: 1, user: 7)
        }
        #expect(failing.sent.count == 3)

        let reset = CannedTransport([]) // every attempt: connection reset
        await #expect(throws: CounterClientError.connection(message: "connection reset", requestMayHaveSucceeded: true)) {
            try await Self.client(reset).count(post: 1)
        }
        #expect(reset.sent.count == 3)
    }

    @Test("toggle is never retried; a 404 is not retried either")
    func noRetry() async {
        let busy = CannedTransport([.init(status: 503, body: #"{"error":{"code":"backlog_full","message":"later"}}"#, headers: ["Retry-After": "0"])])
        await #expect(throws: CounterClientError.self) { try await Self.client(busy).toggle(post: 1, user: 7) }
        #expect(busy.sent.count == 1)
        let missing = CannedTransport([.init(status: 404, body: #"{"error":{"code":"post_not_found","message":"post 1 does not exist"}}"#)])
        do {
            _ = try await Self.client(missing).like(post: 1, user: 7)
            Issue.record("expected a failure")
        } catch {
            #expect(error.serverCode == "post_not_found")
            #expect(!error.isRetryable)
        }
        #expect(missing.sent.count == 1)
    }

    @Test("a cancelled caller gets its failure at once, without retries")
    func cancelledCaller() async {
        let reset = CannedTransport([]) // every attempt: connection reset
        let client = Self.client(reset, retry: RetryPolicy(maximumAttempts: 5, initialDelay: .milliseconds(200)))
        let task = Task { try await client.status(post: 1, user: 7) }
        task.cancel()
        await #expect(throws: CounterClientError.self) { try await task.value }
        #expect(reset.sent.count <= 1)
    }

    @Test("a caller cancelled while the client waits to retry gets its failure at once, and nothing more is sent")
    func cancelledWhileWaiting() async {
        let reset = CannedTransport([]) // every attempt: connection reset
        let client = Self.client(reset, retry: RetryPolicy(maximumAttempts: 5, initialDelay: .seconds(60)))
        let task = Task { try await client.status(post: 1, user: 7) }
        // Waits for the first attempt (at most 30 s: the assertions below then fail, not hang).
        await reset.sends.waitFor(1)
        task.cancel() // the first attempt failed: the client waits (a minute) to retry, or is about to
        await #expect(throws: CounterClientError.self) { try await task.value }
        #expect(reset.sent.count == 1)
    }

    @Test("bad arguments fail before anything is sent")
    func invalidArguments() async {
        let transport = CannedTransport([])
        let client = Self.client(transport)
        await #expect(throws: CounterClientError.self) { try await client.like(post: 0, user: 7) }
        await #expect(throws: CounterClientError.self) { try await client.feed(posts: [], user: 7) }
        await #expect(throws: CounterClientError.self) { try await client.feed(posts: Array(1...1_001), user: 7) }
        await #expect(throws: CounterClientError.self) { try await client.feed(posts: [1], user: -1) }
        #expect(transport.sent.isEmpty)
    }

    @Test("an answer that is not the expected JSON is an invalidResponse")
    func unreadable() async {
        let transport = CannedTransport([.init(status: 200, body: "<html>")])
        do {
            _ = try await Self.client(transport, retry: .never).like(post: 1, user: 7)
            Issue.record("expected a failure")
        } catch {
            guard case .invalidResponse = error else {
                Issue.record("\(error)")
                return
            }
        }
    }
}

@Suite("Client routing across several nodes")
struct ClientRoutingTests {
    static let liked = ClientTests.liked

    @Test("a 421 (the node did nothing) is followed once to the owner it names, even for a toggle")
    func followsMisdirected() async throws {
        let transport = CannedTransport([
            .init(
                status: 421, body: #"{"error":{"code":"not_owner","message":"slot 5 is owned by b"}}"#,
                headers: ["Counter-Owner": "http://10.0.0.2:8080"]),
            .init(status: 200, body: Self.liked),
        ])
        let status = try await ClientTests.client(transport).toggle(post: 1, user: 7)
        #expect(status.isLiked)
        #expect(
            transport.sent.map { $0.url?.absoluteString } == [
                "http://127.0.0.1:9/v1/posts/1/likes/7/toggle", "http://10.0.0.2:8080/v1/posts/1/likes/7/toggle",
            ])

        let twice = CannedTransport(
            Array(
                repeating: .init(
                    status: 421, body: #"{"error":{"code":"not_owner","message":"moved"}}"#,
                    headers: ["Counter-Owner": "http://10.0.0.3:8080"]), count: 3))
        await #expect(throws: CounterClientError.self) { try await ClientTests.client(twice).toggle(post: 1, user: 7) }
        #expect(twice.sent.count == 2, "followed once, not in a loop")
    }

    @Test("a slot-aware client reads the map once and sends each post's calls to its slot's owner")
    func slotAware() async throws {
        // Post 1's slot is 9842 (CRC-16 of "1"), post 2's 5649: b owns the upper half, a the lower.
        let map =
            #"{"version":9,"answered_by":"a","nodes":[{"id":"a","url":"http://10.0.0.1:8080","incarnation":1,"live":true,"draining":false,"lease_remaining_ms":2000,"owned_slots":8192,"slots":[[0,8191]],"lowest_epoch":1,"highest_epoch":5},{"id":"b","url":"http://10.0.0.2:8080","incarnation":2,"live":true,"draining":false,"lease_remaining_ms":2000,"owned_slots":8192,"slots":[[8192,16383]],"lowest_epoch":6,"highest_epoch":9}],"moves_pending":0}"#
        let transport = CannedTransport([
            .init(status: 200, body: map),
            .init(status: 200, body: Self.liked),
            .init(status: 200, body: #"{"post_id":2,"user_id":7,"is_liked":true,"likes_count":1}"#),
        ])
        var configuration = CounterServiceClient.Configuration(baseURL: URL(string: "http://127.0.0.1:9")!, apiToken: "api-token-0123456789")
        configuration.slotAware = true
        let client = CounterServiceClient(configuration: configuration, transport: transport)
        _ = try await client.like(post: 1, user: 7)
        _ = try await client.like(post: 2, user: 7)
        #expect(
            transport.sent.map { $0.url?.absoluteString } == [
                "http://127.0.0.1:9/v1/cluster", "http://10.0.0.2:8080/v1/posts/1/likes/7", "http://10.0.0.1:8080/v1/posts/2/likes/7",
            ])
    }
}
