import CounterClient
import Foundation
import Testing

@Suite("Reaction picker model")
@MainActor
struct ReactionPickerModelTests {
    typealias Confirmed = ReactionStateMachine.Confirmed

    static func state(_ mine: Set<String>, _ counts: [String: Int64]) -> HeldReactionRequests.Answer {
        .success(Confirmed(mine: mine, counts: counts))
    }

    /// What the picker shows, as `kind: count` pairs in display order.
    static func shown(_ model: ReactionPickerModel) -> [String] {
        model.counts.map { "\($0.kind):\($0.count)" }
    }

    @Test("one per user: a switch shows as one step — both counts move at once — and is one request")
    func switchIsOneStep() async {
        let service = HeldReactionRequests()
        let model = ReactionPickerModel(
            post: 1, user: 7, mode: .one, mine: ["love"], counts: ["love": 4, "like": 10], send: service.sender)
        var events: [ReactionPickerModel.Event] = []
        model.onEvent = { events.append($0) }
        #expect(Self.shown(model) == ["like:10", "love:4"] && model.total == 14 && model.mine == ["love"])
        model.tap("haha")
        #expect(model.mine == ["haha"] && model.isMine("haha") && !model.isMine("love"))
        #expect(Self.shown(model) == ["like:10", "love:3", "haha:1"] && model.total == 14 && model.isSending)
        await service.waitFor(1)
        #expect(service.answer(Self.state(["haha"], ["like": 10, "love": 3, "haha": 1])) == .set(kind: "haha", reacted: true))
        await model.settled()
        #expect(service.count == 1)
        #expect(Self.shown(model) == ["like:10", "love:3", "haha:1"] && model.mine == ["haha"] && !model.isSending)
        let confirmed = Confirmed(mine: ["haha"], counts: ["like": 10, "love": 3, "haha": 1])
        #expect(events == [.succeeded(confirmed)])
        #expect(model.lastEvent == .succeeded(confirmed) && model.eventCount == 1)
    }

    @Test("taps during a request are coalesced into one follow-up request carrying the last wish")
    func coalescing() async {
        let service = HeldReactionRequests()
        let model = ReactionPickerModel(post: 1, user: 7, mode: .one, mine: [], counts: ["like": 2], send: service.sender)
        model.tap("love")
        model.tap("wow")
        model.tap("haha")
        #expect(model.mine == ["haha"] && model.count(of: "love") == 0 && model.count(of: "haha") == 1 && model.total == 3)
        await service.waitFor(1)
        // Others reacted meanwhile; the user's latest wish still shows.
        #expect(service.answer(Self.state(["love"], ["like": 5, "love": 1])) == .set(kind: "love", reacted: true))
        await service.waitFor(2)
        #expect(model.mine == ["haha"] && Self.shown(model) == ["like:5", "haha:1"] && model.isSending)
        #expect(model.eventCount == 0, "no success while the wish is not confirmed")
        #expect(service.answer(Self.state(["haha"], ["like": 5, "haha": 1])) == .set(kind: "haha", reacted: true))
        await model.settled()
        #expect(service.count == 2)
        #expect(model.mine == ["haha"] && Self.shown(model) == ["like:5", "haha:1"] && !model.isSending)
        #expect(model.lastEvent == .succeeded(Confirmed(mine: ["haha"], counts: ["like": 5, "haha": 1])) && model.eventCount == 1)
    }

    @Test("a refused request rolls the picker back to what the service last confirmed, and reports .failed")
    func rollback() async {
        let service = HeldReactionRequests()
        let model = ReactionPickerModel(post: 1, user: 7, mode: .one, mine: [], counts: ["love": 1], send: service.sender)
        model.tap("love")
        await service.waitFor(1)
        service.answer(Self.state(["love"], ["love": 5, "wow": 2])) // confirmed: others reacted too
        await model.settled()
        model.tap("haha")
        #expect(model.mine == ["haha"] && Self.shown(model) == ["love:4", "wow:2", "haha:1"])
        await service.waitFor(2)
        let refused = CounterClientError.server(status: 409, code: "too_many_kinds", message: "full", retryAfterSeconds: nil)
        #expect(service.answer(.failure(refused)) == .set(kind: "haha", reacted: true))
        await model.settled()
        #expect(model.mine == ["love"] && Self.shown(model) == ["love:5", "wow:2"] && model.total == 7 && !model.isSending)
        #expect(model.lastEvent == .failed(refused) && model.eventCount == 2)
        #expect(service.count == 2, "a refusal is not followed by a read")
    }

