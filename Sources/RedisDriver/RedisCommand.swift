import CounterCore

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
        RESPEncoding.appendDecimal(prefix: UInt8(ascii: "*"), arguments.count + 1, to: &bytes)
        name.appendBulk(to: &bytes)
        for argument in arguments { argument.appendBulk(to: &bytes) }
        self.encoded = bytes
    }

    public init(_ name: String, _ arguments: RedisArgument...) {
        self.init(name, arguments)
    }

    /// A command whose trailing arguments are already encoded: `name`, then `leading` as bulk
    /// strings, then `tail` as it is (bulk strings), `argumentCount` arguments in all after the
    /// name. For wrapping encoded commands into a script call without encoding them again.
    init(preEncodedName name: String, leading: [[UInt8]], argumentCount: Int, tail: [UInt8]) {
        self.name = name
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32 + tail.count + leading.reduce(0) { $0 + $1.count + 8 })
        RESPEncoding.appendDecimal(prefix: UInt8(ascii: "*"), argumentCount + 1, to: &bytes)
        name.appendBulk(to: &bytes)
        for argument in leading { argument.appendBulk(to: &bytes) }
        bytes.append(contentsOf: tail)
        self.encoded = bytes
    }

    public var description: String { name }
}

/// Writing RESP by hand: array headers, bulk strings and decimal integers, without allocating.
public enum RESPEncoding {
    /// Appends `<prefix><value>\r\n` (`*3\r\n`, `$5\r\n`, …).
    public static func appendDecimal(prefix: UInt8, _ value: Int, to bytes: inout [UInt8]) {
        bytes.append(prefix)
        DecimalText.append(Int64(value), to: &bytes)
        bytes.append(13)
        bytes.append(10)
    }

    /// Appends `value` as a bulk string: `$<digits>\r\n<digits>\r\n`.
    public static func appendBulk(_ value: Int64, to bytes: inout [UInt8]) {
        appendDecimal(prefix: UInt8(ascii: "$"), DecimalText.byteCount(value), to: &bytes)
        DecimalText.append(value, to: &bytes)
        bytes.append(13)
        bytes.append(10)
    }

    /// Appends `payload` as a bulk string.
    public static func appendBulk<Payload: Collection>(bytes payload: Payload, to bytes: inout [UInt8]) where Payload.Element == UInt8 {
        appendDecimal(prefix: UInt8(ascii: "$"), payload.count, to: &bytes)
        bytes.append(contentsOf: payload)
        bytes.append(13)
        bytes.append(10)
    }
}

/// Something that can be a Redis command argument.
public protocol RedisArgument: Sendable {
    /// Appends the argument as a RESP bulk string (`$<length>\r\n<bytes>\r\n`).
    func appendBulk(to bytes: inout [UInt8])
}

extension String: RedisArgument {
    public func appendBulk(to bytes: inout [UInt8]) { RESPEncoding.appendBulk(bytes: utf8, to: &bytes) }
}
extension Substring: RedisArgument {
    public func appendBulk(to bytes: inout [UInt8]) { RESPEncoding.appendBulk(bytes: utf8, to: &bytes) }
}
extension Int: RedisArgument {
    public func appendBulk(to bytes: inout [UInt8]) { RESPEncoding.appendBulk(Int64(self), to: &bytes) }
}
extension Int64: RedisArgument {
    public func appendBulk(to bytes: inout [UInt8]) { RESPEncoding.appendBulk(self, to: &bytes) }
}
extension Array: RedisArgument where Element == UInt8 {
    public func appendBulk(to bytes: inout [UInt8]) { RESPEncoding.appendBulk(bytes: self, to: &bytes) }
}
