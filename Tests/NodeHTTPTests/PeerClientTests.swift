import Foundation
import Synchronization
import Testing

@testable import NodeHTTP

/// A TCP server on loopback that reads whole requests and behaves as told, counting connections
/// and requests: the peer the forwarding client talks to, with the faults it must tell apart.
final class ScriptedPeer: Sendable {
    enum Behaviour: Sendable {
        /// Answers 200 with the request's target as the body, and keeps the connection.
        case answer
        /// Answers, then closes the connection without saying so (an idle timeout, say).
        case answerThenClose
        /// Answers with `Connection: close`, then closes the connection.
        case answerSayingClose
        /// Reads the request and closes the connection without answering.
        case closeAfterRequest
        /// Reads the request and never answers.
        case silent
    }

    let port: Int
    private let listener: Int32
    private let behaviour: Behaviour
    private let counts = Mutex<(connections: Int, requests: Int, perConnection: [Int: Int], closed: Int)>((0, 0, [:], 0))

    var connections: Int { counts.withLock { $0.connections } }
    /// Connections that carried a request and that this peer has closed since: after its
    /// behaviour ended them, or once the client closed its end (its end of file read).
    var closedConnections: Int { counts.withLock { $0.closed } }
    var requests: Int { counts.withLock { $0.requests } }
    /// How many requests each connection that carried any carried, in the order they were accepted
    /// (a connection that never sent a request, such as another test's probe of a port it thinks
    /// free, is not among them).
    var requestsPerConnection: [Int] { counts.withLock { $0.perConnection.sorted { $0.key < $1.key }.map(\.value) } }

    init(_ behaviour: Behaviour) throws {
        self.behaviour = behaviour
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Bool in
                bind(descriptor, raw, length) == 0 && listen(descriptor, 512) == 0 && getsockname(descriptor, raw, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            throw HTTPServerError(message: "cannot listen")
        }
        listener = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            let number = counts.withLock {
                $0.connections += 1
                return $0.connections
            }
            let thread = Thread { [self] in serve(connection, number: number) }
            thread.start()
        }
    }

    private func serve(_ connection: Int32, number: Int) {
        defer {
            close(connection)
            counts.withLock { if $0.perConnection[number] != nil { $0.closed += 1 } }
        }
        var input: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            // One whole request: the head, then Content-Length bytes.
            while true {
                if let end = Self.requestEnd(input) {
                    let head = String(decoding: input[0..<end], as: UTF8.self)
                    let target = head.split(separator: " ").dropFirst().first.map(String.init) ?? ""
                    input.removeFirst(end)
                    counts.withLock {
                        $0.requests += 1
                        $0.perConnection[number, default: 0] += 1
                    }
                    switch behaviour {
                    case .answer, .answerThenClose, .answerSayingClose:
                        let closing = if case .answerSayingClose = behaviour { "Connection: close\r\n" } else { "" }
                        let answer =
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nRetry-After: 1\r\n\(closing)Content-Length: \(target.utf8.count)\r\n\r\n\(target)"
                        _ = answer.withCString { send(connection, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
                        guard case .answer = behaviour else { return }
                    case .closeAfterRequest:
                        return
                    case .silent:
                        Thread.sleep(forTimeInterval: 5)
                        return
                    }
                    break
                }
                let count = recv(connection, &buffer, buffer.count, 0)
                guard count > 0 else { return }
                input.append(contentsOf: buffer[0..<count])
            }
        }
    }

    private static func requestEnd(_ bytes: [UInt8]) -> Int? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let range = text.range(of: "\r\n\r\n") else { return nil }
        let headLength = text.utf8.distance(from: text.startIndex, to: range.upperBound)
        var bodyLength = 0
        for line in text[..<range.lowerBound].split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
            bodyLength = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        return bytes.count >= headLength + bodyLength ? headLength + bodyLength : nil
    }
}

@Suite("Peer client (forwarding transport) against real sockets")
struct PeerClientTests {
    static func request(_ target: String, method: String = "POST", body: [UInt8] = []) -> PeerClient.Request {
        PeerClient.Request(method: method, target: target, headers: [("Counter-Forwarded-By", "test")], body: body)
    }

