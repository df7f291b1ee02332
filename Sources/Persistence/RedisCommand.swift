/// One Redis command, encoded once into RESP (the wire format) when it is made, so a pipeline
/// of thousands of commands is a single buffer sent in one write.
public struct RedisCommand: Sendable, Hashable, CustomStringConvertible {
    /// The command's name as given (`SADD`, `XADD`, …), for messages.
    public let name: String
    /// The RESP encoding: `*<n>\r\n` then `$<len>\r\n<bytes>\r\n` per argument.
    public let encoded: [UInt8]

    /// A command from its name and arguments, each sent as a binary-safe bulk string.
    public init(_ name: String, _ arguments: [RedisArgument]) {
        self.name = name
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16 + name.utf8.count + arguments.count * 24)
        Self.appendDecimal(prefix: UInt8(ascii: "*"), arguments.count + 1, to: &bytes)
        Self.appendBulk(Array(name.utf8), to: &bytes)
        for argument in arguments { Self.appendBulk(argument.redisBytes, to: &bytes) }
        self.encoded = bytes
    }

    public init(_ name: String, _ arguments: RedisArgument...) {
        self.init(name, arguments)
    }

    public var description: String { name }

    private static func appendBulk(_ payload: [UInt8], to bytes: inout [UInt8]) {
        appendDecimal(prefix: UInt8(ascii: "$"), payload.count, to: &bytes)
        bytes.append(contentsOf: payload)
        bytes.append(13)
        bytes.append(10)
    }

    private static func appendDecimal(prefix: UInt8, _ value: Int, to bytes: inout [UInt8]) {
        bytes.append(prefix)
        bytes.append(contentsOf: String(value).utf8)
        bytes.append(13)
        bytes.append(10)
    }
}

/// Something that can be a Redis command argument.
public protocol RedisArgument: Sendable {
    /// The argument's bytes as Redis receives them.
    var redisBytes: [UInt8] { get }
}

extension String: RedisArgument { public var redisBytes: [UInt8] { Array(utf8) } }
extension Substring: RedisArgument { public var redisBytes: [UInt8] { Array(utf8) } }
extension Int: RedisArgument { public var redisBytes: [UInt8] { Array(String(self).utf8) } }
extension Int64: RedisArgument { public var redisBytes: [UInt8] { Array(String(self).utf8) } }
extension Array: RedisArgument where Element == UInt8 { public var redisBytes: [UInt8] { self } }
