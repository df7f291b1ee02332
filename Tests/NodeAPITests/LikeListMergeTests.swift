import CounterCore
import CounterWire
import Persistence
import TestSupport
import Testing
import WritePath

@testable import NodeAPI

@Suite("The lists' pure parts: cursors, times, and PostgreSQL's rows merged with the changes waiting")
struct LikeListMergeTests {
    typealias Position = LikeLists.Position

    @Test("a cursor names its list and position; another list's cursor and anything else are refused")
    func cursors() throws {
        let cursor = ListCursor(kind: .likers, owner: 42, after: Position(microseconds: 1_764_825_153_123_456, id: 7))
        #expect(try ListCursor.parse(cursor.text, kind: .likers, owner: 42) == cursor)
        #expect(throws: ListCursorError.foreign) { try ListCursor.parse(cursor.text, kind: .likers, owner: 43) }
        #expect(throws: ListCursorError.foreign) { try ListCursor.parse(cursor.text, kind: .likes, owner: 42) }
        let likes = ListCursor(kind: .likes, owner: 7, after: Position(microseconds: 0, id: 1))
        #expect(try ListCursor.parse(likes.text, kind: .likes, owner: 7) == likes)
        #expect(try ListCursor.parse("bC40Mi4xLjc", kind: .likers, owner: 42).after == Position(microseconds: 1, id: 7), "l.42.1.7")
        for bad in [
            "", "!!",
            "bC40Mi4tMS43", // l.42.-1.7
            "bC40Mi4xLjA", // l.42.1.0
            "eC40Mi4xLjc", // x.42.1.7
            String(repeating: "A", count: 129),
        ] {
            #expect(throws: ListCursorError.self, "\(bad)") { try ListCursor.parse(bad, kind: .likers, owner: 42) }
        }
        // Times up to the last microsecond of year 9999; later ones (which PostgreSQL could not
        // compare, or a client made up) are not cursors.
        let last = ListCursor(kind: .likers, owner: 42, after: Position(microseconds: 253_402_300_799_999_999, id: 7))
        #expect(try ListCursor.parse(last.text, kind: .likers, owner: 42) == last)
        for microseconds: Int64 in [253_402_300_800_000_000, Int64.max] {
            let beyond = ListCursor(kind: .likers, owner: 42, after: Position(microseconds: microseconds, id: 7))
            #expect(throws: ListCursorError.malformed, "\(microseconds)") { try ListCursor.parse(beyond.text, kind: .likers, owner: 42) }
        }
    }

    @Test("an id with changes from several sources (every node's, for a user's likes) takes the newest, whichever came first")
    func newestChangeWins() throws {
        let older = PendingLike(postID: 1, userID: 7, liked: false, acknowledgedAt: 1_000)
        let newer = PendingLike(postID: 1, userID: 7, liked: true, acknowledgedAt: 2_000)
        let rows = [Position(microseconds: 500_000, id: 7)]
        for pending in [[older, newer], [newer, older]] {
            let merge = LikeListMerge(kind: .likers, pending: pending, after: nil, limit: 10)
            let page = try #require(merge.page(from: rows, rowsExhausted: true))
            #expect(page.items == [Position(microseconds: 2_000_000, id: 7)] && !page.more)
        }
    }

