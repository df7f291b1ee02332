import CounterClient
import Synchronization
import TestSupport

/// A stand-in for the service that holds each request until the test answers it, so a test can
/// tap while requests are in flight: the like button's (`HeldRequests`) and the reaction
/// picker's (`HeldReactionRequests`). (Pure logic under test: the models' plumbing.)
final class HeldSender<Kind: Sendable, Confirmed: Sendable>: Sendable {
    typealias Answer = Result<Confirmed, CounterClientError>
    private struct Held {
        let kind: Kind
        let continuation: CheckedContinuation<Answer, Never>
    }
    private let held = Mutex<[Held]>([])
    private let arrivals = Arrivals()

    /// The model's sender: each request is held until `answer`.
    var sender: @Sendable (Kind) async -> Answer {
        { kind in
            await withCheckedContinuation { continuation in
                self.held.withLock { $0.append(Held(kind: kind, continuation: continuation)) }
                self.arrivals.arrive()
            }
        }
    }

    /// How many requests have arrived in all.
    var count: Int { arrivals.count }

    /// Waits until `count` requests have arrived (at most 30 s: a test's assertions then fail
    /// rather than hang).
    func waitFor(_ count: Int) async { await arrivals.waitFor(count) }

    /// Answers the oldest held request and returns what it asked for.
    @discardableResult
    func answer(_ result: Answer) -> Kind? {
        guard let first = held.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return nil }
        first.continuation.resume(returning: result)
        return first.kind
    }
}

typealias HeldRequests = HeldSender<LikeStateMachine.Request.Kind, LikeStateMachine.Confirmed>
typealias HeldReactionRequests = HeldSender<ReactionStateMachine.Request.Kind, ReactionStateMachine.Confirmed>
