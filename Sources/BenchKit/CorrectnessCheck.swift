/// The bench's end-of-run check: every acknowledged final state is in PostgreSQL, nothing
/// unrequested appears, and `likes_count` equals membership for every touched post. Pure: the
/// caller reads PostgreSQL.
public struct CorrectnessCheck: Sendable {
    /// One (user, post) pair.
    public struct Pair: Hashable, Sendable, CustomStringConvertible {
        public let user: Int64
        public let post: Int64
        public init(user: Int64, post: Int64) {
            self.user = user
            self.post = post
        }
        public var description: String { "(user \(user), post \(post))" }
    }

    /// What the harness knows of a pair after the run.
    public enum Expectation: Equatable, Sendable {
        /// The last acknowledged answer said liked / not liked.
        case liked(Bool)
        /// A request failed or timed out after the last acknowledgement: either state is allowed.
        case either
    }

    /// A pair's toggles, for the check by parity: from a pair no one liked before, each toggle
    /// that succeeded flips it once, whatever order concurrent toggles took, so it ends liked
    /// exactly when their number is odd. A refusal (`4xx`) changed nothing; a `5xx` or a request
    /// without an answer may have, and leaves the pair undetermined.
    public struct ToggleTally: Equatable, Sendable {
        public var successes = 0
        public var uncertain = false
        public init(successes: Int = 0, uncertain: Bool = false) {
            self.successes = successes
            self.uncertain = uncertain
        }

        mutating func record(expectation: Expectation, status: Int?) {
            switch (expectation, status) {
            case (.liked, _): successes += 1
            case (.either, let status?) where (400..<500).contains(status) && status != 408: break
            case (.either, _): uncertain = true
            }
        }
    }

    public struct Report: Equatable, Sendable {
        public var lost: [Pair] = []
        public var phantom: [Pair] = []
        /// Posts whose `likes_count` differs from their `likes` rows: (post, count, rows).
        public var drift: [Drift] = []
        public var checkedPairs = 0
        public var undeterminedPairs = 0

        public var passed: Bool { lost.isEmpty && phantom.isEmpty && drift.isEmpty }
    }

    public struct Drift: Equatable, Sendable {
        public let post: Int64
        public let likesCount: Int64
        public let rows: Int64
    }

    /// - Parameters:
    ///   - expected: what each touched pair should be.
    ///   - baseline: pairs that were liked before the run (allowed to stay if never touched).
    ///   - members: pairs liked in PostgreSQL after the run, for the touched posts.
    ///   - counts: `likes_count` and the number of `likes` rows per touched post.
    public static func run(
        expected: [Pair: Expectation], baseline: Set<Pair>, members: Set<Pair>,
        counts: [Int64: (likesCount: Int64, rows: Int64)]
    ) -> Report {
        var report = Report()
        for (pair, expectation) in expected {
            report.checkedPairs += 1
            switch expectation {
            case .liked(true): if !members.contains(pair) { report.lost.append(pair) }
            case .liked(false): if members.contains(pair) { report.phantom.append(pair) }
            case .either: report.undeterminedPairs += 1
            }
        }
        for pair in members where expected[pair] == nil && !baseline.contains(pair) {
            report.phantom.append(pair)
        }
        for (post, state) in counts where state.likesCount != state.rows {
            report.drift.append(Drift(post: post, likesCount: state.likesCount, rows: state.rows))
        }
        return report.sorted()
    }

    /// The check for toggles of the same pairs by several connections at once (pairs no one
    /// liked before the run): a pair ends liked exactly when an odd number of its toggles
    /// succeeded; an undetermined pair may end either way. Counts must equal rows as always.
    public static func runByParity(
        toggles: [Pair: ToggleTally], members: Set<Pair>,
        counts: [Int64: (likesCount: Int64, rows: Int64)]
    ) -> Report {
        var report = Report()
        for (pair, tally) in toggles {
            report.checkedPairs += 1
            if tally.uncertain {
                report.undeterminedPairs += 1
                continue
            }
            let liked = tally.successes % 2 == 1
            if liked && !members.contains(pair) { report.lost.append(pair) }
            if !liked && members.contains(pair) { report.phantom.append(pair) }
        }
        for pair in members where toggles[pair] == nil { report.phantom.append(pair) }
        for (post, state) in counts where state.likesCount != state.rows {
            report.drift.append(Drift(post: post, likesCount: state.likesCount, rows: state.rows))
        }
        return report.sorted()
    }
}

extension CorrectnessCheck.Report {
    func sorted() -> Self {
        var report = self
        report.lost.sort { ($0.post, $0.user) < ($1.post, $1.user) }
        report.phantom.sort { ($0.post, $0.user) < ($1.post, $1.user) }
        report.drift.sort { $0.post < $1.post }
        return report
    }
}
