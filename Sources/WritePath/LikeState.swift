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

    public init(postID: Int64, userID: Int64, isLiked: Bool, likesCount: Int64) {
        self.postID = postID
        self.userID = userID
        self.isLiked = isLiked
        self.likesCount = likesCount
    }

    public var description: String { "post \(postID) user \(userID): liked \(isLiked), count \(likesCount)" }
}
