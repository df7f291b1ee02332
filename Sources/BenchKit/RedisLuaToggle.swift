import CounterCore

/// What the connections of a run speak.
public enum WireProtocol: Sendable, Equatable {
    /// HTTP/1.1 requests to nodes.
    case http
    /// HTTP/2 (cleartext, prior knowledge) to nodes: `LoadOptions.connections` clients over
    /// TCP connections of `streamsPerConnection` clients each, one stream per client at a time.
    case http2(streamsPerConnection: Int)
    /// RESP commands to a Redis server (the `redis-lua` peer row).
    case resp
}

/// The peer the node's hot toggle is held to: the same toggle as one Lua script in Redis
/// (`SISMEMBER`, then `SADD` or `SREM`, then `SCARD`, by `EVALSHA`), driven over RESP by the same
/// load generator, connections and run shape — no HTTP, no PostgreSQL, no log. Every request is a
/// new user of one key, as in the `hot` scenario.
public struct RedisLuaToggleWorkload: Workload {
    /// The toggle, as the node's is: the membership after it (1 liked, 0 not) and the count.
    public static let script = """
        if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then
          redis.call('SREM', KEYS[1], ARGV[1])
          return {0, redis.call('SCARD', KEYS[1])}
        end
        redis.call('SADD', KEYS[1], ARGV[1])
        return {1, redis.call('SCARD', KEYS[1])}
        """

    let sha: String
    let key: String
    let userBase: Int64
    let usersPerConnection: Int64

    /// - Parameters: `sha`, the script's SHA-1 from `SCRIPT LOAD`; `key`, the set toggled.
    public init(sha: String, key: String, userBase: Int64, usersPerConnection: Int64 = 1_000_000) {
        self.sha = sha
        self.key = key
        self.userBase = userBase
        self.usersPerConnection = usersPerConnection
    }

    public func request(connection: Int, sequence: Int, random: inout SystemRandomNumberGenerator) -> PlannedRequest {
        let user = userBase + Int64(connection) * usersPerConnection + 1 + Int64(sequence) % usersPerConnection
        return PlannedRequest(bytes: Self.command(["EVALSHA", sha, "1", key], user: user))
    }

    /// A RESP array of bulk strings: `parts`, then `user` in decimal.
    static func command(_ parts: [String], user: Int64) -> [UInt8] {
        var bytes: [UInt8] = Array("*\(parts.count + 1)\r\n".utf8)
        for part in parts {
            bytes += Array("$\(part.utf8.count)\r\n".utf8)
            bytes += Array(part.utf8)
            bytes += [13, 10]
        }
        var digits: [UInt8] = []
        DecimalText.append(user, to: &digits)
        bytes += Array("$\(digits.count)\r\n".utf8) + digits + [13, 10]
        return bytes
    }
}

/// Framing of RESP replies, enough for a load generator: where the first complete reply in a
/// buffer ends, and whether it is an error.
public enum RESPFraming {
    /// The length of the first complete reply at the start of `bytes` and whether it is an error
    /// reply (`-…`); `nil` while it is incomplete or when it is not RESP.
    public static func reply(_ bytes: [UInt8]) -> (length: Int, isError: Bool)? {
        guard let end = skip(bytes, from: 0) else { return nil }
        return (end, bytes.first == UInt8(ascii: "-"))
    }

    /// The index after the reply starting at `start`, or `nil`.
    private static func skip(_ bytes: [UInt8], from start: Int) -> Int? {
        guard start < bytes.count, let lineEnd = lineEnd(bytes, from: start + 1) else { return nil }
        switch bytes[start] {
        case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ":"):
            return lineEnd + 2
        case UInt8(ascii: "$"):
            guard let length = DecimalText.parse(bytes[(start + 1)..<lineEnd]) else { return nil }
            if length < 0 { return lineEnd + 2 }
            let end = lineEnd + 2 + Int(length) + 2
            return end <= bytes.count ? end : nil
        case UInt8(ascii: "*"):
            guard let count = DecimalText.parse(bytes[(start + 1)..<lineEnd]) else { return nil }
            var index = lineEnd + 2
            if count < 0 { return index }
            for _ in 0..<count {
                guard let next = skip(bytes, from: index) else { return nil }
                index = next
            }
            return index
        default:
            return nil
        }
    }

    private static func lineEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        var index = start
        while index + 1 < bytes.count {
            if bytes[index] == 13 && bytes[index + 1] == 10 { return index }
            index += 1
        }
        return nil
    }
}
