import CounterCore
import TestSupport
import Testing

@testable import WritePath

@Suite("A post's kind counts kept in answer order (pure)")
struct KindCountsTests {
    static let kinds = ["love", "haha", "wow", "sad", "angry", "tada"].map { ReactionKind($0)! }

    /// The order an answer lists them in, computed the long way: every count above zero, sorted.
    static func reference(_ counts: [ReactionKind: Int64]) -> [ReactionSummary.KindCount] {
        counts.filter { $0.value > 0 }.map { ReactionSummary.KindCount(kind: $0.key, count: $0.value) }
            .sorted { $0.count != $1.count ? $0.count > $1.count : $0.kind < $1.kind }
    }

    @Test("each step of one up or down keeps the order a sort of the counts gives, seed after seed")
    func stepsKeepTheOrder() {
        for seed in 1...20 {
            var random = SeededGenerator(seed: UInt64(seed))
            var counts = KindCounts()
            var truth: [ReactionKind: Int64] = [:]
            for _ in 0..<400 {
                let kind = Self.kinds[Int(random.next() % UInt64(Self.kinds.count))]
                let step: Int64 = random.next() % 3 == 0 ? -1 : 1
                let next = (truth[kind] ?? 0) + step
                truth[kind] = next > 0 ? next : nil
                counts[kind] = next > 0 ? next : nil
                #expect(counts.inAnswerOrder == Self.reference(truth), "seed \(seed)")
                #expect(counts[kind] == truth[kind])
                #expect(counts.count == truth.count)
            }
            #expect(counts == KindCounts(truth))
            #expect(counts.byName.map(\.kind) == truth.keys.sorted())
        }
    }

    @Test("a summary puts like in its place among the other kinds, and totals them all")
    func summaryPlacesLike() {
        let love = Self.kinds[0]
        let wow = Self.kinds[2]
        let counts: KindCounts = [love: 3, wow: 1]
        let summary = ReactionSummary(likes: 2, others: counts, liked: true, otherKinds: [wow])
        #expect(summary.counts.map(\.kind) == [love, .like, wow])
        #expect(summary.total == 6)
        #expect(summary.mine == [.like, wow])
        // Equal counts go by name: "like" before "love".
        let tied = ReactionSummary(likes: 3, others: counts, liked: false, otherKinds: [])
        #expect(tied.counts.map(\.kind) == [.like, love, wow])
        #expect(ReactionSummary(likes: 0, others: [:], liked: false, otherKinds: []).counts.isEmpty)
    }
}
