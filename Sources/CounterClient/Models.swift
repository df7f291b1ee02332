/// A user's like of a post and the post's count, as the service answers like, unlike, toggle
/// and read (`{"post_id":1,"user_id":7,"is_liked":true,"likes_count":124}`).
public struct LikeStatus: Sendable, Equatable, Codable {
    public let postID: Int64
    public let userID: Int64
    public let isLiked: Bool
    public let likesCount: Int64

    public init(postID: Int64, userID: Int64, isLiked: Bool, likesCount: Int64) {
        self.postID = postID
        self.userID = userID
        self.isLiked = isLiked
        self.likesCount = likesCount
    }

    enum CodingKeys: String, CodingKey {
        case postID = "post_id", userID = "user_id", isLiked = "is_liked", likesCount = "likes_count"
    }
}

/// A post's count (`GET /v1/posts/{post}`).
public struct PostCount: Sendable, Equatable, Codable {
    public let postID: Int64
    public let likesCount: Int64

    enum CodingKeys: String, CodingKey { case postID = "post_id", likesCount = "likes_count" }
}

/// One post of a feed page (`POST /v1/posts/query`): its count and whether the user likes it.
public struct FeedEntry: Sendable, Equatable, Codable {
    public let postID: Int64
    public let likesCount: Int64
    public let isLiked: Bool

    public init(postID: Int64, likesCount: Int64, isLiked: Bool) {
        self.postID = postID
        self.likesCount = likesCount
        self.isLiked = isLiked
    }

    enum CodingKeys: String, CodingKey { case postID = "post_id", likesCount = "likes_count", isLiked = "is_liked" }
}

struct FeedPage: Codable {
    let posts: [FeedEntry]
}

struct FeedQueryBody: Codable {
    let postIDs: [Int64]
    let userID: Int64

    enum CodingKeys: String, CodingKey { case postIDs = "post_ids", userID = "user_id" }
}

struct ErrorBody: Decodable {
    struct Detail: Decodable {
        let code: String
        let message: String
    }
    let error: Detail
}
