import CounterClient
import Testing

@Suite("Retry policy (pure)")
struct RetryPolicyTests {
    let policy = RetryPolicy(maximumAttempts: 4, initialDelay: .milliseconds(100), maximumDelay: .seconds(2))

    @Test("retryable errors of idempotent calls back off exponentially, capped, until attempts run out")
    func backoff() {
        let error = CounterClientError.connection(message: "reset", requestMayHaveSucceeded: true)
        #expect(policy.delay(after: error, attempt: 1, idempotent: true) == .milliseconds(100))
        #expect(policy.delay(after: error, attempt: 2, idempotent: true) == .milliseconds(200))
        #expect(policy.delay(after: error, attempt: 3, idempotent: true) == .milliseconds(400))
        #expect(policy.delay(after: error, attempt: 4, idempotent: true) == nil)
        #expect(
            RetryPolicy(maximumAttempts: 20, initialDelay: .seconds(1), maximumDelay: .seconds(2))
                .delay(after: error, attempt: 10, idempotent: true) == .seconds(2))
    }

    @Test("Retry-After wins, capped; non-idempotent calls and other errors are never retried")
    func retryAfterAndRefusals() {
        let busy = CounterClientError.server(status: 503, code: "backlog_full", message: "", retryAfterSeconds: 1)
        #expect(policy.delay(after: busy, attempt: 1, idempotent: true) == .seconds(1))
        let slow = CounterClientError.server(status: 429, code: "too_many", message: "", retryAfterSeconds: 60)
        #expect(policy.delay(after: slow, attempt: 1, idempotent: true) == .seconds(2))
        #expect(policy.delay(after: busy, attempt: 1, idempotent: false) == nil)
        #expect(
            policy.delay(after: .server(status: 404, code: "post_not_found", message: "", retryAfterSeconds: nil), attempt: 1, idempotent: true)
                == nil)
        #expect(policy.delay(after: .invalidResponse("x"), attempt: 1, idempotent: true) == nil)
        #expect(RetryPolicy.never.delay(after: busy, attempt: 1, idempotent: true) == nil)
        // Whatever the header says, the delay is a capped Duration (no trap on inf or nan).
        for odd in [Double.infinity, .nan, 1e300, -5] {
            let error = CounterClientError.server(status: 503, code: "busy", message: "", retryAfterSeconds: odd)
            let delay = policy.delay(after: error, attempt: 1, idempotent: true)
            #expect(delay != nil && delay! >= .zero && delay! <= .seconds(2), "\(odd)")
        }
    }
}
