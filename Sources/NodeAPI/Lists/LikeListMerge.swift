import CounterCore
import Persistence
import WritePath

/// A list page made exact: PostgreSQL's rows with the changes still waiting for it laid over
/// them. A pending change of an item (an id; in a user's reactions, a post and a kind) replaces
/// whatever PostgreSQL has of it: a pending unlike removes the row, a pending like puts the item
/// at its own time (a like after an unlike moves to its new time). Pure: the caller reads the
/// rows (`LikeLists.page`) until `page(from:…)` has enough.
struct LikeListMerge {
    let kind: LikeLists.Kind
    /// One item of a list: its id, and in a user's reactions its kind (else empty).
    private struct Item: Hashable {
        let id: Int64
        let kind: String
    }

    /// The pending change of each item listed (users for likers, posts for likes).
    private let pending: [Item: PendingLike]
    /// The pending likes after the cursor, in list order.
    private let pendingLikes: [LikeLists.Position]
    let limit: Int

    /// - Parameter reactionKind: whose holders a post's list is (`like`: its likers; a user's
    ///   likes are always likes; a user's reactions are of every kind).
    init(kind: LikeLists.Kind, pending: [PendingLike], after: LikeLists.Position?, limit: Int, reactionKind: ReactionKind = .like) {
        self.kind = kind
        self.limit = limit
        var byItem: [Item: PendingLike] = [:]
        byItem.reserveCapacity(pending.count)
        // An item can come from several sources (every node's shards, for a user's likes): the
        // newest change is its truth, whichever answer came first. Reactions of other kinds than
        // the list's are not its: they are left out.
        for change in pending where kind == .reactions || change.kind == reactionKind {
            let item = Item(id: kind == .likers ? change.userID : change.postID, kind: kind == .reactions ? change.kind.name : "")
            if let known = byItem[item], known.acknowledgedAt > change.acknowledgedAt { continue }
            byItem[item] = change
        }
        self.pending = byItem
        self.pendingLikes = byItem.compactMap { item, change -> LikeLists.Position? in
            guard change.liked else { return nil }
            let position = LikeLists.Position(microseconds: change.acknowledgedAt * 1000, id: item.id, kind: item.kind)
            return after.map { $0.precedes(position) } ?? true ? position : nil
        }.sorted { $0.precedes($1) }
    }

    /// How many rows to read from PostgreSQL at a time: the page, one more (to know whether
    /// another page follows), and as many as the pending changes could remove.
    var rowsToRead: Int { limit + 1 + min(pending.count, 1_000) }

    /// The page from `rows` (PostgreSQL's, in order, all after the cursor) and whether another
    /// follows; `nil` when more rows are needed (`rows` is not the list's end and too few of
    /// them survive the pending changes).
    func page(from rows: [LikeLists.Position], rowsExhausted: Bool) -> (items: [LikeLists.Position], more: Bool)? {
        let surviving = pending.isEmpty ? rows : rows.filter { pending[Item(id: $0.id, kind: $0.kind)] == nil }
        // Every row not read yet comes after every row read: with `limit + 1` survivors, the
        // first `limit + 1` of the merge are known.
        guard rowsExhausted || surviving.count > limit else { return nil }
        var merged: [LikeLists.Position] = []
        merged.reserveCapacity(min(surviving.count + pendingLikes.count, limit + 1))
        var row = 0
        var like = 0
        while merged.count <= limit && (row < surviving.count || like < pendingLikes.count) {
            if like == pendingLikes.count || (row < surviving.count && surviving[row].precedes(pendingLikes[like])) {
                merged.append(surviving[row])
                row += 1
            } else {
                merged.append(pendingLikes[like])
                like += 1
            }
        }
        let more = merged.count > limit
        return (Array(merged.prefix(limit)), more)
    }
}
