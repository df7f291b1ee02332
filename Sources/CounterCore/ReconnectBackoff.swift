/// Capped exponential backoff between reconnect attempts: `initial`, then doubling up to
/// `maximum`, back to `initial` after a success. Pure: the caller keeps the clock.
public struct ReconnectBackoff: Sendable, Equatable {
    public let initial: Duration
    public let maximum: Duration
    private var current: Duration?

    public init(initial: Duration, maximum: Duration) {
        precondition(initial > .zero && maximum >= initial, "backoff needs 0 < initial <= maximum")
        self.initial = initial
        self.maximum = maximum
    }

    /// The delay to wait after another failure.
    public mutating func nextDelay() -> Duration {
        let delay = current.map { min($0 * 2, maximum) } ?? initial
        current = delay
        return delay
    }

    /// Forget past failures after a success.
    public mutating func reset() { current = nil }
}
