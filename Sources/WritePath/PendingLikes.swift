import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// A change a shard acknowledged that PostgreSQL may not have yet: what a list of likers (or of
/// a user's likes) lays over PostgreSQL's rows to be exact at the time it is asked.
public struct PendingLike: Sendable, Hashable {
    public let postID: Int64
    public let userID: Int64
    /// The reaction's kind (`like` in a deployment of likes only).
    public let kind: ReactionKind
    /// The membership the change left: liked (the kind held), or not.
    public let liked: Bool
    /// When it was acknowledged, in Unix milliseconds: the `created_at` its row gets.
    public let acknowledgedAt: Int64

    public init(postID: Int64, userID: Int64, kind: ReactionKind = .like, liked: Bool, acknowledgedAt: Int64) {
        self.postID = postID
        self.userID = userID
        self.kind = kind
        self.liked = liked
        self.acknowledgedAt = acknowledgedAt
    }
}

/// A user's changes that a node (or shard) acknowledged and PostgreSQL may not have yet, one per
/// post, and the slots it answered for: a user's changes span every slot, so whoever gathers
/// them checks that the answers together cover all 16,384 (`SlotSet.firstMissing`).
public struct UserPendingLikes: Sendable {
    public var changes: [PendingLike]
    public var servedSlots: SlotSet

    public init(changes: [PendingLike], servedSlots: SlotSet) {
        self.changes = changes
        self.servedSlots = servedSlots
    }
}

/// One shard's index of the changes its batches logged and its flusher has not applied yet, by
/// post and by user: the newest change of each (user, post, kind), until PostgreSQL has the
/// entry holding it. Filled from each batch's write (the entry id of every change), emptied as
/// flushes settle each slot, forgotten with a slot that leaves. Its size is bounded by the
/// shard's backlog (`backlogLimitPerShard`): a change leaves once its entry is applied.
///
/// A slot whose log may hold changes the index never saw — a write whose outcome is unknown, a
/// sole writer's log from before its start — is *unindexed* until the flusher has applied the
/// newest entry its log held when read again; until then the index cannot say what waits there
/// (`isIndexed(slot:)`), and a list asks for a flush first.
///
/// Pure.
struct PendingLikes {
    struct Change: Equatable {
        let liked: Bool
        /// Unix milliseconds.
        let at: Int64
        let entry: StreamEntryID
    }

    /// A user's kind of a post, and a post's kind of a user.
    private struct UserKind: Hashable {
        let user: Int64
        let kind: ReactionKind
    }

    private var byPost: [Int64: [UserKind: Change]] = [:]
    private var byUser: [Int64: [PostKind: Change]] = [:]
    /// Per slot, the keys in the order their entries were written, from `head` on.
    private var bySlot: [UInt16: (items: [(entry: StreamEntryID, key: ReactionKey)], head: Int)] = [:]
    /// Slots whose log may hold changes not indexed, up to the entry named.
    private var unindexed: [UInt16: StreamEntryID] = [:]
    /// Per slot, the newest entry PostgreSQL has (with every entry before it).
    private var appliedThrough: [UInt16: StreamEntryID] = [:]

    /// Keys (user, post, kind) with a change waiting.
    private(set) var count = 0

    /// `change` was logged in entry `entry` of its slot's log.
    mutating func logged(_ change: LikeChange, in entry: StreamEntryID) {
        let slot = HashSlot(post: change.postID).rawValue
        // A flush reads a log to its end, so it can apply (and trim) an entry before the batch
        // that wrote it has finished: PostgreSQL has it already, and it must not linger here.
        if let applied = appliedThrough[slot], entry <= applied { return }
        let record = Change(liked: change.liked, at: change.acknowledgedAt(inEntryOf: entry.milliseconds), entry: entry)
        if byPost[change.postID, default: [:]].updateValue(record, forKey: UserKind(user: change.userID, kind: change.kind)) == nil {
            count += 1
        }
        byUser[change.userID, default: [:]][PostKind(postID: change.postID, kind: change.kind)] = record
        bySlot[slot, default: ([], 0)].items.append((entry, ReactionKey(change)))
    }

    /// PostgreSQL has every entry of `slot`'s log up to `through`.
    mutating func applied(slot: UInt16, through: StreamEntryID) {
        _ = applied(slot: slot, through: through, read: nil)
    }

