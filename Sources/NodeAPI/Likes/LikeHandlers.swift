import CounterWire
import NodeHTTP
import ShardRouter
import WritePath

/// The likes' handlers beside the hot ones (`LikeRoute`): a post's count and a feed page.
enum LikeHandlers {
    /// `GET /v1/posts/{post}`: the post's count.
    static func count(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        let state = try await api.service.perform(.count, post: request.ids.post, user: 0, waitingForSlot: request.waitingForSlot)
        return HTTPResponse(status: 200, body: HotAnswers.postCount(postID: state.postID, likesCount: state.likesCount))
    }

    /// `POST /v1/posts/query`: `{"post_ids":[…],"user_id":7}` → counts and the user's likes,
    /// one batch per shard; without `user_id` (API token), a logged-out viewer's page: counts,
    /// `is_liked` false. Posts that do not exist are left out of the answer. Posts whose
    /// slots other nodes own are asked of those nodes (one query each) and merged in order.
    static func feed(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        let posts: [Int64]
        let viewer: Int64?
        let include: [String]?
        if case .user(let user) = request.caller {
            let query = try RequestBody.ownFeedQuery(request.body, user: user)
            (posts, viewer, include) = (query.postIDs, user, query.include)
        } else {
            let query = try RequestBody.feedQuery(request.body)
            (posts, viewer, include) = (query.postIDs, query.userID, query.include)
        }
        let withLikers = include?.contains(FeedQuery.recentLikers) == true
        let results = await api.service.performMany(posts.map { post in viewer.map { (LikeOperation.read, post, $0) } ?? (.count, post, 0) })
        let forwarder = api.forwarding.forwarder
        var states: [LikeState?] = Array(repeating: nil, count: results.count)
        var elsewhere: [Int] = []
        for (index, result) in results.enumerated() {
            switch result {
            case .success(let state): states[index] = state
            case .failure(let error as CounterError) where error.code == .unknownPost: continue
            case .failure(let error as CounterError) where error.code == .notOwner && forwarder != nil: elsewhere.append(index)
            case .failure(let error): throw error
            }
        }
        // The previews of the posts answered here, exact as their likers pages.
        var recent: [Int64: [Liker]] = withLikers ? try await api.lists.recentLikers(of: states.compactMap { $0?.postID }) : [:]
        if !elsewhere.isEmpty, let forwarder {
            if request.http.forwardedBy != nil {
                return forwarder.misdirectedResponse(slot: HashSlot(post: posts[elsewhere[0]]).rawValue)
            }
            let answers = try await FeedSplit.ask(
                elsewhere.map { posts[$0] }, user: viewer, include: include, like: request.http,
                map: api.member?.map, forwarder: forwarder)
            for index in elsewhere { states[index] = answers.states[posts[index]] }
            recent.merge(answers.recentLikers) { mine, _ in mine }
        }
        let withReactions = include?.contains(FeedQuery.reactions) == true
        guard withLikers || withReactions else { return HTTPResponse(status: 200, body: HotAnswers.feedPage(states.compactMap { $0 })) }
        let summaryKinds = api.service.reactions.summaryKinds
        return .json(
            FeedPage(
                posts: states.compactMap { $0 }.map { state in
                    let summary = withReactions ? state.reactionSummary.top(summaryKinds) : nil
                    return FeedEntry(
                        postID: state.postID, likesCount: state.likesCount, isLiked: state.isLiked,
                        recentLikers: withLikers ? recent[state.postID] ?? [] : nil,
                        reactions: summary?.counts.map { ReactionStatus.KindCount(kind: $0.kind.name, count: $0.count) }, total: summary?.total,
                        mine: summary.map { viewer == nil ? [] : $0.mine.map(\.name) })
                }))
    }
}
