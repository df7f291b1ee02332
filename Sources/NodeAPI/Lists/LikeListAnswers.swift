import CounterCore
import CounterWire
import Persistence
import WritePath

/// The lists' answers: `GET /v1/posts/{post}/likers`, a kind's holders, a user's likes and
/// reactions, each page PostgreSQL's
/// rows merged with the changes still waiting for it (`LikeListMerge`), so a like acknowledged a
/// moment ago is listed and an unlike is gone, whatever the flusher has done yet.
///
/// The changes waiting are taken *before* the rows are read: a change the flusher commits in
/// between is then in both (and the pending one, the same, wins), never in neither.
struct LikeListAnswers: Sendable {
    let service: CounterService
    let lists: LikeLists

    /// A page's arguments: `limit` (1–100, default 20) and `cursor`.
    struct Arguments: Equatable {
        static let defaultLimit = 20
        static let maximumLimit = 100

        var limit = defaultLimit
        var cursor: String?

        /// The arguments of `query` (as sent, nothing percent-decoded); any other argument is refused.
        init(_ query: [String: String]) throws(RequestError) {
            try QueryArguments.refuseUnknown(query, known: ["limit", "cursor"], route: "a list")
            if let text = query["limit"] {
                guard let value = QueryArguments.wholeNumber(text, in: 1...Int64(Self.maximumLimit)) else {
                    throw RequestError(code: .invalidArgument, message: "limit \"\(text)\" is not a whole number from 1 to \(Self.maximumLimit)")
                }
                limit = Int(value)
            }
            cursor = query["cursor"]
        }

        func position(kind: LikeLists.Kind, owner: Int64, reactionKind: ReactionKind = .like) throws(RequestError) -> LikeLists.Position? {
            guard let cursor else { return nil }
            do {
                return try ListCursor.parse(cursor, kind: kind, owner: owner, reactionKind: reactionKind).after
            } catch .foreign {
                throw RequestError(
                    code: .invalidCursor,
                    message: "the cursor belongs to another list; pass the next_cursor of this list's previous page")
            } catch {
                throw RequestError(code: .invalidCursor, message: "the cursor is not one this service gave; pass a next_cursor as given")
            }
        }
    }

    /// A page of `post`'s likers.
    /// - Throws: `CounterError` (`.unknownPost`, `.notOwner`, …), `RequestError`, PostgreSQL's errors.
    func likers(of post: Int64, _ arguments: Arguments, waitingForSlot: Bool) async throws -> LikersPage {
        let after = try arguments.position(kind: .likers, owner: post)
        let count = try await service.perform(.count, post: post, user: 0, waitingForSlot: waitingForSlot)
        let pending = try await service.pendingLikes(ofPost: post, waitingForSlot: waitingForSlot)
        let (items, next) = try await page(.likers, of: post, pending: pending, after: after, limit: arguments.limit)
        return LikersPage(
            postID: post, likesCount: count.likesCount,
            likers: items.map { Liker(userID: $0.id, likedAt: Self.text($0)) }, nextCursor: next)
    }

    /// A page of `post`'s users holding `kind`, newest first: its likers for `like`.
    /// - Throws: `CounterError` (`.unknownKind` for a kind the deployment does not list,
    ///   `.unknownPost`, `.notOwner`, …), `RequestError`, PostgreSQL's errors.
    func reactors(of post: Int64, kind: ReactionKind, _ arguments: Arguments, waitingForSlot: Bool) async throws -> ReactorsPage {
        if let refusal = service.refusal(of: kind) { throw refusal }
        let after = try arguments.position(kind: .likers, owner: post, reactionKind: kind)
        let count = try await service.perform(.count, post: post, user: 0, waitingForSlot: waitingForSlot)
        let pending = try await service.pendingLikes(ofPost: post, waitingForSlot: waitingForSlot)
        let merge = LikeListMerge(kind: .likers, pending: pending, after: after, limit: arguments.limit, reactionKind: kind)
        var rows: [LikeLists.Position] = []
        while true {
            let read = try await lists.reactorsPage(of: post, kind: kind, after: rows.last ?? after, limit: merge.rowsToRead)
            rows += read
            if let (items, more) = merge.page(from: rows, rowsExhausted: read.count < merge.rowsToRead) {
                let next = more ? items.last.map { ListCursor(kind: .likers, owner: post, after: $0, reactionKind: kind).text } : nil
                return ReactorsPage(
                    postID: post, kind: kind.name, count: count.reactionSummary.count(of: kind),
                    users: items.map { Reactor(userID: $0.id, reactedAt: Self.text($0)) }, nextCursor: next)
            }
        }
    }

