import Persistence
import Testing

@testable import WritePath

@Suite("Shard decisions (pure)")
struct ShardDeciderTests {
    typealias Request = ShardDecider.Request

    static func views(_ count: Int64, members: [Int64: Bool]) -> [Int64: ShardDecider.PostView] {
        [1: ShardDecider.PostView(likesCount: count, members: members)]
    }

    @Test("operations apply in arrival order; each answer reflects all earlier ones")
    func serialOrder() {
        var views = Self.views(10, members: [7: false, 8: true])
        let decision = ShardDecider.decide(
            [
                Request(operation: .toggle, postID: 1, userID: 7), // 7 likes: 11
                Request(operation: .toggle, postID: 1, userID: 7), // 7 unlikes: 10
                Request(operation: .unlike, postID: 1, userID: 8), // 8 unlikes: 9
                Request(operation: .read, postID: 1, userID: 8), // reads 9, not liked
                Request(operation: .like, postID: 1, userID: 7), // 7 likes: 10
            ], views: &views)
        #expect(decision.answers.map(\.likesCount) == [11, 10, 9, 9, 10])
        #expect(decision.answers.map(\.isLiked) == [true, false, false, false, true])
        #expect(
            decision.changes == [
                LikeChange(userID: 7, postID: 1, liked: true),
                LikeChange(userID: 7, postID: 1, liked: false),
                LikeChange(userID: 8, postID: 1, liked: false),
                LikeChange(userID: 7, postID: 1, liked: true),
            ])
        #expect(decision.changeIndex == [0, 1, 2, nil, 3])
        #expect(views[1] == ShardDecider.PostView(likesCount: 10, members: [7: true, 8: false]))
    }

    @Test(
        "like of a liker and unlike of a non-liker change nothing",
        arguments: [
            (LikeOperation.like, true), (LikeOperation.unlike, false), (LikeOperation.read, true), (LikeOperation.read, false),
        ])
    func noOps(operation: LikeOperation, member: Bool) {
        var views = Self.views(3, members: [5: member])
        let decision = ShardDecider.decide([Request(operation: operation, postID: 1, userID: 5)], views: &views)
        #expect(decision.changes.isEmpty)
        #expect(decision.answers == [LikeState(postID: 1, userID: 5, isLiked: member, likesCount: 3)])
        #expect(views[1]?.likesCount == 3)
    }

    @Test(
        "a confirm logs the membership unchanged when it is the one confirmed; otherwise nothing (a later change superseded it)",
        arguments: [
            (LikeOperation.confirmLike, true, true), (LikeOperation.confirmLike, false, false),
            (LikeOperation.confirmUnlike, false, true), (LikeOperation.confirmUnlike, true, false),
        ])
    func confirm(operation: LikeOperation, member: Bool, logs: Bool) {
        var views = Self.views(3, members: [5: member])
        let decision = ShardDecider.decide([Request(operation: operation, postID: 1, userID: 5)], views: &views)
        #expect(decision.changes == (logs ? [LikeChange(userID: 5, postID: 1, liked: member)] : []))
        #expect(decision.changeIndex == [logs ? 0 : nil])
        #expect(decision.answers == [LikeState(postID: 1, userID: 5, isLiked: member, likesCount: 3)])
        #expect(views[1] == ShardDecider.PostView(likesCount: 3, members: [5: member]))
    }

    @Test("posts are independent within a batch")
    func severalPosts() {
        var views: [Int64: ShardDecider.PostView] = [
            1: .init(likesCount: 0, members: [9: false]),
            2: .init(likesCount: 4, members: [9: true]),
        ]
        let decision = ShardDecider.decide(
            [
                Request(operation: .toggle, postID: 1, userID: 9),
                Request(operation: .toggle, postID: 2, userID: 9),
            ], views: &views)
        #expect(decision.answers.map(\.likesCount) == [1, 3])
        #expect(decision.changes.map(\.postID) == [1, 2])
    }
}
