import CounterCore
import Testing

@Suite("Reconnect backoff")
struct ReconnectBackoffTests {
    @Test("delays double from the initial value up to the cap, and start over after a reset")
    func doublesAndCaps() {
        var backoff = ReconnectBackoff(initial: .milliseconds(50), maximum: .milliseconds(300))
        let delays = (0..<5).map { _ in backoff.nextDelay() }
        #expect(delays == [.milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(300), .milliseconds(300)])
        backoff.reset()
        #expect(backoff.nextDelay() == .milliseconds(50))
    }
}
