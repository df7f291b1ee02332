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
    /// `10m`, `2h`, `7d` — or a bare number of seconds. `nil` for anything else (negative numbers,
    /// fractions, other units).
    public static func parsingSetting(_ text: String) -> Duration? {
        let units: [(suffix: String, duration: (Int64) -> Duration)] = [
            ("ms", { .milliseconds($0) }), ("s", { .seconds($0) }), ("m", { .seconds($0 * 60) }), ("h", { .seconds($0 * 3_600) }),
            ("d", { .seconds($0 * 86_400) }),
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
        if milliseconds % 86_400_000 == 0, milliseconds > 0 { return "\(milliseconds / 86_400_000)d" }
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
