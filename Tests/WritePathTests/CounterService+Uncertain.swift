import ShardRouter

@testable import WritePath

extension CounterService {
    /// Makes the shards read `slots`' logs again before their next flush, as after a write whose
    /// outcome is unknown: what a test needs to drive that path without breaking a connection.
    func noteUncertain(_ slots: Set<UInt16>) async {
        for slot in slots { shards[shardMap.shard(for: HashSlot(rawValue: slot)!)].tell(.logsUncertain([slot])) }
        for shard in shards { _ = await shard.ask { .pendingBySlot($0) } }
    }
}
