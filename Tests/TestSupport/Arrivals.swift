import Synchronization

/// A count of things that arrived (requests sent, requests held) that a test can wait on: a
/// waiter is resumed by the arrival that reaches its count, not by polling. The wait is bounded
/// (30 s by default) so that a test whose count never comes fails its assertions instead of
/// hanging the suite.
public final class Arrivals: Sendable {
    private struct State {
        var count = 0
        var waiters: [(id: Int, wanted: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var nextID = 0
    }
    private let state = Mutex(State())

    public init() {}

    /// How many have arrived.
    public var count: Int { state.withLock { $0.count } }

    /// Counts one arrival and resumes the waiters it satisfies.
    public func arrive() {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.count += 1
            let count = state.count
            let ready = state.waiters.filter { $0.wanted <= count }.map(\.continuation)
            state.waiters.removeAll { $0.wanted <= count }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Returns once `wanted` have arrived, or after `limit` if they never do.
    public func waitFor(_ wanted: Int, limit: Duration = .seconds(30)) async {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let bound = Task {
            try? await Task.sleep(for: limit)
            resume(id)
        }
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.count >= wanted { return true }
                state.waiters.append((id, wanted, continuation))
                return false
            }
            if now { continuation.resume() }
        }
        bound.cancel()
    }

    /// Resumes waiter `id` if it still waits (its bound ran out).
    private func resume(_ id: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index).continuation
        }
        waiter?.resume()
    }
}
