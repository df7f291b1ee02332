import CounterCore
import Persistence
import RedisDriver
import Testing

@Suite("Write-behind log entry format (pure)")
struct ChangeLogEntryTests {
    static func entry(_ fields: [String: String]) -> StreamEntry {
        StreamEntry(id: StreamEntryID(milliseconds: 1, sequence: 0), fields: fields.mapValues { Array($0.utf8) })
    }

    @Test("a batch packs into one field, grouped by post in first-seen order, each post's changes in order")
    func packs() {
        let changes = [
            LikeChange(userID: 7, postID: 42, liked: true), LikeChange(userID: 1, postID: 43, liked: true),
            LikeChange(userID: 9, postID: 42, liked: true), LikeChange(userID: 7, postID: 42, liked: false),
        ]
        #expect(String(decoding: ChangeLogEntry.pack(changes), as: UTF8.self) == "42+7+9-7 43+1")
        #expect(ChangeLogEntry.append(changes, to: "log") == .xadd("log", fields: [("c", "42+7+9-7 43+1")]))
        // A single change keeps the one-change form, which Redis stores smaller.
        #expect(ChangeLogEntry.append(changes.prefix(1), to: "log") == .xadd("log", fields: [("u", Int64(7)), ("p", Int64(42)), ("l", "1")]))
        // Read back: the same changes per pair, in the same order within each pair.
        let read = ChangeLogEntry.unpack(ChangeLogEntry.pack(changes))
        #expect(read == [changes[0], changes[2], changes[3], changes[1]])
    }

