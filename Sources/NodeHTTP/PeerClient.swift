import Foundation
import Synchronization

/// An HTTP/1.1 client for one node's requests to the others (forwarding): keep-alive
/// connections to each peer, one request at a time on each, all driven by one epoll thread.
///
/// Why not `URLSession`: on Linux it goes through libcurl and cost about 520 µs of CPU per
/// forwarded request, ten times a request's own cost, and collapsed under a spread load (a
/// round-robin balancer in front of three nodes). Here a request costs a hand-off to the thread,
/// a `send` and a `recv`.
///
/// What it tells apart, because a forwarded toggle must not be sent twice: `.notSent` (nothing
/// of the request can have run: no connection, or the connection failed before the whole
/// request was written) and `.broken` (the request was written but no whole answer came back: it
/// may have run). A kept-alive connection is checked before reuse and dropped after a few
/// seconds idle, well before a peer's idle timeout closes it under a request.
public final class PeerClient: Sendable {
    /// A request to a peer.
    public struct Request: Sendable {
        public var method: String
        /// Path and query, already encoded.
        public var target: String
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]

        public init(method: String, target: String, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
            self.method = method
            self.target = target
            self.headers = headers
            self.body = body
        }
    }

    /// A peer's whole answer; header names in lower case.
    public struct Answer: Sendable, Equatable {
        public let status: Int
        public let headers: [String: String]
        public let body: [UInt8]
    }

    public enum Outcome: Sendable, Equatable {
        case answered(Answer)
        /// Nothing reached the peer's application: safe to send again.
        case notSent(String)
        /// Sent, but no whole answer came back: it may have run.
        case broken(String)
    }

    /// How requests to one peer that are under way together travel together: as one `POST` of
    /// a batch (`PeerBatch`) to `target`, answered by one batch answer — one write, one read
    /// and one HTTP exchange for the peer's server to handle, instead of one per request.
    ///
    /// A request sent with `batchable` goes at once (alone) while fewer than `maximumInFlight`
    /// of this peer's batches are under way; past that it waits for one to come back, and the
    /// requests that waited go together. A peer that answers the batch as a route it does not
    /// have (`404`, `405`, `415`) ran none of it: its requests are sent again one by one, and
    /// so is everything for that peer after.
    public struct Batching: Sendable {
        /// The batch route's path on the peer.
        public var target: String
        /// Headers every batch carries (each request keeps its own as well).
        public var headers: [(name: String, value: String)]
        /// Batches (or lone requests of the batchable kind) under way to one peer at most.
        public var maximumInFlight: Int
        /// Most bytes of requests in one batch: below the peer's body limit.
        public var maximumBytes: Int

        public init(target: String, headers: [(name: String, value: String)] = [], maximumInFlight: Int = 4, maximumBytes: Int = 60 << 10) {
            self.target = target
            self.headers = headers
            self.maximumInFlight = max(1, maximumInFlight)
            self.maximumBytes = maximumBytes
        }
    }

    private let loop: PeerLoop
    private let addresses = Mutex<[String: PeerAddress]>([:])

    /// - Parameters:
    ///   - maximumConnectionsPerPeer: connections opened to one peer at most; further requests
    ///     wait for one to be free.
    ///   - timeout: how long a request may take, waiting for a connection included.
    ///   - idleLimit: how long a kept-alive connection may sit unused before it is closed.
    ///   - batching: how requests sent `batchable` travel together; `nil`: each alone.
    /// - Throws: `HTTPServerError` when the loop's descriptors cannot be made.
    public init(
        maximumConnectionsPerPeer: Int = 128, timeout: Duration = .seconds(10), idleLimit: Duration = .seconds(5),
        batching: Batching? = nil
    ) throws {
        loop = try PeerLoop(
            maximumConnectionsPerPeer: maximumConnectionsPerPeer, timeout: timeout, idleLimit: idleLimit, batching: batching)
    }

    deinit {
        loop.stop()
    }

    /// Requests waiting for a batch to come back before they go (as of the client's last turn).
    public var requestsWaitingToBatch: Int { loop.partsWaiting.load(ordering: .relaxed) }

    /// Returns once at least `count` requests wait for a batch to come back before they go.
    public func waitUntilRequestsWaitingToBatch(atLeast count: Int) async {
        await loop.waitUntilPartsWaiting(atLeast: count)
    }

    /// Sends `request` to the node at `baseURL` (`http://host:port`) and waits for its answer.
    /// `batchable`: it may travel in a batch with others (`Batching`; the client must have one).
    /// A batch is whole or nothing on the wire, as a request is: its requests are `.notSent` or
    /// `.broken` together.
    public func send(_ request: Request, to baseURL: String, batchable: Bool = false) async -> Outcome {
        let address: PeerAddress
        if let known = addresses.withLock({ $0[baseURL] }) {
            address = known
        } else {
            do {
                address = try PeerAddress.resolve(baseURL)
            } catch {
                return .notSent(error.message)
            }
            addresses.withLock { $0[baseURL] = address }
        }
        let bytes = Self.encode(request, authority: address.authority)
        let part = batchable ? PeerBatch.part(of: request) : nil
        let outcome = await withCheckedContinuation { continuation in
            loop.submit(PeerLoop.Job(key: baseURL, address: address, bytes: bytes, part: part, continuation: continuation))
        }
        // A peer that cannot be reached may have moved (a restarted pod has a new address).
        if case .notSent = outcome { addresses.withLock { _ = $0.removeValue(forKey: baseURL) } }
        return outcome
    }

    /// The request's bytes on the wire.
    static func encode(_ request: Request, authority: String) -> [UInt8] {
        var head = "\(request.method) \(request.target) HTTP/1.1\r\nHost: \(authority)\r\n"
        for (name, value) in request.headers { head += "\(name): \(value)\r\n" }
        if !request.body.isEmpty || request.method != "GET" { head += "Content-Length: \(request.body.count)\r\n" }
        head += "\r\n"
        var bytes = Array(head.utf8)
        bytes.append(contentsOf: request.body)
        return bytes
    }
}
