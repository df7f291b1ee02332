import ShardRouter

/// Commands whose keys all hash to one slot, sent together to the master that serves the slot.
///
/// On Redis Cluster a pipeline is split by master, and each group travels whole: an `atomic`
/// group runs as one `MULTI … EXEC` (every key shares the slot's hash tag, so that is valid on a
/// cluster), the commands of a plain group run in order but independently. A fenced group
/// (`fence`) runs as one script that first checks the slot's epoch.
public struct SlotCommands: Sendable {
    /// The slot every key of `commands` hashes to.
    public var slot: HashSlot
    /// The commands, in order.
    public var commands: [RedisCommand]
    /// Whether they run as one `MULTI … EXEC`: all or none.
    public var atomic: Bool
    /// When set, the commands run as one script, and only if the slot's epoch key holds the
    /// fence's epoch (otherwise the group fails with `RedisError.Code.fenced` and nothing ran).
    /// Such a group is atomic whatever `atomic` says.
    public var fence: SlotFence?

    public init(slot: HashSlot, commands: [RedisCommand], atomic: Bool = false, fence: SlotFence? = nil) {
        self.slot = slot
        self.commands = commands
        self.atomic = atomic || fence != nil
        self.fence = fence
    }
}
