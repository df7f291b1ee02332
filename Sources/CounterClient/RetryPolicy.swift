/// When to try an idempotent call again. Pure: the client asks it after each failure.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts in all, the first included. `1` turns retries off. Defaults to `3`.
    public var maximumAttempts: Int = 3
    /// First delay when the service names none; doubled per attempt. Defaults to 100 ms.
    public var initialDelay: Duration = .milliseconds(100)
    /// Longest delay, also for a larger `Retry-After`. Defaults to 5 s.
    public var maximumDelay: Duration = .seconds(5)

    public init(maximumAttempts: Int = 3, initialDelay: Duration = .milliseconds(100), maximumDelay: Duration = .seconds(5)) {
        self.maximumAttempts = maximumAttempts
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// No retries at all.
    public static let never = RetryPolicy(maximumAttempts: 1)

    /// The delay before attempt `attempt + 1` after `error` ended attempt `attempt` (1-based), or
    /// `nil` to give up: the call is not idempotent, the error is not retryable, or the attempts
    /// are used up. A `Retry-After` from the service wins over the backoff (capped).
    public func delay(after error: CounterClientError, attempt: Int, idempotent: Bool) -> Duration? {
        guard idempotent, error.isRetryable, attempt < maximumAttempts else { return nil }
        if case .server(_, _, _, let retryAfter?) = error {
            // Capped before it becomes a Duration: a header may say anything (`inf`, `1e300`).
            let cappedSeconds = min(retryAfter.isNaN ? 0 : max(retryAfter, 0), Double(maximumDelay.components.seconds) + 1)
            return min(.milliseconds(Int64((cappedSeconds * 1_000).rounded())), maximumDelay)
        }
        var delay = initialDelay
        for _ in 1..<max(attempt, 1) where delay < maximumDelay { delay *= 2 }
        return min(delay, maximumDelay)
    }
}
