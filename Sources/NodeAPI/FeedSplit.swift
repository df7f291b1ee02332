import CounterCore
import CounterWire
import NodeCluster
import NodeHTTP
import ShardRouter
import WritePath

/// A feed query's posts that other nodes own: grouped by owner, asked of each owner in one
/// forwarded query (all at once), and returned by post.
enum FeedSplit {
    /// What the owners answered, by post.
    struct Answers: Sendable {
        var states: [Int64: LikeState] = [:]
        /// With `"include":["recent_likers"]`: each post's newest likers.
        var recentLikers: [Int64: [Liker]] = [:]
    }

    static func ask(
        _ posts: [Int64], user: Int64?, include: [String]?, like request: HTTPRequest, map: ClusterMap?,
        forwarder: Forwarder
    ) async throws -> Answers {
        var byOwner: [String: [Int64]] = [:]
        for post in posts {
            let owner = map?.owner(of: HashSlot(post: post).rawValue)?.id ?? ""
            byOwner[owner, default: []].append(post)
        }
        return try await withThrowingTaskGroup(of: Answers.self) { group in
            for part in byOwner.values {
                group.addTask { try await forward(part, user: user, include: include, like: request, forwarder: forwarder) }
            }
            var all = Answers()
            for try await answer in group {
                all.states.merge(answer.states) { first, _ in first }
                all.recentLikers.merge(answer.recentLikers) { first, _ in first }
            }
            return all
        }
    }

    /// Forwards a feed query for `posts` (each group to its owner) and returns their states;
    /// `user` `nil` asks for a logged-out viewer's page.
    private static func forward(
        _ posts: [Int64], user: Int64?, include: [String]?, like request: HTTPRequest,
        forwarder: Forwarder
    ) async throws -> Answers {
        let body = try WireEncoder.encode(OwnFeedQuery(postIDs: posts, userID: user, include: include))
        let forwarded = HTTPRequest(method: "POST", path: "/v1/posts/query", authorization: request.authorization, body: body)
        let response = await forwarder.forward(forwarded, slot: HashSlot(post: posts[0]).rawValue, mayRepeat: true)
        guard response.status == 200 else {
            throw CounterError(
                code: .unavailable,
                message:
                    "the owner of posts \(posts.prefix(3).map(String.init).joined(separator: ",")) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))",
                retryAfterSeconds: 1)
        }
        let page = try WireDecoder.decode(FeedPage.self, from: response.body)
        var answers = Answers()
        for item in page.posts {
            var summary: ReactionSummary?
            if let counts = item.reactions, let total = item.total {
                summary = ReactionSummary(
                    counts: counts.compactMap { count in ReactionKind(count.kind).map { ReactionSummary.KindCount(kind: $0, count: count.count) } },
                    total: total, mine: (item.mine ?? []).compactMap { ReactionKind($0) })
            }
            answers.states[item.postID] = LikeState(
                postID: item.postID, userID: user ?? 0, isLiked: item.isLiked, likesCount: item.likesCount, reactions: summary)
            if let likers = item.recentLikers { answers.recentLikers[item.postID] = likers }
        }
        return answers
    }
}
