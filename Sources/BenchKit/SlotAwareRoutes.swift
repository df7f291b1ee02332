import CounterWire
import ShardRouter

/// Which node a post's requests go to when the bench is slot-aware: the owner of the post's slot
/// in the cluster's map (`GET /v1/cluster`), as a slot-aware client would send them, so no
/// request takes a forwarding hop. The map is read once before the run; a slot that moves during
/// the run is answered by its old owner (forwarded, or `421`, counted by status).
public struct SlotAwareRoutes: Sendable {
    /// The live nodes that own slots, in the map's order.
    public let endpoints: [Endpoint]
    /// Their node ids, by endpoint.
    public let nodeIDs: [String]
    /// Slots owned, by endpoint.
    public let slotCounts: [Int]
    /// The endpoint index of every slot's owner; slots without a live owner go to endpoint 0.
    private let endpointBySlot: [UInt8]

    /// Routes from a map; nodes without slots are left out.
    /// - Throws: `Endpoint.Invalid` for a node URL the bench cannot connect to, or when no live
    ///   node owns a slot.
    public init(map: ClusterMapBody) throws(Endpoint.Invalid) {
        var endpoints: [Endpoint] = []
        var nodeIDs: [String] = []
        var slotCounts: [Int] = []
        var bySlot = [UInt8](repeating: 0, count: HashSlot.count)
        for node in map.nodes where node.live && node.ownedSlots > 0 {
            guard endpoints.count < Int(UInt8.max) else { break }
            let index = UInt8(endpoints.count)
            endpoints.append(try Endpoint(url: node.url))
            nodeIDs.append(node.id)
            slotCounts.append(node.ownedSlots)
            for range in node.slots where range.count == 2 {
                for slot in max(0, range[0])...min(HashSlot.count - 1, range[1]) { bySlot[slot] = index }
            }
        }
        guard !endpoints.isEmpty else { throw Endpoint.Invalid(message: "the cluster's map names no live node that owns slots") }
        self.endpoints = endpoints
        self.nodeIDs = nodeIDs
        self.slotCounts = slotCounts
        self.endpointBySlot = bySlot
    }

    /// The endpoint index of `post`'s owner.
    public func endpoint(ofPost post: Int64) -> Int {
        Int(endpointBySlot[Int(HashSlot(post: post).rawValue)])
    }
}
