/// A Redis reply, with the types hiredis 0.14 reports (RESP2).
public enum RedisReply: Sendable, Hashable {
    /// `+OK`, `+QUEUED`, …
    case status(String)
    /// `-ERR …`: the server's error text, kept whole.
    case error(String)
    case integer(Int64)
    case bulkString([UInt8])
    /// A nil bulk string or nil array.
    case null
    case array([RedisReply])

    /// The reply as text: bulk strings (UTF-8) and status replies; `nil` otherwise.
    public var string: String? {
        switch self {
        case .bulkString(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let text): return text
        default: return nil
        }
    }

    /// The reply as an integer: integer replies, and bulk strings holding a decimal integer.
    public var integer: Int64? {
        switch self {
        case .integer(let value): return value
        case .bulkString(let bytes): return Int64(String(decoding: bytes, as: UTF8.self))
        default: return nil
        }
    }

    /// The elements of an array reply; `nil` otherwise.
    public var array: [RedisReply]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    public var isNull: Bool { self == .null }

    /// The reply itself, or a thrown `RedisError(.server)` carrying Redis's text if it is an error.
    public func throwingServerError() throws(RedisError) -> RedisReply {
        if case .error(let text) = self { throw RedisError.server(text) }
        return self
    }
}
