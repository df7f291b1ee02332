/// Sizes as an operator writes them: a whole number of bytes, or with a binary unit — `512kb`,
/// `256mb`, `4gb` (also `k`, `m`, `g`; any case). Pure.
public enum ByteSize {
    /// The bytes `text` names, or `nil` for anything else (fractions, negative numbers).
    public static func parse(_ text: String) -> Int? {
        let lower = text.lowercased()
        let units: [(suffix: String, factor: Int)] = [
            ("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30), ("k", 1 << 10), ("m", 1 << 20),
            ("g", 1 << 30), ("b", 1),
        ]
        var digits = Substring(lower)
        var factor = 1
        for (suffix, unitFactor) in units where lower.hasSuffix(suffix) {
            digits = lower.dropLast(suffix.count)
            factor = unitFactor
            break
        }
        guard !digits.isEmpty, digits.count <= 12, digits.allSatisfy(\.isASCIIDigit), let value = Int(digits) else { return nil }
        return value * factor
    }

    /// `bytes` in the largest binary unit that is exact (`256mb`), as `parse` reads it.
    public static func text(_ bytes: Int) -> String {
        for (suffix, factor) in [("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)] where bytes > 0 && bytes % factor == 0 {
            return "\(bytes / factor)\(suffix)"
        }
        return "\(bytes)"
    }
}
