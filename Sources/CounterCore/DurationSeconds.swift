extension Duration {
    /// The duration in seconds, as a `Double` (for rates, ages and JSON/metrics output).
    @inlinable
    public var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