    /// A page of the posts `user` liked, with `pending` the user's changes waiting in every
    /// node's shards.
    func likes(of user: Int64, pending: [PendingLike], _ arguments: Arguments) async throws -> UserLikesPage {
        let after = try arguments.position(kind: .likes, owner: user)
        let (items, next) = try await page(.likes, of: user, pending: pending, after: after, limit: arguments.limit)
        return UserLikesPage(userID: user, likes: items.map { LikedPost(postID: $0.id, likedAt: Self.text($0)) }, nextCursor: next)
    }

    /// A page of `user`'s reactions of every kind (its likes as `like`), with `pending` the user's
    /// changes waiting in every node's shards.
    func reactions(of user: Int64, pending: [PendingLike], _ arguments: Arguments) async throws -> UserReactionsPage {
        let after = try arguments.position(kind: .reactions, owner: user)
        let (items, next) = try await page(.reactions, of: user, pending: pending, after: after, limit: arguments.limit)
        return UserReactionsPage(
            userID: user, reactions: items.map { UserReaction(postID: $0.id, kind: $0.kind, reactedAt: Self.text($0)) }, nextCursor: next)
    }

    /// The newest likers of each of `posts` (all served here; a feed page's previews), at most
    /// `FeedQuery.recentLikersCount` each, exact as a likers page is: one statement for all of
    /// them, read after their pending changes.
    func recentLikers(of posts: [Int64]) async throws -> [Int64: [Liker]] {
        guard !posts.isEmpty else { return [:] }
        let pending = try await service.pendingLikes(ofPosts: posts)
        let limit = FeedQuery.recentLikersCount
        let merges = Dictionary(
            uniqueKeysWithValues: Set(posts).map { post in
                (post, LikeListMerge(kind: .likers, pending: pending[post] ?? [], after: nil, limit: limit))
            })
        // Each post reads what its own pending changes could remove: one post with a thousand
        // waiting does not make every other post of the page read a thousand rows.
        let rows = try await lists.firstLikers(limits: merges.mapValues(\.rowsToRead))
        var answer: [Int64: [Liker]] = [:]
        for (post, merge) in merges {
            let read = rows[post] ?? []
            let items: [LikeLists.Position]
            if let (page, _) = merge.page(from: read, rowsExhausted: read.count < merge.rowsToRead) {
                items = page
            } else {
                // More pending changes of this post than one read covers: page it alone.
                items = try await self.page(.likers, of: post, pending: pending[post] ?? [], after: nil, limit: limit).0
            }
            answer[post] = items.map { Liker(userID: $0.id, likedAt: Self.text($0)) }
        }
        return answer
    }

    private func page(
        _ kind: LikeLists.Kind, of owner: Int64, pending: [PendingLike], after: LikeLists.Position?,
        limit: Int
    ) async throws -> ([LikeLists.Position], String?) {
        let merge = LikeListMerge(kind: kind, pending: pending, after: after, limit: limit)
        var rows: [LikeLists.Position] = []
        while true {
            let read = try await lists.page(kind, of: owner, after: rows.last ?? after, limit: merge.rowsToRead)
            rows += read
            if let (items, more) = merge.page(from: rows, rowsExhausted: read.count < merge.rowsToRead) {
                let next = more ? items.last.map { ListCursor(kind: kind, owner: owner, after: $0).text } : nil
                return (items, next)
            }
        }
    }

    /// A like's time as the lists show it: milliseconds (PostgreSQL's microseconds cut down).
    static func text(_ position: LikeLists.Position) -> String {
        let micros = position.microseconds
        return LikeTime.text(milliseconds: micros >= 0 ? micros / 1000 : (micros - 999) / 1000)
    }
}
