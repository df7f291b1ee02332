import Foundation
import Synchronization
import WritePath

/// Likes, unlikes and toggles from many concurrent workers on (user, post) pairs, remembering
/// for every pair the state of its last acknowledged operation. Each worker owns its pairs and
/// sends one operation at a time, so a pair never has two operations in flight: after the load,
/// PostgreSQL must hold exactly the last acknowledged state of every pair whose last operation
/// was answered, and either state where it failed (its outcome is unknown).
package final class PairLoad: Sendable {
    package enum Expected: Equatable, Sendable {
        case liked(Bool)
        /// The last operation failed: it may or may not have taken effect.
        case either
    }

    package struct Summary: Sendable {
        package var acknowledged = 0
        package var failed = 0
        /// Failures by kind (code and the start of the message).
        package var errors: [String: Int] = [:]
    }

    private struct State {
        var expected: [Pair: Expected] = [:]
        var summary = Summary()
        var stop = false
    }

    package let posts: [Int64]
    package let hotPost: Int64
    private let state = Mutex(State())

    package init(posts: [Int64], hotPost: Int64) {
        self.posts = posts
        self.hotPost = hotPost
    }

    /// Runs `workers` workers until `stop()`; half of all operations go to the hot post. Each
    /// worker pauses `pause` between operations, so the load leaves the machine's cores to the
    /// other suites running beside it (some of which watch latencies).
    package func run(on service: CounterService, workers: Int, usersPerWorker: Int = 50, pause: Duration = .milliseconds(2)) async {
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                group.addTask {
                    var random = SystemRandomNumberGenerator()
                    while !self.state.withLock({ $0.stop }) {
                        let user = Int64(worker * usersPerWorker + Int.random(in: 1...usersPerWorker, using: &random))
                        let post = Bool.random(using: &random) ? self.hotPost : self.posts.randomElement(using: &random)!
                        let operation: LikeOperation = [.toggle, .like, .unlike, .toggle].randomElement(using: &random)!
                        let pair = Pair(user: user, post: post)
                        do {
                            let answer = try await service.perform(operation, post: post, user: user)
                            self.record(pair, .liked(answer.isLiked), error: nil)
                        } catch {
                            self.record(pair, .either, error: error)
                        }
                        try? await Task.sleep(for: pause)
                    }
                }
            }
        }
    }

    package func stop() {
        state.withLock { $0.stop = true }
    }

    /// Waits until `count` more operations than `since` were acknowledged — the load has run
    /// that far, however slow the machine — or throws after `timeout`.
    package func waitForAcknowledged(_ count: Int, since: Int = 0, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while summary.acknowledged < since + count {
            guard ContinuousClock.now < deadline else {
                throw HarnessError(
                    "the load acknowledged \(summary.acknowledged - since) operations of \(count) within \(timeout) (\(summary.errors))")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    package var expected: [Pair: Expected] { state.withLock { $0.expected } }
    package var summary: Summary { state.withLock { $0.summary } }

    private func record(_ pair: Pair, _ expected: Expected, error: Error?) {
        state.withLock { state in
            state.expected[pair] = expected
            if let error {
                state.summary.failed += 1
                let kind = (error as? CounterError).map { "\($0.code): \($0.message.prefix(60))" } ?? "\(error)".prefix(60).description
                state.summary.errors[kind, default: 0] += 1
            } else {
                state.summary.acknowledged += 1
            }
        }
    }

    /// Compares PostgreSQL's rows for the load's posts with what was acknowledged.
    /// - Returns: pairs whose acknowledged like is missing (lost), and rows nobody acknowledged
    ///   last (phantom: an acknowledged unlike undone, or a like nobody asked for).
    package func audit(rows members: Set<Pair>) -> (lost: [Pair], phantom: [Pair], undetermined: Int) {
        Self.audit(expected: expected, rows: members)
    }

    /// `expected` (each pair's last acknowledged state) against the rows PostgreSQL holds.
    package static func audit(expected: [Pair: Expected], rows members: Set<Pair>) -> (lost: [Pair], phantom: [Pair], undetermined: Int) {
        var lost: [Pair] = []
        var phantom: [Pair] = []
        var undetermined = 0
        for (pair, state) in expected {
            switch state {
            case .liked(true): if !members.contains(pair) { lost.append(pair) }
            case .liked(false): if members.contains(pair) { phantom.append(pair) }
            case .either: undetermined += 1
            }
        }
        for pair in members where expected[pair] == nil { phantom.append(pair) }
        return (lost, phantom, undetermined)
    }
}
