internal import CLinuxEvents
import Foundation

/// Where a peer node listens, from its advertised URL (`http://host:port`), resolved to a socket
/// address once (IPv4, as nodes listen: the resolver's first IPv4 answer).
struct PeerAddress: Sendable {
    /// `host:port` as written, for the `Host` header and messages.
    let authority: String
    let family: Int32
    /// The `sockaddr_in`/`sockaddr_in6` bytes to connect to.
    let socketAddress: [UInt8]

    /// Host and port of an `http://` URL (port 80 when none); a path after them is ignored.
    /// `nil` for any other form.
    static func split(_ url: String) -> (host: String, port: Int)? {
        guard url.hasPrefix("http://") else { return nil }
        let authority = url.dropFirst(7).prefix { $0 != "/" && $0 != "?" }
        guard !authority.isEmpty else { return nil }
        if authority.hasPrefix("[") {
            // [v6]:port
            guard let close = authority.firstIndex(of: "]") else { return nil }
            let host = String(authority[authority.index(after: authority.startIndex)..<close])
            let rest = authority[authority.index(after: close)...]
            if rest.isEmpty { return host.isEmpty ? nil : (host, 80) }
            guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()), (1...65_535).contains(port), !host.isEmpty else { return nil }
            return (host, port)
        }
        guard let colon = authority.lastIndex(of: ":") else { return (String(authority), 80) }
        let host = String(authority[..<colon])
        guard !host.isEmpty, let port = Int(authority[authority.index(after: colon)...]), (1...65_535).contains(port) else { return nil }
        return (host, port)
    }

    /// Resolves `url`'s host (blocking: a name lookup, done once per peer by the caller's task).
    /// - Throws: `PeerAddress.Failure` with the reason.
    static func resolve(_ url: String) throws(Failure) -> PeerAddress {
        guard let (host, port) = split(url) else { throw Failure(message: "\(url) is not an http://host:port URL") }
        var hints = addrinfo()
        hints.ai_family = AF_INET // nodes listen on IPv4
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let first = found, let address = first.pointee.ai_addr else {
            throw Failure(message: "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(found) }
        let bytes = Array(UnsafeRawBufferPointer(start: address, count: Int(first.pointee.ai_addrlen)))
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        return PeerAddress(authority: authority, family: first.pointee.ai_family, socketAddress: bytes)
    }

    struct Failure: Error {
        let message: String
    }
}
