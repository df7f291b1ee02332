/// Ids are positive 64-bit integers (PostgreSQL `bigint`), written in decimal digits only.
public enum EntityID {
    /// The id `text` names, or `nil` for anything else (`0`, `-1`, `+1`, `abc`, 20 digits, empty).
    @inlinable
    public static func parse<Text: StringProtocol>(_ text: Text) -> Int64? {
        parse(bytes: text.utf8)
    }

    /// The id `digits` (ASCII bytes) names, or `nil`; the same rules as `parse(_:)`.
    @inlinable
    public static func parse<Digits: Collection>(bytes digits: Digits) -> Int64? where Digits.Element == UInt8 {
        guard digits.count <= 19, digits.first != UInt8(ascii: "-"), let value = DecimalText.parse(digits) else { return nil }
        return value > 0 ? value : nil
    }
}
