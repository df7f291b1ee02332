/// One Redis server's address: host and TCP port.
public struct RedisEndpoint: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Host name or IP address.
    public let host: String
    /// TCP port, 1...65535.
    public let port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Reads `host:port` (`[v6]:port` for IPv6); `nil` for anything else.
    public init?(_ text: Substring) {
        guard let colon = text.lastIndex(of: ":"),
            let port = Int(text[text.index(after: colon)...]), (1...65535).contains(port)
        else { return nil }
        var host = text[..<colon]
        if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard !host.isEmpty, !host.contains(where: { $0 == "," || $0 == "/" || $0 == "@" || $0 == " " }) else { return nil }
        self.init(host: String(host), port: port)
    }

    public static func < (lhs: RedisEndpoint, rhs: RedisEndpoint) -> Bool {
        (lhs.host, lhs.port) < (rhs.host, rhs.port)
    }

    /// `host:port`, as Redis writes it in `MOVED` replies.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
