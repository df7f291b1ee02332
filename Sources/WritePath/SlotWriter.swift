import CounterCore
import Persistence
import ShardRouter

/// Sends writes for slots with the epoch this node holds for each (`OwnedSlots`), so Redis
/// refuses them once another node has taken the slot. A group for a slot this node does not
/// hold fails without being sent; a group Redis refuses gives the slot up. Both fail with
/// `RedisError.Code.fenced`: nothing of them ran.
struct SlotWriter {
    let redis: RedisClient
    let ownership: OwnedSlots
    let layout: RedisKeyLayout
    let log: NodeLog

    /// One result per group, in order.
    /// - Parameter epochs: the epoch each slot's write carries: those held when the work began
    ///   (a batch's reads, a flush's plan), so that work begun under an epoch the node has since
    ///   lost, even if it won the slot back, is refused. `nil`: the epochs held now.
    func execute(epochs: [UInt16: Int64]? = nil, _ groups: [SlotCommands]) async -> [Result<[RedisReply], RedisError>] {
        guard ownership.isFenced else { return await redis.execute(groups) }
        var results = [Result<[RedisReply], RedisError>?](repeating: nil, count: groups.count)
        var sent: [SlotCommands] = []
        var positions: [Int] = []
        sent.reserveCapacity(groups.count)
        for (position, group) in groups.enumerated() {
            guard let epoch = epochs.map({ $0[group.slot.rawValue] }) ?? ownership.writeEpoch(group.slot.rawValue) else {
                ownership.noteFenced()
                results[position] = .failure(Self.notHeld(group.slot))
                continue
            }
            var fenced = group
            fenced.fence = layout.fence(of: group.slot, epoch: epoch)
            sent.append(fenced)
            positions.append(position)
        }
        if !sent.isEmpty {
            for (index, result) in zip(positions.indices, await redis.execute(sent)) {
                if case .failure(let error) = result, error.code == .fenced, let fence = sent[index].fence {
                    ownership.noteFenced()
                    if ownership.lose(sent[index].slot.rawValue, epoch: fence.epoch) {
                        log.log(.warn, "slot_fenced", ["slot": String(sent[index].slot.rawValue), "epoch": String(fence.epoch),
                                                       "error": error.message])
                    }
                }
                results[positions[index]] = result
            }
        }
        return results.map { $0! }
    }

    static func notHeld(_ slot: HashSlot) -> RedisError {
        RedisError(code: .fenced, message: "this node does not hold slot \(slot.rawValue) (any more); nothing was written")
    }
}
