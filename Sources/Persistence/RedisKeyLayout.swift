import RedisDriver
import ShardRouter

/// The names of the service's Redis keys. Every key of a post carries its slot's hash tag
/// (`{…}`), so a post's keys and its slot's write-behind log live on one Redis Cluster node and
/// can be written in one `MULTI`.
public struct RedisKeyLayout: Sendable, Hashable {
    /// Prepended to every key, so several deployments can share a Redis. Defaults to `cs`.
    public var prefix: String = "cs"

    public init(prefix: String = "cs") {
        self.prefix = prefix
    }

    /// The set of user ids who like `postID`: `cs:{<tag>}:likers:<post>`.
    public func likers(ofPost postID: Int64) -> String {
        "\(prefix):{\(HashSlot(post: postID).hashTag)}:likers:\(postID)"
    }

    /// Where one streamed hydration of `postID` gathers its likers before they replace the likers
    /// set in one step: `cs:{<tag>}:likers:<post>:loading:<attempt>` (an attempt of its own, so
    /// two nodes loading the post never share it; it expires if the loader dies).
    public func loadingLikers(ofPost postID: Int64, attempt: UInt64) -> String {
        "\(likers(ofPost: postID)):loading:\(attempt)"
    }

    /// With reactions of other kinds: the other kinds' hash a warm post's promotion loads
    /// (`reactions(ofPost:)`'s key with `:loading:<attempt>`), in the post's slot.
    public func loadingReactions(ofPost postID: Int64, attempt: UInt64) -> String {
        "\(reactions(ofPost: postID)):loading:\(attempt)"
    }

    /// A post's tier in Redis: `cs:{<tag>}:hydrated:<post>`. `1` once its whole membership is in
    /// its likers set (loaded from PostgreSQL, or empty for a new post: hot); `warm` while Redis
    /// holds its count and the memberships seen (`warmMembers`); none when Redis holds nothing of
    /// it (cold). Without it the likers set and the hash mean nothing.
    public func hydratedMarker(ofPost postID: Int64) -> String {
        "\(prefix):{\(HashSlot(post: postID).hashTag)}:hydrated:\(postID)"
    }

    /// What `hydratedMarker` holds for a *warm* post: Redis has its count and the membership of
    /// the users seen since it turned warm (`warmMembers`), not its whole likers set. Any other
    /// value (`1`) marks a *hot* post, whose likers set is whole.
    public static let warmMarkerValue = "warm"

    /// A warm post's count and known memberships, as a hash: field `n` is its `likes_count`, and
    /// field `<user>` is `1` (likes it) or `0` (does not) for each user whose membership a batch
    /// looked up or changed: `cs:{<tag>}:warm:<post>`. A user who is not there has no change
    /// waiting, so PostgreSQL's row (or its absence) is that user's membership.
    public func warmMembers(ofPost postID: Int64) -> String {
        "\(prefix):{\(HashSlot(post: postID).hashTag)}:warm:\(postID)"
    }

    /// The field of `warmMembers` that holds the count.
    public static let warmCountField = "n"

    /// In a deployment with reactions other than `like`: the other kinds each user holds of a
    /// hot post, as a hash, field `<user>`, value the kinds by name joined by commas
    /// (`ReactionValues`); a user without a field holds none (likes stay in `likers`):
    /// `cs:{<tag>}:reactions:<post>`. Whole while the post is hot; unused while it is warm (its
    /// `warmMembers` values carry the kinds then).
    public func reactions(ofPost postID: Int64) -> String {
        "\(prefix):{\(HashSlot(post: postID).hashTag)}:reactions:\(postID)"
    }

    /// In a deployment with reactions other than `like`: the count of every other kind a hot or
    /// warm post holds, as a hash, field the kind, value its count (a kind at zero has no field):
    /// `cs:{<tag>}:reaction_counts:<post>`.
    public func reactionCounts(ofPost postID: Int64) -> String {
        "\(prefix):{\(HashSlot(post: postID).hashTag)}:reaction_counts:\(postID)"
    }

    /// The write-behind log (a stream) of the posts in `slot`: `cs:{<tag>}:log`.
    public func changeLog(of slot: HashSlot) -> String {
        "\(prefix):{\(slot.hashTag)}:log"
    }

    /// The epoch of `slot`'s current owner, which every write for the slot must hold
    /// (`SlotFence`): `cs:{<tag>}:epoch`.
    public func epoch(of slot: HashSlot) -> String {
        "\(prefix):{\(slot.hashTag)}:epoch"
    }

    /// The fence of `slot` at `epoch`.
    public func fence(of slot: HashSlot, epoch: Int64) -> SlotFence {
        SlotFence(key: self.epoch(of: slot), epoch: epoch)
    }

    /// Where changes PostgreSQL refused for good are kept, with the reason:
    /// `cs:{dead-letters}`. Its hash tag puts it in one known slot (`deadLettersSlot`).
    public var deadLetters: String { "\(prefix):{dead-letters}" }

    /// The slot of `deadLetters`.
    public var deadLettersSlot: HashSlot { HashSlot(key: "dead-letters".utf8) }

    /// Where versions before the cluster support kept dead letters (no hash tag):
    /// `cs:dead-letters`. Moved to `deadLetters` at start.
    public var legacyDeadLetters: String { "\(prefix):dead-letters" }
}
