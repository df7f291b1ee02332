import CounterWire
import NodeHTTP
import WritePath

/// The answers of the hot routes written by hand with `JSONWriter`: tens of thousands per second,
/// where building a `Codable` value and walking it would cost more than the answer. Each writes
/// exactly the bytes `WireEncoder` writes for its wire type (`LikeStatus`, `SeedLikeStatus`,
/// `PostCount`, `FeedPage`, `ErrorBody`); a test holds them to that. They are where the write
/// path's `LikeState` becomes the wire's `LikeStatus`, field for field.
enum HotAnswers {
    /// `LikeStatus`.
    static func likeStatus(_ state: LikeState) -> [UInt8] {
        var writer = JSONWriter()
        writer.objectStart()
        writer.field("post_id", state.postID)
        writer.field("user_id", state.userID)
        writer.field("is_liked", state.isLiked)
        writer.field("likes_count", state.likesCount)
        writer.objectEnd()
        return writer.bytes
    }

    /// `ReactionStatus`: the summary after the operation, for `userID` (`nil`: none named).
    static func reactionStatus(_ state: LikeState, userID: Int64?) -> [UInt8] {
        let summary = state.reactionSummary
        var writer = JSONWriter(capacity: 96 + 24 * summary.counts.count)
        writer.objectStart()
        writer.field("post_id", state.postID)
        if let userID { writer.field("user_id", userID) } else { writer.nullField("user_id") }
        writer.key("reactions")
        writer.objectStart()
        for item in summary.counts { writer.field(item.kind.name, item.count) }
        writer.objectEnd()
        writer.field("total", summary.total)
        writer.key("mine")
        writer.arrayStart()
        if userID != nil { for kind in summary.mine { writer.value(kind.name) } }
        writer.arrayEnd()
        writer.objectEnd()
        return writer.bytes
    }

    /// `SeedLikeStatus`: the seed's shape.
    static func seedStatus(_ state: LikeState) -> [UInt8] {
        var writer = JSONWriter()
        writer.objectStart()
        writer.field("is_liked", state.isLiked)
        writer.field("likes_count", state.likesCount)
        writer.objectEnd()
        return writer.bytes
    }

    /// `PostCount`.
    static func postCount(postID: Int64, likesCount: Int64) -> [UInt8] {
        var writer = JSONWriter()
        writer.objectStart()
        writer.field("post_id", postID)
        writer.field("likes_count", likesCount)
        writer.objectEnd()
        return writer.bytes
    }

    /// `FeedPage` of the posts in `states`.
    static func feedPage(_ states: [LikeState]) -> [UInt8] {
        var writer = JSONWriter(capacity: 64 * states.count + 16)
        writer.objectStart()
        writer.key("posts")
        writer.arrayStart()
        for state in states {
            writer.objectStart()
            writer.field("post_id", state.postID)
            writer.field("likes_count", state.likesCount)
            writer.field("is_liked", state.isLiked)
            writer.objectEnd()
        }
        writer.arrayEnd()
        writer.objectEnd()
        return writer.bytes
    }

    /// `ErrorBody`.
    static func error(code: String, message: String) -> [UInt8] {
        var writer = JSONWriter()
        writer.objectStart()
        writer.key("error")
        writer.objectStart()
        writer.field("code", code)
        writer.field("message", message)
        writer.objectEnd()
        writer.objectEnd()
        return writer.bytes
    }
}

extension HTTPResponse {
    /// A `200` (or `status`) answer with `body` in the wire format.
    static func json<Body: Encodable>(_ body: Body, status: Int = 200) -> HTTPResponse {
        do {
            return HTTPResponse(status: status, body: try WireEncoder.encode(body))
        } catch {
            return .error(.internal, message: "cannot encode the answer: \(error)")
        }
    }
}
