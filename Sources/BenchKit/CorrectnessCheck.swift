/// The bench's end-of-run check: every acknowledged final state is in PostgreSQL, nothing
/// unrequested appears, and `likes_count` equals membership for every touched post. Pure: the
/// caller reads PostgreSQL.
public struct CorrectnessCheck: Sendable {
    /// One (user, post) pair — or, in a reaction check's findings, one kind of it.
    public struct Pair: Hashable, Sendable, CustomStringConvertible {
        public let user: Int64
        public let post: Int64
        /// The reaction's kind, for a finding of the reaction check; `nil` otherwise.
        public let kind: String?
        public init(user: Int64, post: Int64, kind: String? = nil) {
            self.user = user
            self.post = post
            self.kind = kind
        }
        public var description: String { "(user \(user), post \(post)\(kind.map { ", \($0)" } ?? ""))" }
    }

    /// What the harness knows of a pair after the run.
    public enum Expectation: Equatable, Sendable {
        /// The last acknowledged answer said liked / not liked.
        case liked(Bool)
        /// The last acknowledged answer of a reaction route said the user holds these kinds
        /// (by name, sorted).
        case holds([String])
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
            case (.liked, _), (.holds, _): successes += 1
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
        /// With one kind per user: answers that showed a user with several kinds, and pairs
        /// PostgreSQL holds with several.
        public var severalKindsAnswers = 0
        public var severalKindsHeld: [Pair] = []

        public var passed: Bool {
            lost.isEmpty && phantom.isEmpty && drift.isEmpty && severalKindsAnswers == 0 && severalKindsHeld.isEmpty
        }
    }

    public struct Drift: Equatable, Sendable {
        public let post: Int64
        public let likesCount: Int64
        public let rows: Int64
        /// The kind whose count drifted, in a reaction check; `nil`: `likes_count`.
        public var kind: String? = nil
    }

    /// One kind's count of a post beside its rows (`like`: `likes_count` and `likes`).
    public struct KindTally: Hashable, Sendable {
        public let post: Int64
        public let kind: String
        public init(post: Int64, kind: String) {
            self.post = post
            self.kind = kind
        }
    }

    /// The check of a reaction run: every pair holds exactly the kinds its last answer listed
    /// (a kind missing is lost, a kind more is phantom; an undetermined pair may hold any), no
    /// pair no answer touched holds any, each kind's count equals its rows, and — with
    /// `onePerUser` — no answer (`severalKindsAnswers`) and no pair in PostgreSQL shows a user
    /// with two kinds.
    public static func runReactions(
        expected: [Pair: Expectation], held: [Pair: Set<String>], counts: [KindTally: (count: Int64, rows: Int64)],
        onePerUser: Bool, severalKindsAnswers: Int
    ) -> Report {
        var report = Report()
        report.severalKindsAnswers = onePerUser ? severalKindsAnswers : 0
        for (pair, expectation) in expected {
            report.checkedPairs += 1
            let holds = held[pair] ?? []
            switch expectation {
            case .holds(let kinds):
                let wanted = Set(kinds)
                for kind in wanted.subtracting(holds) { report.lost.append(Pair(user: pair.user, post: pair.post, kind: kind)) }
                for kind in holds.subtracting(wanted) { report.phantom.append(Pair(user: pair.user, post: pair.post, kind: kind)) }
            case .liked, .either:
                report.undeterminedPairs += 1
            }
        }
        for (pair, kinds) in held {
            if expected[pair] == nil {
                for kind in kinds { report.phantom.append(Pair(user: pair.user, post: pair.post, kind: kind)) }
            }
            if onePerUser && kinds.count > 1 { report.severalKindsHeld.append(pair) }
        }
        for (tally, state) in counts where state.count != state.rows {
            report.drift.append(Drift(post: tally.post, likesCount: state.count, rows: state.rows, kind: tally.kind))
        }
        return report.sorted()
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
            case .either, .holds: report.undeterminedPairs += 1
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
        report.lost.sort { ($0.post, $0.user, $0.kind ?? "") < ($1.post, $1.user, $1.kind ?? "") }
        report.phantom.sort { ($0.post, $0.user, $0.kind ?? "") < ($1.post, $1.user, $1.kind ?? "") }
        report.drift.sort { ($0.post, $0.kind ?? "") < ($1.post, $1.kind ?? "") }
        report.severalKindsHeld.sort { ($0.post, $0.user) < ($1.post, $1.user) }
        return report
    }
}