    /// Waits (up to 30 s) until `condition` holds; whether it does.
    static func waitUntil(_ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        return condition()
    }

    @Test("sequential requests share one kept-alive connection; status, headers (lower-case names) and body come back")
    func keepAlive() async throws {
        let peer = try ScriptedPeer(.answer)
        defer { peer.stop() }
        // An idle limit no stall of a busy test machine reaches between two requests: this test is
        // about reuse; the limit has its own test.
        let client = try PeerClient(idleLimit: .seconds(600))
        for index in 0..<50 {
            let outcome = await client.send(
                Self.request("/v1/posts/\(index)/likes/7/toggle", body: Array("{}".utf8)), to: "http://127.0.0.1:\(peer.port)")
            guard case .answered(let answer) = outcome else {
                Issue.record("request \(index): \(outcome)")
                return
            }
            #expect(answer.status == 200)
            #expect(String(decoding: answer.body, as: UTF8.self) == "/v1/posts/\(index)/likes/7/toggle")
            #expect(answer.headers["retry-after"] == "1")
            #expect(answer.headers["content-type"] == "application/json")
        }
        #expect(peer.connections == 1)
        #expect(peer.requests == 50)
    }

    @Test("a kept connection idle past the idle limit is closed by the client; the next request opens a new one")
    func idleLimit() async throws {
        let peer = try ScriptedPeer(.answer)
        defer { peer.stop() }
        let client = try PeerClient(idleLimit: .milliseconds(100))
        guard case .answered = await client.send(Self.request("/first", method: "GET"), to: "http://127.0.0.1:\(peer.port)") else {
            Issue.record("the first request was not answered")
            return
        }
        // The client closes the idle connection (the peer reads its end of file), however long a
        // busy machine takes to get to it.
        #expect(try await Self.waitUntil { peer.closedConnections == 1 }, "the idle connection was not closed")
        guard case .answered(let answer) = await client.send(Self.request("/second", method: "GET"), to: "http://127.0.0.1:\(peer.port)") else {
            Issue.record("the second request was not answered")
            return
        }
        #expect(String(decoding: answer.body, as: UTF8.self) == "/second")
        #expect(peer.connections == 2)
        #expect(peer.requests == 2)
    }