    @Test(
        "a user's reactions: each (post, kind) its own item; a pending change replaces only its own kind's row; ties of one microsecond by post, then kind; its cursor is its own list's"
    )
    func userReactions() throws {
        let rows = [
            Position(microseconds: 9_000_000, id: 2, kind: "like"), Position(microseconds: 9_000_000, id: 2, kind: "love"),
            Position(microseconds: 5_000_000, id: 1, kind: "like"), Position(microseconds: 5_000_000, id: 1, kind: "sad"),
        ]
        let pending = [
            PendingLike(postID: 2, userID: 7, kind: ReactionKind("love")!, liked: false, acknowledgedAt: 10_000),
            PendingLike(postID: 3, userID: 7, kind: ReactionKind("wow")!, liked: true, acknowledgedAt: 9_000),
            PendingLike(postID: 1, userID: 7, kind: .like, liked: true, acknowledgedAt: 12_000),
        ]
        let merge = LikeListMerge(kind: .reactions, pending: pending, after: nil, limit: 10)
        let page = try #require(merge.page(from: rows, rowsExhausted: true))
        #expect(
            page.items.map { "\($0.id) \($0.kind) \($0.microseconds / 1_000_000)" } == ["1 like 12", "2 like 9", "3 wow 9", "1 sad 5"],
            "\(page.items)")
        let after = Position(microseconds: 9_000_000, id: 2, kind: "like")
        let rest = LikeListMerge(kind: .reactions, pending: pending, after: after, limit: 10)
        let second = try #require(rest.page(from: Array(rows.dropFirst()), rowsExhausted: true))
        #expect(second.items.map { "\($0.id) \($0.kind)" } == ["3 wow", "1 sad"], "\(second.items)")
        let cursor = ListCursor(kind: .reactions, owner: 7, after: after)
        #expect(try ListCursor.parse(cursor.text, kind: .reactions, owner: 7) == cursor)
        #expect(throws: ListCursorError.foreign) { try ListCursor.parse(cursor.text, kind: .reactions, owner: 8) }
        #expect(throws: ListCursorError.foreign) { try ListCursor.parse(cursor.text, kind: .likes, owner: 7) }
        let likes = ListCursor(kind: .likes, owner: 7, after: Position(microseconds: 1, id: 2))
        #expect(throws: ListCursorError.foreign) { try ListCursor.parse(likes.text, kind: .reactions, owner: 7) }
        #expect(throws: ListCursorError.malformed) { try ListCursor.parse(Base64URL.encode(Array("k.7.1.2.Love".utf8)), kind: .reactions, owner: 7) }
    }

    @Test("times: RFC 3339 in UTC with milliseconds, both ways, over leap years and the epoch")
    func times() {
        #expect(LikeTime.text(milliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(LikeTime.text(milliseconds: 1_764_825_153_123) == "2025-12-04T05:12:33.123Z")
        #expect(LikeTime.text(milliseconds: 951_782_400_000) == "2000-02-29T00:00:00.000Z")
        #expect(LikeTime.text(milliseconds: -1) == "1969-12-31T23:59:59.999Z")
        for milliseconds: Int64 in [0, 1, 999, 86_399_999, 951_782_400_000, 1_764_825_153_123, 4_102_444_800_000, 253_402_300_799_999] {
            #expect(LikeTime.milliseconds(LikeTime.text(milliseconds: milliseconds)) == milliseconds)
        }
        for bad in [
            "2025-02-29T00:00:00.000Z", "2025-13-01T00:00:00.000Z", "2025-12-04T24:00:00.000Z", "2025-12-04T05:12:33Z",
            "2025-12-04 05:12:33.123Z", "2025-12-04T05:12:33.123+00:00",
        ] {
            #expect(LikeTime.milliseconds(bad) == nil, "\(bad)")
        }
    }

    /// The list as it should be: the rows, each pending change replacing its id's row.
    static func truth(rows: [Position], pending: [PendingLike]) -> [Position] {
        var byID: [Int64: Position] = Dictionary(uniqueKeysWithValues: rows.map { ($0.id, $0) })
        for change in pending {
            byID[change.userID] = change.liked ? Position(microseconds: change.acknowledgedAt * 1000, id: change.userID) : nil
        }
        return byID.values.sorted { $0.precedes($1) }
    }

    @Test("pages over random rows and pending changes, read as the API reads them, are the truth cut in pages", arguments: 0..<40)
    func randomPages(seed: Int) {
        var generator = SeededGenerator(seed: UInt64(seed) + 1)
        let users = Int64.random(in: 1...60, using: &generator)
        var rows: [Position] = []
        for user in 1...users where Bool.random(using: &generator) {
            rows.append(
                Position(microseconds: Int64.random(in: 1...20, using: &generator) * 1000 + Int64.random(in: 0...2, using: &generator), id: user))
        }
        rows.sort { $0.precedes($1) }
        var pending: [PendingLike] = []
        for user in 1...users where Int.random(in: 0..<4, using: &generator) == 0 {
            pending.append(
                PendingLike(
                    postID: 1, userID: user, liked: Bool.random(using: &generator), acknowledgedAt: Int64.random(in: 1...25, using: &generator)))
        }
        let truth = Self.truth(rows: rows, pending: pending)
        let limit = Int.random(in: 1...7, using: &generator)
        var listed: [Position] = []
        var after: Position?
        while true {
            let merge = LikeListMerge(kind: .likers, pending: pending, after: after, limit: limit)
            var read: [Position] = []
            var page: (items: [Position], more: Bool)?
            while page == nil {
                let start = read.last ?? after
                let slice = rows.filter { row in start.map { $0.precedes(row) } ?? true }.prefix(merge.rowsToRead)
                read += slice
                page = merge.page(from: read, rowsExhausted: slice.count < merge.rowsToRead)
            }
            listed += page!.items
            #expect(page!.items.count == limit || !page!.more)
            guard page!.more else { break }
            after = page!.items.last
        }
        #expect(listed == truth, "rows \(rows), pending \(pending)")
    }
}
