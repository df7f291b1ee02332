import Foundation

/// The sockets `HTTPServer` listens on, made before the engine takes them over.
enum ListeningSocket {
    /// A bound, listening, non-blocking IPv4 socket on `host:port` (`0`: a free port).
    /// - Throws: `HTTPServerError` when the address is not IPv4 or cannot be bound.
    static func open(host: String, port: Int) throws -> Int32 {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw HTTPServerError(message: "listen address \"\(host)\" is not an IPv4 address")
        }
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw HTTPServerError(message: "socket() failed: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 4_096) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw HTTPServerError(message: "cannot listen on \(host):\(port): \(reason)")
        }
        return descriptor
    }

    /// The port `descriptor` is bound to.
    static func boundPort(_ descriptor: Int32) -> Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