    /// A flush read `slot`'s log from its head up to `through` — the entries `read` — and applied
    /// them: what the index holds up to there is no longer pending. A change indexed under an
    /// entry the read did not meet was gone from Redis (a failover, a restart without its data):
    /// it is returned, a pair's newest each, as `dropMissing` does, in the same pass.
    mutating func applied(slot: UInt16, through: StreamEntryID, read: Set<StreamEntryID>?) -> [PendingLike] {
        appliedThrough[slot] = max(appliedThrough[slot] ?? through, through)
        if let mark = unindexed[slot], mark <= through { unindexed[slot] = nil }
        guard var queue = bySlot[slot] else { return [] }
        bySlot[slot] = nil
        var lost: [PendingLike] = []
        while queue.head < queue.items.count, queue.items[queue.head].entry <= through {
            let item = queue.items[queue.head]
            if let read, !read.contains(item.entry), let change = self.change(of: item.key), change.entry == item.entry {
                lost.append(Self.pending(item.key, change))
            }
            remove(item.key, ifIn: item.entry)
            queue.head += 1
        }
        guard queue.head < queue.items.count else { return lost }
        if queue.head > queue.items.count / 2 {
            queue.items.removeFirst(queue.head)
            queue.head = 0
        }
        bySlot[slot] = queue
        return lost
    }

    /// `slot` left this shard (or its books were forgotten): another owner drains its log.
    mutating func forget(slot: UInt16) {
        unindexed[slot] = nil
        appliedThrough[slot] = nil
        guard let queue = bySlot.removeValue(forKey: slot) else { return }
        for item in queue.items[queue.head...] { remove(item.key, ifIn: item.entry) }
    }

    /// `slot`'s log was read again and holds entries up to `newest` that the index may not know.
    mutating func unindexed(slot: UInt16, through newest: StreamEntryID) {
        unindexed[slot] = max(unindexed[slot] ?? newest, newest)
    }

    /// Whether every change waiting in `slot`'s log is indexed (as far as this index can know:
    /// the caller also asks whether the slot's log is to be read again).
    func isIndexed(slot: UInt16) -> Bool {
        unindexed[slot] == nil
    }

    /// Whether some slot is not fully indexed.
    var hasUnindexedSlots: Bool { !unindexed.isEmpty }

    /// The changes waiting for `post`, one per user and kind.
    func of(post: Int64) -> [PendingLike] {
        guard let users = byPost[post] else { return [] }
        return users.map {
            PendingLike(postID: post, userID: $0.key.user, kind: $0.key.kind, liked: $0.value.liked, acknowledgedAt: $0.value.at)
        }
    }

    /// The changes waiting for `user`, one per post and kind.
    func of(user: Int64) -> [PendingLike] {
        guard let posts = byUser[user] else { return [] }
        return posts.map {
            PendingLike(postID: $0.key.postID, userID: user, kind: $0.key.kind, liked: $0.value.liked, acknowledgedAt: $0.value.at)
        }
    }

    /// The newest change indexed for `key`.
    private func change(of key: ReactionKey) -> Change? {
        byPost[key.postID]?[UserKind(user: key.userID, kind: key.kind)]
    }

    private static func pending(_ key: ReactionKey, _ change: Change) -> PendingLike {
        PendingLike(postID: key.postID, userID: key.userID, kind: key.kind, liked: change.liked, acknowledgedAt: change.at)
    }

    private mutating func remove(_ key: ReactionKey, ifIn entry: StreamEntryID) {
        let userKind = UserKind(user: key.userID, kind: key.kind)
        guard byPost[key.postID]?[userKind]?.entry == entry else { return }
        byPost[key.postID]![userKind] = nil
        if byPost[key.postID]!.isEmpty { byPost[key.postID] = nil }
        byUser[key.userID]![PostKind(postID: key.postID, kind: key.kind)] = nil
        if byUser[key.userID]!.isEmpty { byUser[key.userID] = nil }
        count -= 1
    }
}

extension PendingLikes {
    /// `slot`'s log was read whole and holds exactly the entries `present`: the changes indexed
    /// for it under other entries that PostgreSQL does not have either were lost (a Redis
    /// failover took them). They leave the index, and are returned, a pair's newest each.
    /// With `through`, only entries up to it are judged (those indexed after the log was read
    /// stay).
    mutating func dropMissing(slot: UInt16, present: Set<StreamEntryID>, through: StreamEntryID? = nil) -> [PendingLike] {
        guard let queue = bySlot[slot] else { return [] }
        let applied = appliedThrough[slot]
        var lost: [PendingLike] = []
        var kept: [(entry: StreamEntryID, key: ReactionKey)] = []
        for item in queue.items[queue.head...] {
            if present.contains(item.entry) || applied.map({ item.entry <= $0 }) == true || through.map({ item.entry > $0 }) == true {
                kept.append(item)
                continue
            }
            // Only a key's newest change is indexed: a key counts once, with it.
            if let change = change(of: item.key), change.entry == item.entry {
                lost.append(Self.pending(item.key, change))
                remove(item.key, ifIn: item.entry)
            }
        }
        bySlot[slot] = kept.isEmpty ? nil : (kept, 0)
        return lost
    }
}
