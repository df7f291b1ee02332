import Synchronization

@testable import NodeHTTP

/// The `respond` closures of requests a test handler holds, and a wait for the nth to arrive (a
/// continuation resumed by the handler, not a poll).
final class HeldAnswers: Sendable {
    private let state = Mutex<(held: [@Sendable (HTTPResponse) -> Void], waiters: [(count: Int, CheckedContinuation<Void, Never>)])>(([], []))

    /// How many are held now.
    var count: Int { state.withLock { $0.held.count } }

    func hold(_ respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let ready = state.withLock { state in
            state.held.append(respond)
            let count = state.held.count
            defer { state.waiters.removeAll { $0.count <= count } }
            return state.waiters.filter { $0.count <= count }.map(\.1)
        }
        for continuation in ready { continuation.resume() }
    }

    /// Returns once `count` requests are held.
    func wait(untilHolding count: Int) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.held.count >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Answers every request held so far with `response`, and forgets them.
    func answerAll(_ response: HTTPResponse) {
        let held = state.withLock { state in
            defer { state.held.removeAll() }
            return state.held
        }
        for respond in held { respond(response) }
    }
}