    @Test("after a failure whose outcome is unknown the picker reads the service, and a tap made meanwhile is kept and sent")
    func refreshKeepsNewerTap() async {
        let service = HeldReactionRequests()
        let model = ReactionPickerModel(post: 1, user: 7, mode: .one, mine: ["love"], counts: ["love": 1], send: service.sender)
        var events: [ReactionPickerModel.Event] = []
        model.onEvent = { events.append($0) }
        model.tap("wow")
        await service.waitFor(1)
        let unknown = CounterClientError.connection(message: "reset", requestMayHaveSucceeded: true)
        service.answer(.failure(unknown))
        await service.waitFor(2)
        #expect(model.mine == ["love"] && model.isSending, "rolled back while the read is out")
        #expect(events == [.failed(unknown)])
        model.tap("haha")
        #expect(model.mine == ["haha"])
        // The service did apply the wow; the user wants haha now: the read's answer leads there.
        #expect(service.answer(Self.state(["wow"], ["wow": 1])) == .refresh)
        await service.waitFor(3)
        #expect(model.mine == ["haha"] && Self.shown(model) == ["haha:1"])
        #expect(service.answer(Self.state(["haha"], ["haha": 1])) == .set(kind: "haha", reacted: true))
        await model.settled()
        #expect(service.count == 3)
        #expect(model.mine == ["haha"] && Self.shown(model) == ["haha:1"] && !model.isSending)
        #expect(events == [.failed(unknown), .succeeded(Confirmed(mine: ["haha"], counts: ["haha": 1]))])
    }

    @Test("many per user: two kinds toggled are two requests, both shown at once")
    func manyKinds() async {
        let service = HeldReactionRequests()
        let model = ReactionPickerModel(post: 1, user: 7, mode: .many, mine: ["like"], counts: ["like": 2], send: service.sender)
        model.tap("love")
        model.tap("like")
        #expect(model.mine == ["love"] && Self.shown(model) == ["like:1", "love:1"])
        await service.waitFor(1)
        #expect(service.answer(Self.state(["like", "love"], ["like": 2, "love": 1])) == .set(kind: "love", reacted: true))
        await service.waitFor(2)
        #expect(service.answer(Self.state(["love"], ["like": 1, "love": 1])) == .set(kind: "like", reacted: false))
        await model.settled()
        #expect(service.count == 2)
        #expect(model.mine == ["love"] && Self.shown(model) == ["like:1", "love:1"])
        // Adding a second kind keeps the first: many per user.
        model.tap("wow")
        #expect(model.mine == ["love", "wow"] && model.total == 3)
        await service.waitFor(3)
        #expect(service.answer(Self.state(["love", "wow"], ["like": 1, "love": 1, "wow": 1])) == .set(kind: "wow", reacted: true))
        await model.settled()
        #expect(model.mine == ["love", "wow"] && model.eventCount == 2)
    }

    @Test("a state reported elsewhere is taken while idle and ignored while a request is in flight")
    func serverReports() async {
        let service = HeldReactionRequests()
        let model = ReactionPickerModel(post: 1, user: 7, mode: .one, mine: [], counts: [:], send: service.sender)
        model.apply(ReactionStatus(postID: 1, userID: 7, reactions: [.init(kind: "love", count: 3)], total: 3, mine: ["love"]))
        #expect(model.mine == ["love"] && Self.shown(model) == ["love:3"])
        // A feed entry asked without reactions says nothing of them.
        model.apply(FeedEntry(postID: 1, likesCount: 0, isLiked: false))
        #expect(model.mine == ["love"] && Self.shown(model) == ["love:3"])
        model.tap("like")
        model.apply(FeedEntry(postID: 1, likesCount: 0, isLiked: false, reactions: [], total: 0, mine: []))
        #expect(model.mine == ["like"] && Self.shown(model) == ["love:2", "like:1"], "ignored while a request is in flight")
        await service.waitFor(1)
        service.answer(Self.state(["like"], ["like": 1, "love": 2]))
        await model.settled()
        model.apply(FeedEntry(postID: 1, likesCount: 1, isLiked: true, reactions: [.init(kind: "like", count: 4)], total: 4, mine: ["like"]))
        #expect(model.mine == ["like"] && Self.shown(model) == ["like:4"])
    }

