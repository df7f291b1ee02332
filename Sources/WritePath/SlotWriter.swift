import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// Sends writes for slots with the epoch the shard holds for each, so Redis refuses them once
/// another node has taken the slot. A group for a slot without an epoch fails without being
/// sent. Both refusals fail with `RedisError.Code.fenced`: nothing of them ran.
enum SlotWriter {
    /// One result per group, in order, and the slots whose writes Redis refused (with the
    /// epoch the write carried).
    /// - Parameter epochs: the epoch each slot's write carries — those held when the work
    ///   began (a batch's reads, a flush's plan), so that work begun under an epoch the node has
    ///   since lost, even if it won the slot back, is refused. `nil`: unfenced (a sole writer).
    static func execute(
        _ groups: [SlotCommands], epochs: [UInt16: Int64]?, redis: RedisClient, layout: RedisKeyLayout,
        counting ownership: OwnedSlots
    ) async -> (results: [Result<[RedisReply], RedisError>], fenced: [ShardStateMachine.FencedSlot], openings: RedisOpenings) {
        guard let epochs else {
            let (results, openings) = await redis.executeNotingOpenings(groups)
            return (results, [], openings)
        }
        var results = [Result<[RedisReply], RedisError>?](repeating: nil, count: groups.count)
        var sent: [SlotCommands] = []
        var positions: [Int] = []
        sent.reserveCapacity(groups.count)
        for (position, group) in groups.enumerated() {
            guard let epoch = epochs[group.slot.rawValue] else {
                ownership.noteFenced()
                results[position] = .failure(notHeld(group.slot))
                continue
            }
            var fenced = group
            fenced.fence = layout.fence(of: group.slot, epoch: epoch)
            sent.append(fenced)
            positions.append(position)
        }
        var refused: [ShardStateMachine.FencedSlot] = []
        var openings = RedisOpenings()
        if !sent.isEmpty {
            let executed = await redis.executeNotingOpenings(sent)
            openings = executed.openings
            for (index, result) in zip(positions.indices, executed.results) {
                if case .failure(let error) = result, error.code == .fenced, let fence = sent[index].fence {
                    ownership.noteFenced()
                    refused.append(ShardStateMachine.FencedSlot(slot: sent[index].slot.rawValue, epoch: fence.epoch))
                }
                results[positions[index]] = result
            }
        }
        return (results.map { $0! }, refused, openings)
    }

    /// The refusal of a write for a slot this node does not hold.
    static func notHeld(_ slot: HashSlot) -> RedisError {
        RedisError(code: .fenced, message: "this node does not hold slot \(slot.rawValue) (any more); nothing was written")
    }
}
