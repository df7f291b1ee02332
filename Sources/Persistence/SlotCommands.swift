import ShardRouter

/// Commands whose keys all hash to one slot, sent together to the master that serves the slot.
///
/// On Redis Cluster a pipeline is split by master, and each group travels whole: an `atomic`
/// group runs as one `MULTI … EXEC` (every key shares the slot's hash tag, so that is valid on a
/// cluster), the commands of a plain group run in order but independently.
public struct SlotCommands: Sendable {
    /// The slot every key of `commands` hashes to.
    public var slot: HashSlot
    /// The commands, in order.
    public var commands: [RedisCommand]
    /// Whether they run as one `MULTI … EXEC`: all or none.
    public var atomic: Bool

    public init(slot: HashSlot, commands: [RedisCommand], atomic: Bool = false) {
        self.slot = slot
        self.commands = commands
        self.atomic = atomic
    }
}
