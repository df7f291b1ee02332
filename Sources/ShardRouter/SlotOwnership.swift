/// Which node owns each of the 16,384 slots, and how to get from one assignment to another —
/// the pure planning part of running several nodes. Nodes are named by their ids; a slot whose
/// owner is `nil` is unowned.
///
/// The target over a set of live nodes is contiguous, nearly equal ranges in the order of the
/// nodes' ids (the same rule as `ShardMap`'s), so every node computes the same target from the
/// same membership. Moving there happens in steps (`nextMoves`): slots whose owner is gone are
/// taken over at once — nobody answers for them meanwhile — while slots that move between two
/// live nodes (a join, a drain, a rebalance) move at most `maximumMoves` at a time, so a
/// rebalance never stalls many slots at once.
public struct SlotOwnership: Sendable, Equatable {
    /// The owner of every slot, indexed by slot number.
    public private(set) var owners: [String?]

    /// An assignment where no slot is owned.
    public init() {
        owners = Array(repeating: nil, count: HashSlot.count)
    }

    /// An assignment with these owners, one per slot.
    /// - Precondition: `owners.count == HashSlot.count`.
    public init(owners: [String?]) {
        precondition(owners.count == HashSlot.count, "an assignment names an owner for each of the \(HashSlot.count) slots")
        self.owners = owners
    }

    /// The target over `liveNodes`: contiguous ranges in id order, sizes differing by at most
    /// one. No live node: every slot unowned.
    public static func target(liveNodes: Set<String>) -> SlotOwnership {
        let nodes = liveNodes.sorted()
        guard !nodes.isEmpty else { return SlotOwnership() }
        let map = try! ShardMap(shardCount: min(nodes.count, HashSlot.count))
        return SlotOwnership(owners: (0..<HashSlot.count).map { slot in nodes[map.shard(for: HashSlot(rawValue: UInt16(slot))!)] })
    }

    /// The owner of `slot`.
    public func owner(of slot: HashSlot) -> String? {
        owners[Int(slot.rawValue)]
    }

    /// The slots `node` owns, as contiguous ranges of slot numbers in ascending order.
    public func ranges(of node: String) -> [ClosedRange<Int>] {
        var ranges: [ClosedRange<Int>] = []
        var start: Int?
        for slot in 0...HashSlot.count {
            let owned = slot < HashSlot.count && owners[slot] == node
            if owned, start == nil { start = slot }
            if !owned, let first = start {
                ranges.append(first...(slot - 1))
                start = nil
            }
        }
        return ranges
    }

    /// One slot changing owner.
    public struct Move: Sendable, Equatable, Hashable {
        public let slot: HashSlot
        /// The owner it leaves (`nil`: unowned).
        public let from: String?
        public let to: String

        public init(slot: HashSlot, from: String?, to: String) {
            self.slot = slot
            self.from = from
            self.to = to
        }

        /// Whether the slot leaves a node that is still alive (a planned hand-off, rate-limited),
        /// rather than a dead or missing one (a takeover, at once).
        public func isHandOff(liveNodes: Set<String>) -> Bool {
            from.map(liveNodes.contains) ?? false
        }
    }

    /// The next moves toward `target`: every slot whose owner is not among `liveNodes` (a
    /// takeover), and at most `maximumMoves` slots that leave a live node (hand-offs), lowest
    /// slots first. Applying them and asking again converges on `target`.
    public func nextMoves(toward target: SlotOwnership, liveNodes: Set<String>, maximumMoves: Int) -> [Move] {
        var takeovers: [Move] = []
        var handOffs: [Move] = []
        for slot in 0..<HashSlot.count {
            guard let wanted = target.owners[slot], owners[slot] != wanted else { continue }
            let move = Move(slot: HashSlot(rawValue: UInt16(slot))!, from: owners[slot], to: wanted)
            if move.isHandOff(liveNodes: liveNodes) {
                if handOffs.count < maximumMoves { handOffs.append(move) }
            } else {
                takeovers.append(move)
            }
        }
        return takeovers + handOffs
    }

    /// This assignment after `moves`.
    public func applying(_ moves: [Move]) -> SlotOwnership {
        var next = self
        for move in moves { next.owners[Int(move.slot.rawValue)] = move.to }
        return next
    }
}
