import Persistence
import ShardRouter

/// The slot map as this node last read it from PostgreSQL: who owns each slot, where that node
/// listens, and the map's version (the highest epoch, which rises with every change of owner).
/// Routing reads it on every request for a slot this node does not serve.
public struct ClusterMap: Sendable, Equatable {
    /// A node of the map, as the registry read it (its lease as of that read).
    public typealias Node = NodeRegistry.Node

    /// A slot's owner and epoch.
    public struct Slot: Sendable, Equatable {
        /// Index into `nodes`; `nil` when nobody owns it or its owner is not registered.
        public let owner: Int?
        public let epoch: Int64
    }

    public let version: Int64
    public let nodes: [Node]
    /// By slot number; empty before the first read.
    public let slots: [Slot]

    public init(version: Int64, nodes: [Node], slots: [Slot]) {
        self.version = version
        self.nodes = nodes
        self.slots = slots
    }

    /// A map read before anything is known.
    public static let empty = ClusterMap(version: 0, nodes: [], slots: [])

    /// The node that owns `slot`, if one does and it is live.
    public func owner(of slot: UInt16) -> Node? {
        guard Int(slot) < slots.count, let index = slots[Int(slot)].owner else { return nil }
        let node = nodes[index]
        return node.isLive ? node : nil
    }

    /// Each node's slots as contiguous ranges, in node order.
    public func ranges() -> [(node: String, ranges: [ClosedRange<Int>])] {
        var owners: [String?] = slots.map { $0.owner.map { nodes[$0].id } }
        if owners.count != HashSlot.count { owners = Array(repeating: nil, count: HashSlot.count) }
        let ownership = SlotOwnership(owners: owners)
        return nodes.map { ($0.id, ownership.ranges(of: $0.id)) }
    }
}