    @Test(
        "through the client: a kind's wish is PUT/DELETE for the named user or the signed-in one; an unknown outcome is followed by a read",
        arguments: [Int64(7), nil] as [Int64?])
    func throughClient(user: Int64?) async throws {
        let summary = #"{"post_id":1,"user_id":7,"reactions":{"like":10,"haha":1},"total":11,"mine":["haha"]}"#
        // One answer, then the transport breaks (a connection reset: the outcome is unknown).
        let transport = CannedTransport([.init(status: 200, body: summary)])
        var configuration =
            if user == nil {
                CounterServiceClient.Configuration(baseURL: URL(string: "http://127.0.0.1:9")!, userToken: { _ in "user-token-0123456789" })
            } else {
                CounterServiceClient.Configuration(baseURL: URL(string: "http://127.0.0.1:9")!, apiToken: "api-token-0123456789")
            }
        configuration.retry = .never
        let client = CounterServiceClient(configuration: configuration, transport: transport)
        let model = ReactionPickerModel(post: 1, user: user, mode: .one, mine: [], counts: ["like": 10], client: client)
        model.tap("haha")
        await model.settled()
        #expect(
            model.mine == ["haha"] && model.total == 11 && model.lastEvent == .succeeded(Confirmed(mine: ["haha"], counts: ["like": 10, "haha": 1])))
        model.tap("haha")
        #expect(model.mine.isEmpty && model.total == 10)
        await model.settled() // the DELETE fails, then the read fails too: back to the confirmed state
        #expect(model.mine == ["haha"] && model.total == 11)
        guard case .failed(let error)? = model.lastEvent else {
            Issue.record("no failure event")
            return
        }
        #expect(error.outcomeUnknown, "\(error)")
        let sent = transport.sent.map { "\($0.httpMethod ?? "?") \($0.url?.path ?? "?")\($0.url?.query.map { "?\($0)" } ?? "")" }
        if let user {
            #expect(
                sent == [
                    "PUT /v1/posts/1/reactions/haha/users/\(user)", "DELETE /v1/posts/1/reactions/haha/users/\(user)",
                    "GET /v1/posts/1/reactions?user=\(user)",
                ])
            #expect(transport.sent.allSatisfy { $0.value(forHTTPHeaderField: "Authorization") == "Bearer api-token-0123456789" })
        } else {
            #expect(sent == ["PUT /v1/posts/1/reactions/haha", "DELETE /v1/posts/1/reactions/haha", "GET /v1/posts/1/reactions"])
            #expect(transport.sent.allSatisfy { $0.value(forHTTPHeaderField: "Authorization") == "Bearer user-token-0123456789" })
        }
    }

    @Test("a feed of pickers: one query asks for reactions, seeds a picker per post, and refreshes the same pickers")
    func feed() async throws {
        let page =
            #"{"posts":[{"post_id":1,"likes_count":10,"is_liked":false,"reactions":{"like":10,"love":3},"total":13,"mine":["love"]},"#
            + #"{"post_id":2,"likes_count":0,"is_liked":false,"reactions":{},"total":0,"mine":[]}]}"#
        let again = #"{"posts":[{"post_id":1,"likes_count":11,"is_liked":true,"reactions":{"like":11,"love":2},"total":13,"mine":["like"]}]}"#
        let transport = CannedTransport([.init(status: 200, body: page), .init(status: 200, body: again)])
        let feed = ReactionFeedModel(mode: .one, user: 7, client: ClientTests.client(transport))
        let pickers = try await feed.load(posts: [1, 2, 3])
        #expect(pickers.map(\.postID) == [1, 2] && feed.pickers.count == 2)
        let first = try #require(feed.pickers[1])
        #expect(first.mine == ["love"] && Self.shown(first) == ["like:10", "love:3"] && first.mode == .one && first.userID == 7)
        #expect(feed.pickers[2]?.counts.isEmpty == true && feed.pickers[2]?.total == 0)
        let body = try #require(transport.sent.first?.httpBody)
        let query = try JSONDecoder().decode(FeedQuery.self, from: body)
        #expect(query.include == [FeedQuery.reactions] && query.postIDs == [1, 2, 3] && query.userID == 7)
        try await feed.load(posts: [1])
        #expect(feed.pickers[1] === first)
        #expect(first.mine == ["like"] && Self.shown(first) == ["like:11", "love:2"])
    }
}