    @Test("more concurrent requests than connections allowed: they wait for a free one and all are answered")
    func queueing() async throws {
        let peer = try ScriptedPeer(.answer)
        defer { peer.stop() }
        let client = try PeerClient(maximumConnectionsPerPeer: 4)
        let answered = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<200 {
                group.addTask {
                    if case .answered(let answer) = await client.send(Self.request("/\(index)", method: "GET"), to: "http://127.0.0.1:\(peer.port)") {
                        return String(decoding: answer.body, as: UTF8.self) == "/\(index)"
                    }
                    return false
                }
            }
            var count = 0
            for await ok in group where ok { count += 1 }
            return count
        }
        #expect(answered == 200)
        #expect(peer.connections <= 4)
    }

    @Test(
        "64 callers sending back to back, 6,400 requests: every one answered (a lost wake-up of the client's thread once left requests waiting forever)"
    )
    func manyCallers() async throws {
        let peer = try ScriptedPeer(.answer)
        defer { peer.stop() }
        let client = try PeerClient(timeout: .seconds(30))
        let answered = await withTaskGroup(of: Int.self) { group in
            for worker in 0..<64 {
                group.addTask {
                    var answered = 0
                    for index in 0..<100 {
                        let outcome = await client.send(Self.request("/\(worker)/\(index)"), to: "http://127.0.0.1:\(peer.port)")
                        if case .answered(let answer) = outcome, String(decoding: answer.body, as: UTF8.self) == "/\(worker)/\(index)" {
                            answered += 1
                        }
                    }
                    return answered
                }
            }
            var total = 0
            for await count in group { total += count }
            return total
        }
        #expect(answered == 64 * 100)
    }

    @Test("one connection allowed and the peer closes it after each answer (Connection: close): the queued requests get the room, each in turn")
    func queueAfterClose() async throws {
        let peer = try ScriptedPeer(.answerSayingClose)
        defer { peer.stop() }
        let client = try PeerClient(maximumConnectionsPerPeer: 1, timeout: .seconds(30))
        let answered = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<20 {
                group.addTask {
                    if case .answered = await client.send(Self.request("/\(index)"), to: "http://127.0.0.1:\(peer.port)") { return true }
                    return false
                }
            }
            var count = 0
            for await ok in group where ok { count += 1 }
            return count
        }
        // A request left in the queue would end `.notSent` at its timeout.
        #expect(answered == 20)
        #expect(peer.connections == 20)
    }

    @Test("nobody listening: not sent (safe to send again)")
    func refused() async throws {
        let peer = try ScriptedPeer(.answer)
        let port = peer.port
        peer.stop()
        let client = try PeerClient()
        let outcome = await client.send(Self.request("/x"), to: "http://127.0.0.1:\(port)")
        guard case .notSent(let why) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(why.contains("cannot connect"), "\(why)")
    }

    @Test("the peer read the request and closed without answering: broken (it may have run)")
    func closedAfterRequest() async throws {
        let peer = try ScriptedPeer(.closeAfterRequest)
        defer { peer.stop() }
        let client = try PeerClient()
        let outcome = await client.send(Self.request("/toggle"), to: "http://127.0.0.1:\(peer.port)")
        guard case .broken = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(peer.requests == 1)
    }

    @Test("the peer never answers: broken after the timeout")
    func silentPeer() async throws {
        let peer = try ScriptedPeer(.silent)
        defer { peer.stop() }
        let client = try PeerClient(timeout: .milliseconds(300))
        let outcome = await client.send(Self.request("/toggle"), to: "http://127.0.0.1:\(peer.port)")
        // The peer closes after 5 s: "did not answer" is the client's own timeout.
        guard case .broken(let why) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(why.contains("did not answer"), "\(why)")
    }

    @Test("a kept connection the peer closed meanwhile is not used: the next request goes on a new one and is answered")
    func staleConnection() async throws {
        let peer = try ScriptedPeer(.answerThenClose)
        defer { peer.stop() }
        let client = try PeerClient()
        for index in 0..<5 {
            let outcome = await client.send(Self.request("/\(index)"), to: "http://127.0.0.1:\(peer.port)")
            guard case .answered = outcome else {
                Issue.record("request \(index): \(outcome)")
                return
            }
            // The peer has closed the connection before the next request is sent.
            #expect(try await Self.waitUntil { peer.closedConnections == index + 1 }, "the peer did not close connection \(index + 1)")
        }
        // Each request on a connection of its own (counted by the requests they carried: a
        // connection count also took in, once in CI, a connection that sent nothing).
        #expect(peer.requestsPerConnection == [1, 1, 1, 1, 1])
    }

    @Test("a peer URL that is not http://host:port is refused before anything is sent")
    func badURL() async throws {
        let client = try PeerClient()
        for url in ["https://127.0.0.1:8080", "127.0.0.1:8080", "http://", "http://127.0.0.1:99999", "http://no-such-host.invalid:8080"] {
            guard case .notSent = await client.send(Self.request("/x"), to: url) else {
                Issue.record("\(url) was not refused")
                continue
            }
        }
    }
}

