import CounterCore
import Persistence
import Testing

@testable import WritePath

@Suite("Reaction decisions and their Redis writes (pure)")
struct ReactionDecisionTests {
    typealias Request = ShardDecider.Request
    static let love = ReactionKind("love")!
    static let haha = ReactionKind("haha")!
    static let wow = ReactionKind("wow")!
    static let one = ReactionModel(kinds: .fixed([.like, love, haha, wow]), perUser: .one)
    static let many = ReactionModel(kinds: .fixed([.like, love, haha, wow]), perUser: .many)

    static func view(likes: Int64 = 0, members: [Int64: Bool], counts: [ReactionKind: Int64] = [:], others: [Int64: [ReactionKind]] = [:])
        -> [Int64: ShardDecider.PostView]
    {
        [1: ShardDecider.PostView(likesCount: likes, members: members, kindCounts: KindCounts(counts), others: others)]
    }

    @Test("one per user: a new kind replaces the one held in one decision — its end, then the new kind, side by side")
    func switchReplaces() {
        var views = Self.view(likes: 1, members: [7: true, 8: false], counts: [Self.love: 1], others: [8: [Self.love]])
        let decision = ShardDecider.decide(
            [
                Request(operation: .toggle, postID: 1, userID: 7, kind: Self.love), // like → love
                Request(operation: .like, postID: 1, userID: 8, kind: Self.haha), // love → haha
                Request(operation: .toggle, postID: 1, userID: 7), // love → like
                Request(operation: .unlike, postID: 1, userID: 8, kind: Self.love), // holds haha: nothing
            ], views: &views, model: Self.one)
        #expect(
            decision.changes == [
                LikeChange(userID: 7, postID: 1, liked: false), LikeChange(userID: 7, postID: 1, kind: Self.love, liked: true),
                LikeChange(userID: 8, postID: 1, kind: Self.love, liked: false), LikeChange(userID: 8, postID: 1, kind: Self.haha, liked: true),
                LikeChange(userID: 7, postID: 1, kind: Self.love, liked: false), LikeChange(userID: 7, postID: 1, liked: true),
            ])
        #expect(decision.changeIndex == [0, 2, 4, nil])
        #expect(decision.answers.map { $0.reactions!.mine } == [[Self.love], [Self.haha], [.like], [Self.haha]])
        #expect(decision.answers.allSatisfy { $0.reactions!.total == 2 })
        #expect(decision.answers[0].reactions!.counts.map(\.kind) == [Self.love])
        #expect(decision.answers[0].reactions!.counts.first?.count == 2)
        #expect(views[1]!.likesCount == 1 && views[1]!.kindCounts == [Self.haha: 1] && views[1]!.others == [8: [Self.haha]])
    }

    @Test("many per user: each kind its own toggle; the summary lists the largest first, the user's kinds by name")
    func manyToggles() {
        var views = Self.view(likes: 3, members: [7: true], counts: [Self.wow: 3])
        let decision = ShardDecider.decide(
            [
                Request(operation: .toggle, postID: 1, userID: 7, kind: Self.love),
                Request(operation: .like, postID: 1, userID: 7, kind: Self.wow),
                Request(operation: .like, postID: 1, userID: 7, kind: Self.wow),
                Request(operation: .read, postID: 1, userID: 7),
                Request(operation: .count, postID: 1, userID: 0),
            ], views: &views, model: Self.many)
        #expect(decision.changes.count == 2)
        let summary = decision.answers[3].reactions!
        #expect(summary.counts.map(\.kind) == [Self.wow, .like, Self.love])
        #expect(summary.counts.map(\.count) == [4, 3, 1])
        #expect(summary.total == 8)
        #expect(summary.mine == [.like, Self.love, Self.wow])
        #expect(decision.answers[4].reactions!.mine.isEmpty && decision.answers[4].reactions!.total == 8)
        #expect(summary.top(2).counts.count == 2 && summary.top(2).total == 8)
    }

    @Test("an open set refuses a kind new to a post at its cap, changes nothing, and lets a switch that frees a kind through")
    func cap() {
        let model = ReactionModel(kinds: .open, perUser: .one, kindsPerPost: 2)
        var views = Self.view(likes: 1, members: [7: true, 8: false, 9: false], counts: [Self.love: 2], others: [8: [Self.love]])
        let decision = ShardDecider.decide(
            [
                Request(operation: .toggle, postID: 1, userID: 9, kind: Self.wow), // a third kind: refused
                Request(operation: .toggle, postID: 1, userID: 7, kind: Self.wow), // like's only holder: like goes, wow comes
                Request(operation: .toggle, postID: 1, userID: 9, kind: Self.love), // love is there already
            ], views: &views, model: model)
        #expect(decision.refused[0]?.code == .tooManyKinds)
        #expect(decision.refused[1] == nil && decision.refused[2] == nil)
        #expect(decision.changeIndex == [nil, 0, 2])
        #expect(views[1]!.likesCount == 0 && views[1]!.kindCounts == [Self.love: 3, Self.wow: 1])
        // Many per user: a holder's own kind does not go, so the cap holds.
        var many = Self.view(likes: 1, members: [7: true], counts: [Self.love: 1])
        let refused = ShardDecider.decide(
            [Request(operation: .toggle, postID: 1, userID: 7, kind: Self.wow)], views: &many,
            model: ReactionModel(kinds: .open, perUser: .many, kindsPerPost: 2))
        #expect(refused.refused[0]?.code == .tooManyKinds && refused.changes.isEmpty)
    }

    @Test("a log entry never parts a switch: its two changes stay in one entry at the entry size limit")
    func entryEndsKeepSwitches() {
        let changes = [
            LikeChange(userID: 1, postID: 1, liked: true),
            LikeChange(userID: 2, postID: 1, liked: false), LikeChange(userID: 2, postID: 1, kind: Self.love, liked: true),
            LikeChange(userID: 3, postID: 1, liked: true),
        ]
        #expect(BatchWrite.entryEnds(changes[...], limit: 2) == [1, 3, 4])
        #expect(BatchWrite.entryEnds(changes[...], limit: 3) == [3, 4])
        #expect(BatchWrite.entryEnds(changes[...], limit: 1) == [1, 2, 3, 4], "an entry of one change cannot hold a switch")
        // A pair's changes of one kind may part (they are not a switch).
        let plain = [LikeChange(userID: 1, postID: 1, liked: true), LikeChange(userID: 1, postID: 1, liked: false)]
        #expect(BatchWrite.entryEnds(plain[...], limit: 1) == [1, 2])
    }

    @Test("the Redis values of other kinds: kinds by name, a warm user's like flag and kinds; anything else refused")
    func values() {
        #expect(ReactionValues.kindsValue([Self.haha, Self.love]) == "haha,love")
        #expect(ReactionValues.kinds(Array("love,haha".utf8)) == [Self.haha, Self.love])
        for bad in ["", "love,", "like", "love,love", "Love", ","] { #expect(ReactionValues.kinds(Array(bad.utf8)) == nil, "\(bad)") }
        #expect(ReactionValues.warmValue(liked: true, others: []) == "1")
        #expect(ReactionValues.warmValue(liked: false, others: []) == "0")
        #expect(ReactionValues.warmValue(liked: false, others: [Self.love]) == "0:love")
        #expect(ReactionValues.warmMembership(Array("1:haha,love".utf8))! == (true, [Self.haha, Self.love]))
        #expect(ReactionValues.warmMembership(Array("0".utf8))! == (false, []))
        for bad in ["", "2", "1:", "1love", "0:like", "x"] { #expect(ReactionValues.warmMembership(Array(bad.utf8)) == nil, "\(bad)") }
    }
}
