import Foundation

/// One blocking HTTP/1.1 request on its own connection, for the bench's bookkeeping calls
/// (`/admin/flush`, `/v1/cluster`, `/metrics`). Not for load.
public enum OneShotHTTP {
    public struct Failure: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// Sends the request and returns (status, body).
    public static func send(
        to endpoint: Endpoint, method: String, path: String, token: String?,
        timeoutSeconds: Int = 300
    ) throws -> (Int, String) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(message: "socket() failed") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(endpoint.port).bigEndian)
        inet_pton(AF_INET, endpoint.host, &address.sin_addr)
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure(message: "cannot connect to \(endpoint)") }
        var limit = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let request = ScenarioWorkload.http(method, path, token: token, body: nil)
        _ = request.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var input: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            if let (status, body, _) = EventLoop.parseResponse(input) { return (status, String(decoding: body, as: UTF8.self)) }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { throw Failure(message: "\(method) \(path): no complete answer") }
            input.append(contentsOf: buffer[0..<count])
        }
    }
}
