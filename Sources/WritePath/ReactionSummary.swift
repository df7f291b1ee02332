import CounterCore

/// A post's reactions as a reaction deployment answers them: each kind's count (the largest
/// first, kinds with none left out), their total, and the kinds the asking user holds.
public struct ReactionSummary: Sendable, Hashable {
    /// One kind's count.
    public struct KindCount: Sendable, Hashable {
        public let kind: ReactionKind
        public let count: Int64

        public init(kind: ReactionKind, count: Int64) {
            self.kind = kind
            self.count = count
        }
    }

    /// Every kind with a count above zero, the largest first (equal counts by name).
    public let counts: [KindCount]
    /// The sum of every kind's count.
    public let total: Int64
    /// The kinds the user holds, by name (none for a count, which names no user).
    public let mine: [ReactionKind]

    public init(counts: [KindCount], mine: [ReactionKind]) {
        self.counts = counts
        self.total = counts.reduce(0) { $0 + $1.count }
        self.mine = mine
    }

    /// The summary of a post with `likes` likes and `others` (other kinds' counts), for a user
    /// who likes it or not (`liked`) and holds `otherKinds`.
    init(likes: Int64, others: KindCounts, liked: Bool, otherKinds: [ReactionKind]) {
        var counts = others.inAnswerOrder
        var total = likes
        for item in counts { total += item.count }
        if likes > 0 {
            let like = KindCount(kind: .like, count: likes)
            counts.insert(like, at: counts.firstIndex { KindCounts.precedes(like, $0) } ?? counts.endIndex)
        }
        var mine = otherKinds
        if liked {
            mine.append(.like)
            if mine.count > 1 { mine.sort() }
        }
        self.init(counts: counts, total: total, mine: mine)
    }

    /// The count of `kind` (0 when the post holds none).
    public func count(of kind: ReactionKind) -> Int64 {
        counts.first { $0.kind == kind }?.count ?? 0
    }

    /// At most `limit` kinds, the largest first; the total stays the whole post's.
    public func top(_ limit: Int) -> ReactionSummary {
        guard counts.count > limit else { return self }
        return ReactionSummary(counts: Array(counts.prefix(max(0, limit))), total: total, mine: mine)
    }

    /// A summary as another node answered it: `counts` may be its top kinds only, `total` all.
    public init(counts: [KindCount], total: Int64, mine: [ReactionKind]) {
        self.counts = counts
        self.total = total
        self.mine = mine
    }
}
