/// Decimal integers as ASCII bytes, both ways, without going through `String`: the wire formats
/// (RESP, JSON, stream fields, URL path ids) carry them on every request.
public enum DecimalText {
    /// How many decimal digits `value` has (1 for 0).
    @inlinable
    public static func digitCount(_ value: UInt64) -> Int {
        var count = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            count += 1
        }
        return count
    }

    /// How many bytes `append(_:to:)` writes for `value`.
    @inlinable
    public static func byteCount(_ value: Int64) -> Int {
        digitCount(value.magnitude) + (value < 0 ? 1 : 0)
    }

    /// Appends the decimal digits of `value`, with a leading `-` when negative.
    @inlinable
    public static func append(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        let count = digitCount(magnitude)
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: count))
        var index = start + count - 1
        repeat {
            bytes[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
            magnitude /= 10
            index -= 1
        } while magnitude > 0
    }

    /// The integer `bytes` spell: ASCII digits with an optional leading `-`; `nil` for anything
    /// else (empty, other characters, `+`, out of `Int64`'s range).
    @inlinable
    public static func parse<Bytes: Collection>(_ bytes: Bytes) -> Int64? where Bytes.Element == UInt8 {
        guard let first = bytes.first, bytes.count <= 20 else { return nil }
        let negative = first == UInt8(ascii: "-")
        let digits = bytes.dropFirst(negative ? 1 : 0)
        guard !digits.isEmpty else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard byte >= 48 && byte <= 57 else { return nil }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) =
                negative
                ? times10.subtractingReportingOverflow(Int64(byte - 48))
                : times10.addingReportingOverflow(Int64(byte - 48))
            guard !overflow1 && !overflow2 else { return nil }
            value = sum
        }
        return value
    }
}
