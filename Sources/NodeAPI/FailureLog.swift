import CounterCore
import Synchronization

/// Logs the failures the API's answers do not detail (`request_failed`, warn): the first at once,
/// then at most one a second, with how many came in between — so an outage logs its cause
/// without a line per request.
final class FailureLog: Sendable {
    private struct State {
        var lastLogged: ContinuousClock.Instant?
        var suppressed = 0
    }

    private let log: NodeLog
    private let state = Mutex(State())

    init(log: NodeLog) {
        self.log = log
    }

    func note(route: String, error: Error, now: ContinuousClock.Instant = .now) {
        let suppressed = state.withLock { state -> Int? in
            if let last = state.lastLogged, now - last < .seconds(1) {
                state.suppressed += 1
                return nil
            }
            defer {
                state.lastLogged = now
                state.suppressed = 0
            }
            return state.suppressed
        }
        guard let suppressed else { return }
        log.log(.warn, "request_failed", ["route": route, "error": "\(error)", "more_since_last": String(suppressed)])
    }
}
