import Persistence
import RedisDriver
import ShardRouter

/// What a list of likers (or of a user's likes) asks of a shard: the changes it acknowledged
/// that PostgreSQL may not have yet (`PendingLikes`), to lay over PostgreSQL's rows.
extension ShardStateMachine {
    /// Whose pending changes are asked.
    enum PendingQuestion: Sendable {
        /// One post's: its slot must be served here.
        case post(Int64)
        /// One user's, in every slot this shard serves.
        case user(Int64)
        /// Several posts' (a feed page's): their slots must be served here.
        case posts([Int64])
    }

    /// The answer.
    enum PendingAnswer: Sendable {
        /// Everything acknowledged and not yet in PostgreSQL, one change per pair.
        case changes([PendingLike])
        /// A user's changes: everything acknowledged in `servedSlots` and not yet in PostgreSQL,
        /// one per post. The slots are those this shard answers for, so that whoever gathers a
        /// user's changes from every shard (and node) knows that no slot was left out.
        case userChanges([PendingLike], servedSlots: SlotSet)
        /// Another node serves the post's slot.
        case notOwner(UInt16)
        /// The slot is changing owner: ask again shortly.
        case slotMoving(UInt16)
        /// A log may hold changes the index has not seen (a write whose outcome is unknown, a
        /// sole writer's log from before its start): flush, then ask again.
        case incomplete
    }

    /// What the shard knows of the changes `question` asks for (read only).
    func pendingAnswer(_ question: PendingQuestion) -> PendingAnswer {
        switch question {
        case .post(let post):
            let slot = HashSlot(post: post).rawValue
            switch slotState(slot) {
            case .notOwned: return .notOwner(slot)
            case .claiming, .draining, .repairing: return .slotMoving(slot)
            case .serving, .quiescing, .flushing, .handingOver: break
            }
            guard let changes = flushes.pendingChanges(ofPost: post, slot: slot) else { return .incomplete }
            return .changes(changes)
        case .posts(let posts):
            var changes: [PendingLike] = []
            for post in posts {
                switch pendingAnswer(.post(post)) {
                case .changes(let more), .userChanges(let more, _): changes += more
                case let refusal: return refusal
                }
            }
            return .changes(changes)
        case .user(let user):
            var served = SlotSet()
            for (slot, state) in ownership.states {
                switch state {
                // A slot being won holds the previous owner's log, which is not indexed here.
                case .claiming, .draining, .repairing: return .slotMoving(slot)
                case .notOwned: continue
                case .serving, .quiescing, .flushing, .handingOver: served.insert(Int(slot))
                }
            }
            guard let changes = flushes.pendingChanges(ofUser: user) else { return .incomplete }
            return .userChanges(changes, servedSlots: served)
        }
    }
}
