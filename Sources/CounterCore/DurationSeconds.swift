extension Duration {
    /// The duration in seconds, as a `Double` (for rates, ages and JSON/metrics output).
    /// The duration in whole milliseconds, rounded toward zero (for settings and SQL intervals).
    @inlinable
    public var inMilliseconds: Int64 {
        components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000
    }

    @inlinable
    public var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

extension Duration {
    /// Reads a duration as an operator writes it: a whole number with a unit — `500ms`, `30s`,
    /// `10m`, `2h` — or a bare number of seconds. `nil` for anything else (negative numbers,
    /// fractions, other units).
    public static func parsingSetting(_ text: String) -> Duration? {
        let units: [(suffix: String, duration: (Int64) -> Duration)] = [
            ("ms", { .milliseconds($0) }), ("s", { .seconds($0) }), ("m", { .seconds($0 * 60) }), ("h", { .seconds($0 * 3_600) }),
        ]
        for (suffix, make) in units where text.hasSuffix(suffix) {
            let digits = text.dropLast(suffix.count)
            guard !digits.isEmpty, digits.allSatisfy(\.isASCIIDigit), digits.count <= 9, let value = Int64(digits) else { return nil }
            return make(value)
        }
        guard !text.isEmpty, text.allSatisfy(\.isASCIIDigit), text.count <= 9, let seconds = Int64(text) else { return nil }
        return .seconds(seconds)
    }

    /// The duration as `parsingSetting(_:)` reads it: in the largest unit that is exact.
    public var settingText: String {
        let milliseconds = inMilliseconds
        if milliseconds % 3_600_000 == 0, milliseconds > 0 { return "\(milliseconds / 3_600_000)h" }
        if milliseconds % 60_000 == 0, milliseconds > 0 { return "\(milliseconds / 60_000)m" }
        if milliseconds % 1_000 == 0 { return "\(milliseconds / 1_000)s" }
        return "\(milliseconds)ms"
    }
}

extension Character {
    /// `0`–`9` only (not other scripts' digits).
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

/// Sizes as an operator writes them: a whole number of bytes, or with a binary unit — `512kb`,
/// `256mb`, `4gb` (also `k`, `m`, `g`; any case). Pure.
public enum ByteSize {
    /// The bytes `text` names, or `nil` for anything else (fractions, negative numbers).
    public static func parse(_ text: String) -> Int? {
        let lower = text.lowercased()
        let units: [(suffix: String, factor: Int)] = [("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30), ("k", 1 << 10), ("m", 1 << 20),
                                                      ("g", 1 << 30), ("b", 1)]
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
