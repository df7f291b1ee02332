import NodeHTTP
import Synchronization

/// `POST /v1/cluster/forwarded`: requests another node forwarded here together, in one batch
/// (`PeerBatch`), each answered as if it had come alone — through the whole API, its own
/// credentials, limits and forwarding mark — and the answers sent back together, in order.
///
/// The route adds no power: a batch's requests are the requests a caller could send one by one.
/// What it saves is the HTTP exchange per request between the nodes (a forward cost more CPU
/// than the toggle it carried).
enum ForwardedBatches {
    /// The route's path, which the forwarding client posts its batches to.
    static let path = "/v1/cluster/forwarded"

    /// Answers every request of the batch in `request`'s body.
    static func answer(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        let requests: [HTTPRequest]
        switch PeerBatch.requests(from: request.body) {
        case .success(let read): requests = read
        case .failure(let malformed):
            return .error(.invalidArgument, message: "the body is not a batch of forwarded requests: \(malformed.reason)")
        }
        if let nested = requests.firstIndex(where: { $0.path == path }) {
            return .error(.invalidArgument, message: "request \(nested) of the batch is itself a batch")
        }
        let answers = await answers(to: requests, api: api)
        return HTTPResponse(status: 200, contentType: PeerBatch.contentType, body: PeerBatch.body(of: answers))
    }

    /// Each request's answer, in order: all of them handed to the API at once, as the HTTP
    /// thread hands requests that arrive together (a like to its shard, the rest to tasks).
    private static func answers(to requests: [HTTPRequest], api: CounterAPI) async -> [PeerBatch.Answer] {
        guard !requests.isEmpty else { return [] }
        let responses = await withCheckedContinuation { (continuation: CheckedContinuation<[HTTPResponse], Never>) in
            let gathered = Gathered(count: requests.count, continuation: continuation)
            for (index, request) in requests.enumerated() {
                switch api.dispatch(request) {
                case .respond(let response): gathered.set(index, response)
                case .later(let start): start { gathered.set(index, $0) }
                }
            }
        }
        return responses.map { response in
            var headers: [(name: String, value: String)] = [("Content-Type", response.contentType)]
            for (name, value) in response.headers.sorted(by: { $0.key < $1.key }) { headers.append((name, value)) }
            return PeerBatch.Answer(status: response.status, headers: headers, body: response.body)
        }
    }

    /// The answers as they come, from any thread; the last one resumes the batch.
    private final class Gathered: Sendable {
        private let state: Mutex<(responses: [HTTPResponse?], missing: Int)>
        private let continuation: CheckedContinuation<[HTTPResponse], Never>

        init(count: Int, continuation: CheckedContinuation<[HTTPResponse], Never>) {
            state = Mutex((Array(repeating: nil, count: count), count))
            self.continuation = continuation
        }

        func set(_ index: Int, _ response: HTTPResponse) {
            let done = state.withLock { state -> [HTTPResponse]? in
                guard state.responses[index] == nil else { return nil }
                state.responses[index] = response
                state.missing -= 1
                return state.missing == 0 ? state.responses.map { $0! } : nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }
}
