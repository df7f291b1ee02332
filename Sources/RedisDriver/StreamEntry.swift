import CounterCore

/// A Redis stream entry id, `<milliseconds>-<sequence>`, ordered as Redis orders them.
public struct StreamEntryID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let milliseconds: UInt64
    public let sequence: UInt64

    public init(milliseconds: UInt64, sequence: UInt64) {
        self.milliseconds = milliseconds
        self.sequence = sequence
    }

    /// Parses `1700000000000-3`; `nil` for anything else.
    public init?(_ text: String) {
        self.init(bytes: text.utf8)
    }

    /// Parses the ASCII bytes of `1700000000000-3`; `nil` for anything else.
    public init?<Bytes: Collection>(bytes: Bytes) where Bytes.Element == UInt8 {
        var parts: (UInt64, UInt64) = (0, 0)
        var digits = 0
        var inSequence = false
        for byte in bytes {
            if byte == UInt8(ascii: "-") {
                guard !inSequence, digits > 0 else { return nil }
                inSequence = true
                digits = 0
                continue
            }
            guard byte >= 48 && byte <= 57 else { return nil }
            let current = inSequence ? parts.1 : parts.0
            let (times10, overflow1) = current.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - 48))
            guard !overflow1 && !overflow2 else { return nil }
            if inSequence { parts.1 = sum } else { parts.0 = sum }
            digits += 1
        }
        guard inSequence, digits > 0 else { return nil }
        self.init(milliseconds: parts.0, sequence: parts.1)
    }

    /// The smallest id after this one.
    public var successor: StreamEntryID {
        sequence == UInt64.max
            ? StreamEntryID(milliseconds: milliseconds + 1, sequence: 0)
            : StreamEntryID(milliseconds: milliseconds, sequence: sequence + 1)
    }

    public static func < (lhs: StreamEntryID, rhs: StreamEntryID) -> Bool {
        (lhs.milliseconds, lhs.sequence) < (rhs.milliseconds, rhs.sequence)
    }

    public var description: String { "\(milliseconds)-\(sequence)" }
}

/// One stream entry: its id and its field/value pairs in order.
public struct StreamEntry: Sendable, Hashable {
    public let id: StreamEntryID
    public let fields: [String: [UInt8]]

    public init(id: StreamEntryID, fields: [String: [UInt8]]) {
        self.id = id
        self.fields = fields
    }

    /// A field's value as text.
    public func string(_ field: String) -> String? {
        fields[field].map { String(decoding: $0, as: UTF8.self) }
    }

    /// A field's value as a decimal integer (ASCII digits with an optional leading `-`), or
    /// `nil` when it is missing or anything else.
    public func integer(_ field: String) -> Int64? {
        fields[field].flatMap(DecimalText.parse)
    }
}

extension RedisReply {
    /// The entries of an `XRANGE` reply, or of the one stream in an `XREADGROUP` reply.
    /// A nil reply (nothing new) is no entries.
    public func streamEntries() throws(RedisError) -> [StreamEntry] {
        let reply = try throwingServerError()
        if reply.isNull { return [] }
        guard let elements = reply.array else { throw Self.notAStream(reply) }
        // XREADGROUP: [[key, entries]]; XRANGE: entries.
        if let first = elements.first, let pair = first.array, pair.count == 2, pair[1].array != nil, pair[0].string != nil,
            StreamEntryID(pair[0].string!) == nil
        {
            guard elements.count == 1 else { throw Self.notAStream(reply) }
            return try pair[1].streamEntries()
        }
        return try elements.map { (element) throws(RedisError) -> StreamEntry in
            guard let pair = element.array, pair.count == 2, case .bulkString(let idBytes) = pair[0],
                let id = StreamEntryID(bytes: idBytes), let flat = pair[1].array, flat.count % 2 == 0
            else {
                throw Self.notAStream(element)
            }
            var fields: [String: [UInt8]] = [:]
            for index in stride(from: 0, to: flat.count, by: 2) {
                guard let name = flat[index].string, case .bulkString(let value) = flat[index + 1] else {
                    throw Self.notAStream(element)
                }
                fields[name] = value
            }
            return StreamEntry(id: id, fields: fields)
        }
    }

    private static func notAStream(_ reply: RedisReply) -> RedisError {
        RedisError(code: .unexpectedReply, message: "not a stream reply: \(reply)")
    }
}
