/// The answer to an operation: the pair's membership and the post's count after it. The API
/// answers with it in its own shape (the wire's `LikeStatus`, the seed's `{is_liked,
/// likes_count}`); the write path knows no wire format.
public struct LikeState: Sendable, Hashable, CustomStringConvertible {
    public let postID: Int64
    public let userID: Int64
    /// Whether the user likes the post (`false` for `.count`, which names no user).
    public let isLiked: Bool
    /// How many users like the post.
    public let likesCount: Int64
    /// In a deployment with reactions other than `like`: every kind's count and the user's own
    /// kinds, after the operation. `nil` in a deployment of likes only.
    public let reactions: ReactionSummary?

    public init(postID: Int64, userID: Int64, isLiked: Bool, likesCount: Int64, reactions: ReactionSummary? = nil) {
        self.postID = postID
        self.userID = userID
        self.isLiked = isLiked
        self.likesCount = likesCount
        self.reactions = reactions
    }

    public var description: String { "post \(postID) user \(userID): liked \(isLiked), count \(likesCount)" }

    /// The reactions after the operation: the deployment's summary, or — with likes only — the
    /// one kind `like`'s.
    public var reactionSummary: ReactionSummary {
        reactions ?? ReactionSummary(likes: likesCount, others: [:], liked: isLiked, otherKinds: [])
    }
}
