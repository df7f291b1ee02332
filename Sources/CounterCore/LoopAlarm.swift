import Synchronization

/// Where one loop sleeps until a deadline, or until another task rings, whichever comes first.
///
/// One task sleeps at a time (the loop that owns the alarm); any task may ring. A ring while
/// nobody sleeps is kept, and the next sleep returns at once, so a wake-up that races the loop
/// on its way to sleep is never lost (at worst the loop turns once more for nothing). A sleep
/// also ends when its task is cancelled, and a cancelled task's sleep returns at once.
public final class LoopAlarm: Sendable {
    private enum State {
        /// Nobody sleeps and no ring is kept.
        case quiet
        /// Rung while nobody slept: the next sleep returns at once.
        case rung
        /// The loop sleeps; resuming this wakes it.
        case sleeping(CheckedContinuation<Void, Never>)
    }

    private let state = Mutex(State.quiet)

    /// An alarm nobody has rung.
    public init() {}

    /// Wakes the sleeping loop, or, when it is not asleep, makes its next sleep return at once.
    public func ring() {
        let sleeper = state.withLock { state -> CheckedContinuation<Void, Never>? in
            switch state {
            case .sleeping(let continuation):
                state = .quiet
                return continuation
            case .quiet, .rung:
                state = .rung
                return nil
            }
        }
        sleeper?.resume()
    }

    /// Whether the loop is asleep on the alarm now, so a ring wakes it rather than being kept
    /// for its next sleep. Only tests read it: to show that a ring wakes a sleeping loop, they
    /// must ring once the loop sleeps, not while it is still on its way to sleep.
    package var hasSleeper: Bool {
        state.withLock { state in
            if case .sleeping = state { return true }
            return false
        }
    }

    /// Returns at `deadline` (never, when it is `nil`), once the alarm rings, or once the task is
    /// cancelled, whichever comes first.
    public func sleep(until deadline: ContinuousClock.Instant?) async {
        guard let deadline else { return await waitForRing() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // Rings at the deadline, unless the wait below ended first and cancelled this.
                if (try? await Task.sleep(until: deadline, clock: .continuous)) != nil { self.ring() }
            }
            await waitForRing()
            group.cancelAll()
        }
    }

    private func waitForRing() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeAtOnce = state.withLock { state -> Bool in
                    if case .rung = state {
                        state = .quiet
                        return true
                    }
                    // Checked under the lock: a cancellation after this finds the continuation.
                    if Task.isCancelled { return true }
                    state = .sleeping(continuation)
                    return false
                }
                if resumeAtOnce { continuation.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard case .sleeping(let continuation) = state else { return nil }
                state = .quiet
                return continuation
            }
            sleeper?.resume()
        }
    }
}
