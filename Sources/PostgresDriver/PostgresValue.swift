import CounterCore

/// A statement parameter, sent separately from the SQL text (never spliced into it), in
/// PostgreSQL's text format. Give the parameter's type in the SQL where it is ambiguous
/// (`$1::bigint[]`).
public enum PostgresValue: Sendable, Hashable {
    case null
    case text(String)
    case int64(Int64)
    case bool(Bool)
    case int64Array([Int64])
    case boolArray([Bool])
    case textArray([String])

    /// The parameter's text form, or `nil` for SQL NULL.
    var textEncoding: String? {
        switch self {
        case .null: return nil
        case .text(let value): return value
        case .int64(let value): return String(value)
        case .bool(let value): return value ? "t" : "f"
        case .int64Array(let values):
            // Built as bytes: a flush sends arrays of thousands of ids.
            var bytes: [UInt8] = [UInt8(ascii: "{")]
            bytes.reserveCapacity(values.count * 9 + 2)
            for (index, value) in values.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                DecimalText.append(value, to: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
            return String(decoding: bytes, as: UTF8.self)
        case .boolArray(let values): return Self.arrayLiteral(values.lazy.map { $0 ? "t" : "f" })
        case .textArray(let values):
            // Built as bytes, as the ids are: a flush of reactions sends a kind per change.
            var bytes: [UInt8] = [UInt8(ascii: "{")]
            bytes.reserveCapacity(values.reduce(2) { $0 + $1.utf8.count + 3 })
            for (index, value) in values.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                Self.appendQuotedElement(value, to: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    private static func arrayLiteral<S: Sequence>(_ elements: S) -> String where S.Element == String {
        var literal = "{"
        var first = true
        for element in elements {
            if !first { literal += "," }
            literal += element
            first = false
        }
        return literal + "}"
    }

    /// An array element in double quotes, with `"` and `\` escaped, so any text is safe.
    private static func appendQuotedElement(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
            bytes.append(byte)
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension PostgresValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int64) { self = .int64(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}
