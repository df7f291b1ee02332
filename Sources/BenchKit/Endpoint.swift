import Foundation

/// Where the load generator connects: an IPv4 address and a port.
public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    /// A numeric IPv4 address (names are resolved by `init(url:)`).
    public let host: String
    public let port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `http://host:port` (a trailing path is ignored) and resolves a host name to its
    /// first IPv4 address.
    /// - Throws: `Endpoint.Invalid` when the URL has another form or the name does not resolve.
    public init(url: String) throws(Invalid) {
        guard url.hasPrefix("http://") else { throw Invalid(message: "\(url): must be http://host:port") }
        let authority = url.dropFirst(7).prefix { $0 != "/" }
        guard let colon = authority.lastIndex(of: ":"), let port = Int(authority[authority.index(after: colon)...]),
            (1...65_535).contains(port), colon > authority.startIndex
        else {
            throw Invalid(message: "\(url): must be http://host:port")
        }
        self.host = try Self.resolve(String(authority[..<colon]), in: url)
        self.port = port
    }

    public var description: String { "\(host):\(port)" }

    public struct Invalid: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    private static func resolve(_ name: String, in url: String) throws(Invalid) -> String {
        var address = in_addr()
        if inet_pton(AF_INET, name, &address) == 1 { return name }
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &found) == 0, let first = found, let socketAddress = first.pointee.ai_addr else {
            throw Invalid(message: "\(url): cannot resolve \"\(name)\" to an IPv4 address")
        }
        defer { freeaddrinfo(found) }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        var ipv4 = socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
        inet_ntop(AF_INET, &ipv4, &text, socklen_t(text.count))
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