    @Test("ids up to Int64.max round-trip; random batches read back with each pair's changes in order")
    func roundTrips() {
        let extreme = [LikeChange(userID: .max, postID: .max, liked: false), LikeChange(userID: 1, postID: 1, liked: true)]
        #expect(ChangeLogEntry.unpack(ChangeLogEntry.pack(extreme)) == extreme)
        var random = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let changes = (0..<Int.random(in: 1...50, using: &random)).map { _ in
                LikeChange(userID: .random(in: 1...5, using: &random), postID: .random(in: 1...4, using: &random), liked: .random(using: &random))
            }
            let read = ChangeLogEntry.unpack(ChangeLogEntry.pack(changes))
            #expect(read?.count == changes.count)
            for post: Int64 in 1...4 {
                #expect(read?.filter { $0.postID == post } == changes.filter { $0.postID == post })
            }
        }
    }

    @Test("a kind other than like is grouped by post and kind after a colon; likes stay as they were; each group's order is kept")
    func packsKinds() throws {
        let love = try #require(ReactionKind("love"))
        let party = try #require(ReactionKind("party_parrot_2"))
        let changes = [
            LikeChange(userID: 7, postID: 42, kind: love, liked: true), LikeChange(userID: 7, postID: 42, liked: false),
            LikeChange(userID: 9, postID: 42, kind: love, liked: true), LikeChange(userID: 1, postID: 43, kind: party, liked: true),
            LikeChange(userID: 9, postID: 42, kind: love, liked: false),
        ]
        let text = String(decoding: ChangeLogEntry.pack(changes), as: UTF8.self)
        #expect(text == "42:love+7+9-9 42-7 43:party_parrot_2+1")
        let read = try #require(ChangeLogEntry.unpack(Array(text.utf8)))
        #expect(read == [changes[0], changes[2], changes[4], changes[1], changes[3]])
        // The one-change form names a kind other than like with `k`, and reads it back.
        let fields = ChangeLogEntry.fields(of: changes[0])
        #expect(fields.map(\.0) == ["u", "p", "l", "k"])
        #expect(ChangeLogEntry.change(from: Self.entry(["u": "7", "p": "42", "l": "1", "k": "love"])) == changes[0])
        #expect(ChangeLogEntry.change(from: Self.entry(["u": "7", "p": "42", "l": "1", "k": "like"])) == nil)
        #expect(ChangeLogEntry.change(from: Self.entry(["u": "7", "p": "42", "l": "1", "k": "Love"])) == nil)
        // Random batches of several kinds read back with each (post, kind)'s changes in order.
        var random = SystemRandomNumberGenerator()
        let kinds: [ReactionKind] = [.like, love, party]
        for _ in 0..<200 {
            let batch = (0..<Int.random(in: 1...50, using: &random)).map { _ in
                LikeChange(
                    userID: .random(in: 1...5, using: &random), postID: .random(in: 1...3, using: &random),
                    kind: kinds.randomElement(using: &random)!, liked: .random(using: &random))
            }
            let again = ChangeLogEntry.unpack(ChangeLogEntry.pack(batch))
            #expect(again?.count == batch.count)
            for post: Int64 in 1...3 {
                for kind in kinds {
                    #expect(again?.filter { $0.postID == post && $0.kind == kind } == batch.filter { $0.postID == post && $0.kind == kind })
                }
            }
        }
    }

    @Test(
        "malformed kinds in packed values are refused whole",
        arguments: [
            "42:+7", "42:like+7", "42:Love+7", "42:love", "42:love:haha+7", "42+7:love", ":love+7", "42:lo-ve+7",
            "42:abcdefghijklmnopqrstuvwxyz0123456+7", "42:love+7 43:", "42:love+7x",
        ])
    func malformedKinds(text: String) {
        #expect(ChangeLogEntry.unpack(Array(text.utf8)) == nil)
    }

    @Test(
        "malformed packed values are refused whole",
        arguments: [
            "", " ", "42", "42+", "+7", "42+7 ", " 42+7", "42+7  43+1", "0+7", "42+0", "42*7", "42+7x", "42++7",
            "42+99999999999999999999", "99999999999999999999+1", "42+7 43", "-1+7",
        ])
    func malformed(text: String) {
        #expect(ChangeLogEntry.unpack(Array(text.utf8)) == nil)
        #expect(ChangeLogEntry.changes(from: Self.entry(["c": text])) == nil)
    }

    @Test("entries of the one-change form (written before packing, and dead letters) still read")
    func oneChangeForm() {
        #expect(ChangeLogEntry.changes(from: Self.entry(["u": "7", "p": "42", "l": "1"])) == [LikeChange(userID: 7, postID: 42, liked: true)])
        #expect(ChangeLogEntry.changes(from: Self.entry(["u": "7", "p": "42", "l": "0"])) == [LikeChange(userID: 7, postID: 42, liked: false)])
        #expect(ChangeLogEntry.change(from: Self.entry(["u": "7", "p": "42", "l": "0"])) == LikeChange(userID: 7, postID: 42, liked: false))
        #expect(ChangeLogEntry.changes(from: Self.entry(["u": "7", "p": "42", "l": "2"])) == nil)
        #expect(ChangeLogEntry.changes(from: Self.entry(["u": "x", "p": "42", "l": "1"])) == nil)
        #expect(ChangeLogEntry.changes(from: Self.entry([:])) == nil)
        // A packed field beside others is neither form.
        #expect(ChangeLogEntry.changes(from: Self.entry(["c": "42+7", "u": "7"])) == nil)
    }

    @Test(
        "a change with a time of its own carries it as `t` in the one-change form; an entry without `t` has no time of its own; a bad `t` is refused")
    func acknowledgementTime() {
        let timed = LikeChange(userID: 7, postID: 42, liked: true, acknowledgedAt: 1_733_300_000_123)
        let fields = ChangeLogEntry.fields(of: timed)
        #expect(fields.map(\.0) == ["u", "p", "l", "t"])
        #expect(ChangeLogEntry.change(from: Self.entry(["u": "7", "p": "42", "l": "1", "t": "1733300000123"])) == timed)
        #expect(ChangeLogEntry.change(from: Self.entry(["u": "7", "p": "42", "l": "1"]))?.acknowledgedAt == nil)
        #expect(ChangeLogEntry.change(from: Self.entry(["u": "7", "p": "42", "l": "1", "t": "x"])) == nil)
        #expect(ChangeLogEntry.change(from: Self.entry(["u": "7", "p": "42", "l": "1", "t": "0"])) == nil)
        // An untimed change has no `t`: the entry is what an older version wrote and reads.
        #expect(ChangeLogEntry.fields(of: LikeChange(userID: 7, postID: 42, liked: true)).map(\.0) == ["u", "p", "l"])
        // A flushed change's time is its own, or else its entry's.
        let entryID = StreamEntryID(milliseconds: 55, sequence: 3)
        #expect(LoggedLikeChange(log: "l", slot: 0, entryID: entryID, change: timed).acknowledgedAt == 1_733_300_000_123)
        #expect(LoggedLikeChange(log: "l", slot: 0, entryID: entryID, change: LikeChange(userID: 7, postID: 42, liked: true)).acknowledgedAt == 55)
    }

    @Test("entry runs: untimed changes stay together, each timed change is alone, decision order kept")
    func entryRuns() {
        let plain = (1...3).map { LikeChange(userID: $0, postID: 42, liked: true) }
        #expect(ChangeLogEntry.entryRuns(plain).map(Array.init) == [plain])
        let timed = LikeChange(userID: 9, postID: 42, liked: false, acknowledgedAt: 1_000)
        let mixed = [plain[0], timed, plain[1], plain[2], timed]
        #expect(ChangeLogEntry.entryRuns(mixed).map(Array.init) == [[plain[0]], [timed], [plain[1], plain[2]], [timed]])
        #expect(ChangeLogEntry.entryRuns([timed]).map(Array.init) == [[timed]])
        #expect(Array(ChangeLogEntry.entryRuns(mixed).joined()) == mixed)
    }
}
