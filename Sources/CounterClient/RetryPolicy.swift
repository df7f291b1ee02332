/// When to try an idempotent call again. Pure: the client asks it after each failure.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts in all, the first included. `1` turns retries off. Defaults to `3`.
    public var maximumAttempts: Int = 3
    /// First delay when the service names none; doubled per attempt. Defaults to 0.1 s.
    public var initialDelaySeconds: Double = 0.1
    /// Longest delay, also for a larger `Retry-After`. Defaults to 5 s.
    public var maximumDelaySeconds: Double = 5

    public init(maximumAttempts: Int = 3, initialDelaySeconds: Double = 0.1, maximumDelaySeconds: Double = 5) {
        self.maximumAttempts = maximumAttempts
        self.initialDelaySeconds = initialDelaySeconds
        self.maximumDelaySeconds = maximumDelaySeconds
    }

    /// No retries at all.
    public static let never = RetryPolicy(maximumAttempts: 1)

    /// The delay before attempt `attempt + 1` after `error` ended attempt `attempt` (1-based), or
    /// `nil` to give up: the call is not idempotent, the error is not retryable, or the attempts
    /// are used up. A `Retry-After` from the service wins over the backoff (capped).
    public func delay(after error: CounterClientError, attempt: Int, idempotent: Bool) -> Double? {
        guard idempotent, error.isRetryable, attempt < maximumAttempts else { return nil }
        if case .server(_, _, _, let retryAfter?) = error {
            return min(max(retryAfter, 0), maximumDelaySeconds)
        }
        var delay = initialDelaySeconds
        for _ in 1..<max(attempt, 1) { delay *= 2 }
        return min(delay, maximumDelaySeconds)
    }
}
