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
