import CounterWire
import NodeCluster
import ShardRouter

/// `GET /v1/cluster`: the slot map as this node last read it.
enum ClusterAnswers {
    static func body(_ map: ClusterMap, answeredBy: String) -> ClusterMapBody {
        var owners: [String?] = Array(repeating: nil, count: HashSlot.count)
        var lowest: [Int: Int64] = [:]
        var highest: [Int: Int64] = [:]
        for (slot, row) in map.slots.enumerated() where slot < HashSlot.count {
            guard let owner = row.owner else { continue }
            owners[slot] = map.nodes[owner].id
            lowest[owner] = min(lowest[owner] ?? row.epoch, row.epoch)
            highest[owner] = max(highest[owner] ?? row.epoch, row.epoch)
        }
        let current = SlotOwnership(owners: owners)
        let members = Set(map.nodes.filter { $0.isLive && !$0.isDraining }.map(\.id))
        let target = SlotOwnership.target(liveNodes: members)
        var pending = 0
        for slot in 0..<HashSlot.count where target.owners[slot] != nil && target.owners[slot] != current.owners[slot] { pending += 1 }
        let nodes = map.nodes.enumerated().map { index, node in
            let ranges = current.ranges(of: node.id)
            return ClusterNodeBody(
                id: node.id, url: node.advertiseURL, incarnation: node.incarnation, live: node.isLive,
                draining: node.isDraining, leaseRemainingMs: node.leaseRemainingMilliseconds,
                ownedSlots: ranges.reduce(0) { $0 + $1.count }, slots: ranges.map { [$0.lowerBound, $0.upperBound] },
                lowestEpoch: lowest[index] ?? 0, highestEpoch: highest[index] ?? 0)
        }
        return ClusterMapBody(version: map.version, answeredBy: answeredBy, nodes: nodes, movesPending: pending)
    }
}
