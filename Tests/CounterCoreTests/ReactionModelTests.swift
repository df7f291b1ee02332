import CounterCore
import Testing

@Suite("Reaction kinds and the reaction model (pure)")
struct ReactionModelTests {
    @Test("a kind is 1-32 characters of a-z, 0-9 and _", arguments: ["like", "love", "a", "tada_2", "0", String(repeating: "x", count: 32)])
    func validNames(name: String) throws {
        let kind = try #require(ReactionKind(name))
        #expect(kind.name == name)
        #expect(kind.isLike == (name == "like"))
    }

    @Test(
        "anything else is not a kind",
        arguments: ["", "Like", "lo ve", "love!", "é", "-", "lo-ve", "love\n", String(repeating: "x", count: 33), "👍"])
    func invalidNames(name: String) {
        #expect(ReactionKind(name) == nil)
    }

    @Test("the default model is likes only; a fixed list and open parse, bad lists are refused with a reason")
    func parsesKinds() throws {
        #expect(ReactionModel.likesOnly.isLikesOnly)
        #expect(!ReactionModel.likesOnly.isOnePerUser)
        #expect(ReactionModel.likesOnly.allows(.like))
        #expect(!ReactionModel.likesOnly.allows(try #require(ReactionKind("love"))))
        #expect(ReactionModel.parseKinds("open") == .success(.open))
        let six = try ReactionModel.parseKinds("like,love,haha,wow,sad,angry").get()
        guard case .fixed(let list) = six else {
            Issue.record("not a fixed list")
            return
        }
        #expect(list.map(\.name) == ["like", "love", "haha", "wow", "sad", "angry"])
        let model = ReactionModel(kinds: six, perUser: .one)
        #expect(!model.isLikesOnly && model.isOnePerUser)
        #expect(model.description == "like,love,haha,wow,sad,angry one 20/20")
        #expect(ReactionModel(kinds: .open, perUser: .many).description == "open many 20/20")
        for bad in ["", "like,", "like,,love", "Like", "like,like", "like love"] {
            guard case .failure(let error) = ReactionModel.parseKinds(bad) else {
                Issue.record("'\(bad)' was accepted")
                continue
            }
            #expect(!error.message.isEmpty)
        }
    }
}
