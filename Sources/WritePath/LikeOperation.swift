/// What a caller asks of a (post, user) pair.
public enum LikeOperation: String, Sendable, Hashable, CaseIterable {
    /// Flip the membership (the seed's endpoint).
    case toggle
    /// Make the user a liker; idempotent.
    case like
    /// Make the user not a liker; idempotent.
    case unlike
    /// Only read the membership and count.
    case read
    /// Only read the count (no user involved; the answer's `isLiked` is `false`).
    case count
    /// Write the membership to the log again, unchanged, when the user is a liker, so PostgreSQL
    /// gets it once more (replaying a like PostgreSQL refused before); when the user is not a
    /// liker (a later change superseded the like), nothing is written. The answer says which.
    case confirmLike
    /// As `confirmLike`, for a membership that is not a like.
    case confirmUnlike

    /// The membership after this operation, given the one before.
    func wantedState(current: Bool) -> Bool {
        switch self {
        case .toggle: return !current
        case .like: return true
        case .unlike: return false
        case .read, .count, .confirmLike, .confirmUnlike: return current
        }
    }

    /// Whether the operation logs the membership it finds, unchanged (`current`).
    func confirms(current: Bool) -> Bool {
        switch self {
        case .confirmLike: return current
        case .confirmUnlike: return !current
        default: return false
        }
    }

    /// Whether the operation may change state (and is refused when the backlog is full).
    public var mayWrite: Bool { self != .read && self != .count }
}

extension LikeOperation {
    /// Whether the operation may write (a read or a count never does).
    var writes: Bool {
        switch self {
        case .read, .count: return false
        case .toggle, .like, .unlike, .confirmLike, .confirmUnlike: return true
        }
    }
}
