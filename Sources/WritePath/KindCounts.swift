import CounterCore

/// A post's counts of its kinds other than `like` during a batch, kept in the order an answer
/// lists them (the largest first, equal counts by name; none at zero).
///
/// Every reaction answer carries its post's summary after the change: kept in order as each
/// change moves one count by one, a summary is a copy of a few entries instead of a dictionary
/// walked and sorted per answer.
struct KindCounts: Equatable, ExpressibleByDictionaryLiteral {
    /// The kinds above zero, in answer order.
    private(set) var inAnswerOrder: [ReactionSummary.KindCount] = []

    init() {}

    /// The counts of `counts` above zero.
    init(_ counts: [ReactionKind: Int64]) {
        inAnswerOrder = counts.filter { $0.value > 0 }.map { ReactionSummary.KindCount(kind: $0.key, count: $0.value) }
        inAnswerOrder.sort(by: Self.precedes)
    }

    init(dictionaryLiteral elements: (ReactionKind, Int64)...) {
        self.init(Dictionary(elements, uniquingKeysWith: +))
    }

    /// Distinct kinds above zero.
    var count: Int { inAnswerOrder.count }

    /// The kinds above zero by name, for Redis's counts hash.
    var byName: [(kind: ReactionKind, count: Int64)] {
        inAnswerOrder.sorted { $0.kind < $1.kind }.map { ($0.kind, $0.count) }
    }

    /// The count of `kind`, `nil` when it is zero; setting `nil` or a count below one removes it.
    subscript(kind: ReactionKind) -> Int64? {
        get { inAnswerOrder.first { $0.kind == kind }?.count }
        set {
            if let index = inAnswerOrder.firstIndex(where: { $0.kind == kind }) { inAnswerOrder.remove(at: index) }
            guard let count = newValue, count > 0 else { return }
            let entry = ReactionSummary.KindCount(kind: kind, count: count)
            let position = inAnswerOrder.firstIndex { Self.precedes(entry, $0) } ?? inAnswerOrder.endIndex
            inAnswerOrder.insert(entry, at: position)
        }
    }

    /// Whether `a` comes before `b` in an answer.
    static func precedes(_ a: ReactionSummary.KindCount, _ b: ReactionSummary.KindCount) -> Bool {
        a.count != b.count ? a.count > b.count : a.kind < b.kind
    }
}
