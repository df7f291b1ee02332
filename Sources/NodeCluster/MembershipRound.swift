import Persistence
import ShardRouter

/// What one node does in one round of cluster membership, decided from what PostgreSQL shows
/// (the nodes and their leases, every slot's owner and epoch) and what the node holds — pure, so
/// every rule can be tested without servers.
///
/// The target is `SlotOwnership.target` over the live nodes that are not draining. Each node
/// acts only for itself: it claims the slots the target gives it whose owner is gone (dead,
/// an old incarnation, or none) — a takeover, at once — and hands the slots the target gives
/// to another live node over to it, at most `maximumMoves` at a time. It serves (adopts) what
/// PostgreSQL says it owns under its incarnation and does not serve yet, and drops what it
/// holds that PostgreSQL gives to someone else, or under another epoch.
public struct MembershipRound: Sendable, Equatable {
    /// A node as PostgreSQL shows it.
    public struct Node: Sendable, Equatable {
        public let id: String
        public let incarnation: Int64
        public let isLive: Bool
        public let isDraining: Bool

        public init(id: String, incarnation: Int64, isLive: Bool, isDraining: Bool = false) {
            self.id = id
            self.incarnation = incarnation
            self.isLive = isLive
            self.isDraining = isDraining
        }
    }

    /// A slot's row as PostgreSQL shows it: owner, its incarnation, epoch.
    public typealias Slot = SlotTable.Row

    /// A slot to hand to another node, if it still has `epoch`.
    public struct HandOff: Sendable, Equatable {
        public let slot: UInt16
        public let epoch: Int64
        public let to: String
        public let toIncarnation: Int64
    }

    /// Slots to claim from a gone owner, each with the epoch it must still have.
    public var claims: [SlotTable.Claim] = []
    /// Slots to hand over, grouped in the order found.
    public var handOffs: [HandOff] = []
    /// Slots PostgreSQL gives this node (under its incarnation) that it does not serve yet, with
    /// their epochs: serve them (after draining their logs).
    public var adopt: [UInt16: Int64] = [:]
    /// Slots this node holds that PostgreSQL gives to another owner or epoch: stop at once.
    public var drop: Set<UInt16> = []

    public init() {}

    /// The round of node `me` (incarnation `incarnation`).
    /// - Parameters:
    ///   - slots: every slot's row, by slot number.
    ///   - held: the epoch this node holds per slot (serving, acquiring or releasing), by slot
    ///     number; `nil` where it holds none.
    ///   - ready: per slot, whether it is served (or being released) under `held`, rather than
    ///     still being acquired; empty: as `held` says.
    ///   - leaving: this node is stopping: the target leaves it out, and its hand-offs are not
    ///     rate-limited.
    ///   - mayMoveSlots: `false` while this node's own renewals failed within the last lease
    ///     (`LeaseValidity.mayMoveSlots`): no claims and no hand-offs — the other nodes' leases
    ///     may have run out only because PostgreSQL was away for them too. Adopting and dropping
    ///     (following what PostgreSQL says) go on.
    public static func plan(
        me: String, incarnation: Int64, nodes: [Node], slots: [Slot], held: [Int64?], ready: [Bool] = [],
        maximumMoves: Int, leaving: Bool = false, mayMoveSlots: Bool = true
    ) -> MembershipRound {
        var round = MembershipRound()
        let live = nodes.filter(\.isLive)
        let liveIncarnation = Dictionary(live.map { ($0.id, $0.incarnation) }, uniquingKeysWith: max)
        var members = Set(live.filter { !$0.isDraining }.map(\.id))
        if leaving { members.remove(me) }
        let target = SlotOwnership.target(liveNodes: members)
        // The current owners, with gone ones (dead, or an older incarnation of a live id) as none.
        let current = SlotOwnership(
            owners: slots.map { slot in
                guard let owner = slot.owner, let incarnation = slot.incarnation, liveIncarnation[owner] == incarnation else { return nil }
                return owner
            })
        let moves =
            mayMoveSlots
            ? current.nextMoves(
                toward: target, liveNodes: Set(liveIncarnation.keys),
                maximumMoves: leaving ? HashSlot.count : maximumMoves) : []
        for move in moves {
            let slot = move.slot.rawValue
            if move.to == me && move.from == nil {
                round.claims.append(SlotTable.Claim(slot: slot, expectedEpoch: slots[Int(slot)].epoch))
            } else if move.from == me, let toIncarnation = liveIncarnation[move.to] {
                round.handOffs.append(HandOff(slot: slot, epoch: slots[Int(slot)].epoch, to: move.to, toIncarnation: toIncarnation))
            }
        }
        let handingOff = Set(round.handOffs.map(\.slot))
        for (index, slot) in slots.enumerated() {
            let mine = slot.owner == me && slot.incarnation == incarnation
            if mine {
                let served = held[index] == slot.epoch && (ready.isEmpty || ready[index])
                if !served && !handingOff.contains(UInt16(index)) { round.adopt[UInt16(index)] = slot.epoch }
            } else if held[index] != nil {
                round.drop.insert(UInt16(index))
            }
        }
        return round
    }
}
