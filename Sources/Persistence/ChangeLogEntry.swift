
/// The format of a write-behind log entry: one stream entry per change, with fields `u` (user),
/// `p` (post) and `l` (`1` liked, `0` not). The shard writes it, the flusher and dead letters
/// read it.
public enum ChangeLogEntry {
    /// `XADD <log> * u <user> p <post> l <0|1>`.
    public static func append(_ change: LikeChange, to log: String) -> RedisCommand {
        .xadd(log, fields: fields(of: change))
    }

    /// The fields of `change`, for other streams that carry a change (dead letters).
    public static func fields(of change: LikeChange) -> [(String, RedisArgument)] {
        [("u", change.userID), ("p", change.postID), ("l", change.liked ? "1" : "0")]
    }

    /// The change an entry records, or `nil` when the entry is not a well-formed change.
    public static func change(from entry: StreamEntry) -> LikeChange? {
        guard let user = entry.integer("u"), user > 0, let post = entry.integer("p"), post > 0 else { return nil }
        switch entry.fields["l"] {
        case [UInt8(ascii: "1")]: return LikeChange(userID: user, postID: post, liked: true)
        case [UInt8(ascii: "0")]: return LikeChange(userID: user, postID: post, liked: false)
        default: return nil
        }
    }
}