@Suite("Peer client's answer parser and request bytes (pure)")
struct PeerResponseParserTests {
    @Test("a whole answer framed by Content-Length, with what follows left alone")
    func complete() {
        let bytes = Array(
            "HTTP/1.1 421 Misdirected Request\r\nContent-Type: application/json\r\nCounter-Owner:  http://b:8082 \r\nContent-Length: 2\r\n\r\n{}EXTRA"
                .utf8)
        #expect(
            PeerResponseParser.parse(bytes)
                == .complete(
                    status: 421, headers: ["content-type": "application/json", "counter-owner": "http://b:8082", "content-length": "2"],
                    body: Array("{}".utf8), used: bytes.count - 5, keepAlive: true))
    }

    @Test("every prefix of an answer is incomplete")
    func prefixes() {
        let bytes = Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".utf8)
        for end in 0..<bytes.count { #expect(PeerResponseParser.parse(Array(bytes[0..<end])) == .incomplete, "\(end)") }
    }

    @Test("Connection: close and HTTP/1.0 end the connection; no length reads to the close; bodyless statuses")
    func framing() {
        if case .complete(_, _, _, _, let keepAlive) = PeerResponseParser.parse(
            Array("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n".utf8))
        {
            #expect(!keepAlive)
        } else {
            Issue.record("not complete")
        }
        if case .complete(_, _, _, _, let keepAlive) = PeerResponseParser.parse(Array("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n".utf8)) {
            #expect(!keepAlive)
        } else {
            Issue.record("not complete")
        }
        #expect(PeerResponseParser.parse(Array("HTTP/1.1 200 OK\r\n\r\nabc".utf8)) == .untilClose(status: 200, headers: [:], bodyStart: 19))
        #expect(
            PeerResponseParser.parse(Array("HTTP/1.1 204 No Content\r\n\r\n".utf8))
                == .complete(status: 204, headers: [:], body: [], used: 27, keepAlive: true))
        if case .complete(_, _, _, _, let keepAlive) = PeerResponseParser.parse(
            Array("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n".utf8))
        {
            #expect(!keepAlive)
        } else {
            Issue.record("not complete")
        }
        // The same length twice is one length.
        #expect(
            PeerResponseParser.parse(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok".utf8))
                == .complete(status: 200, headers: ["content-length": "2"], body: Array("ok".utf8), used: 59, keepAlive: true))
    }

    @Test(
        "answers that cannot be framed safely, interim answers and absurd lengths are malformed",
        arguments: [
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "SMTP ready\r\n\r\n",
            "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 100 Continue\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n",
        ])
    func malformed(text: String) {
        guard case .malformed = PeerResponseParser.parse(Array(text.utf8)) else {
            Issue.record("\(text.debugDescription) was read")
            return
        }
    }

    @Test("a head longer than the limit is malformed, not waited for")
    func longHead() {
        let bytes = Array(("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: PeerResponseParser.maximumHeadLength)).utf8)
        guard case .malformed = PeerResponseParser.parse(bytes) else {
            Issue.record("not refused")
            return
        }
    }

    @Test("request bytes: method, target, Host, headers, a length for bodies and for every method but GET")
    func encode() {
        let post = PeerClient.encode(
            PeerClient.Request(method: "POST", target: "/v1/posts/query?x=1", headers: [("Authorization", "Bearer t")], body: Array("{}".utf8)),
            authority: "10.0.0.2:8082")
        #expect(
            String(decoding: post, as: UTF8.self)
                == "POST /v1/posts/query?x=1 HTTP/1.1\r\nHost: 10.0.0.2:8082\r\nAuthorization: Bearer t\r\nContent-Length: 2\r\n\r\n{}")
        let get = PeerClient.encode(PeerClient.Request(method: "GET", target: "/v1/posts/1"), authority: "b:80")
        #expect(String(decoding: get, as: UTF8.self) == "GET /v1/posts/1 HTTP/1.1\r\nHost: b:80\r\n\r\n")
        let toggle = PeerClient.encode(PeerClient.Request(method: "POST", target: "/t"), authority: "b:80")
        #expect(String(decoding: toggle, as: UTF8.self).contains("Content-Length: 0\r\n"))
    }

    @Test("peer URLs: host and port, default port 80, IPv6 in brackets; other forms refused")
    func split() {
        #expect(PeerAddress.split("http://10.0.0.2:8082")! == ("10.0.0.2", 8082))
        #expect(PeerAddress.split("http://node-2.peers.svc:8080/")! == ("node-2.peers.svc", 8080))
        #expect(PeerAddress.split("http://b")! == ("b", 80))
        #expect(PeerAddress.split("http://[::1]:8081")! == ("::1", 8081))
        for bad in ["https://b:1", "http://", "http://b:0", "http://b:x", "http://:80", "http://[::1"] {
            #expect(PeerAddress.split(bad) == nil, "\(bad)")
        }
    }
}
