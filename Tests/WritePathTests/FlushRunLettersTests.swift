import CounterCore
import Persistence
import RedisDriver
import Testing

@testable import WritePath

/// The dead letters a flush run makes of the changes PostgreSQL refused (pure).
@Suite("A flush run's dead letters of refused changes (pure)")
struct FlushRunLettersTests {
    static let love = ReactionKind("love")!
    static let haha = ReactionKind("haha")!

    static func logged(_ change: LikeChange, entry: UInt64) -> LoggedLikeChange {
        LoggedLikeChange(log: "cs:{1}:log", slot: 1, entryID: StreamEntryID(milliseconds: entry, sequence: 0), change: change)
    }

    static func refused(_ change: LikeChange) -> RejectedLikeChange {
        RejectedLikeChange(change: change, sqlState: "P0001", message: "refused")
    }

    @Test(
        "a refused switch of kinds is two letters, each naming its own entry; a pair lettered once is not lettered again in the run; a like's letter names the pair's last entry"
    )
    func switchIsTwoLetters() {
        let loveGone = LikeChange(userID: 7, postID: 42, kind: Self.love, liked: false)
        let hahaHeld = LikeChange(userID: 7, postID: 42, kind: Self.haha, liked: true)
        let liked = LikeChange(userID: 8, postID: 42, liked: true)
        let unliked = LikeChange(userID: 8, postID: 42, liked: false)
        var run = FlushRun(now: .now, rescanning: [])
        run.entries = [
            Self.logged(liked, entry: 1), Self.logged(loveGone, entry: 2), Self.logged(hahaHeld, entry: 2), Self.logged(unliked, entry: 3),
        ]
        let letters = run.letters(rejected: [Self.refused(loveGone), Self.refused(hahaHeld), Self.refused(unliked)])
        #expect(
            letters.map { "\($0.change!.userID) \($0.change!.kind) \($0.change!.liked) @\($0.entryID.milliseconds)" } == [
                "7 love false @2", "7 haha true @2", "8 like false @3",
            ])
        #expect(run.knownRejected == [LikePair(userID: 7, postID: 42), LikePair(userID: 8, postID: 42)])
        #expect(run.letters(rejected: [Self.refused(hahaHeld)]).isEmpty, "the pair is a dead letter already")
    }
}
