import Foundation

/// A response as read off the wire.
public struct RawHTTPResponse: Equatable, Sendable {
    public let status: Int
    /// Header names in lower case.
    public let headers: [String: String]
    public let body: [UInt8]

    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The same answer without its `Date` header, which says the second it was sent in.
    public var undated: RawHTTPResponse { RawHTTPResponse(status: status, headers: headers.filter { $0.key != "date" }, body: body) }
}

/// A plain-socket HTTP/1.1 client for tests: sends exactly the bytes given (in the chunks
/// given), then reads responses. The blocking socket work runs on a thread of its own, never on
/// Swift's cooperative pool (which the server's handlers need).
public enum RawHTTPClient {
    /// Sends `chunks` on one connection (pausing `pause` between them) and reads `responses`
    /// responses, or until the server closes the connection or `timeout` passes.
    public static func exchange(
        port: Int, chunks: [[UInt8]], responses: Int, pause: Duration = .zero,
        timeout: Duration = .seconds(10)
    ) async throws -> [RawHTTPResponse] {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(
                    with: Result { try blockingExchange(port: port, chunks: chunks, responses: responses, pause: pause, timeout: timeout) })
            }
            thread.start()
        }
    }

    /// One request, built from its parts.
    public static func request(
        _ method: String, _ path: String, token: String? = nil, body: String? = nil,
        headers: [String: String] = [:]
    ) -> [UInt8] {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: test\r\n"
        if let token { text += "Authorization: Bearer \(token)\r\n" }
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let body { text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        text += "\r\n"
        if let body { text += body }
        return Array(text.utf8)
    }

    /// `connections` times: connects, sends `request` `pipelined` times in one write and closes at
    /// once, answers unread — the client that leaves while its answers are being written (the
    /// server's later writes to it fail with EPIPE).
    public static func sendAndLeave(port: Int, request: [UInt8], pipelined: Int, connections: Int) async throws {
        let bytes = Array([[UInt8]](repeating: request, count: pipelined).joined())
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let thread = Thread {
                continuation.resume(
                    with: Result {
                        for _ in 0..<connections {
                            let descriptor = try connectedSocket(port: port)
                            _ = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                            close(descriptor)
                        }
                    })
            }
            thread.start()
        }
    }

    /// A blocking TCP socket connected to `port` on loopback; the caller closes it.
    public static func connectedSocket(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw PrivateServersError(message: "socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw PrivateServersError(message: "connect to port \(port) failed")
        }
        return descriptor
    }

    private static func blockingExchange(port: Int, chunks: [[UInt8]], responses: Int, pause: Duration, timeout: Duration) throws -> [RawHTTPResponse]
    {
        let descriptor = try connectedSocket(port: port)
        defer { close(descriptor) }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        for (index, chunk) in chunks.enumerated() {
            var sent = 0
            while sent < chunk.count {
                let written = chunk[sent...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written <= 0 { break }
                sent += written
            }
            if index < chunks.count - 1 && pause > .zero {
                usleep(UInt32(pause.components.attoseconds / 1_000_000_000_000))
            }
        }
        var buffer: [UInt8] = []
        var parsed: [RawHTTPResponse] = []
        var scratch = [UInt8](repeating: 0, count: 65_536)
        while parsed.count < responses {
            if let (response, used) = parse(buffer) {
                parsed.append(response)
                buffer.removeFirst(used)
                continue
            }
            let count = recv(descriptor, &scratch, scratch.count, 0)
            if count <= 0 { break }
            buffer.append(contentsOf: scratch[0..<count])
        }
        return parsed
    }

    /// One complete response at the start of `bytes`, and how many bytes it took.
    static func parse(_ bytes: [UInt8]) -> (RawHTTPResponse, Int)? {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard bytes.count >= 4, let end = (0...(bytes.count - 4)).first(where: { Array(bytes[$0..<$0 + 4]) == separator }) else { return nil }
        let head = String(decoding: bytes[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = head[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        guard bytes.count >= end + 4 + length else { return nil }
        return (RawHTTPResponse(status: status, headers: headers, body: Array(bytes[(end + 4)..<(end + 4 + length)])), end + 4 + length)
    }
}
