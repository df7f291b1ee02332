/// Which local shard owns a slot: the node's shards split the 16,384 slots into contiguous,
/// nearly equal ranges. Pure and stable: the same shard count always gives the same map.
public struct ShardMap: Sendable, Equatable {
    /// Number of shards; at least 1 and at most `HashSlot.count`.
    public let shardCount: Int

    /// A map over `shardCount` shards.
    /// - Throws: `ShardRouterError` when `shardCount` is below 1 or above `HashSlot.count`.
    public init(shardCount: Int) throws(ShardRouterError) {
        guard (1...HashSlot.count).contains(shardCount) else {
            throw ShardRouterError(
                message: "shard count must be between 1 and \(HashSlot.count), got \(shardCount)")
        }
        self.shardCount = shardCount
    }

    /// The shard that owns `slot`, in `0..<shardCount`.
    public func shard(for slot: HashSlot) -> Int {
        Int(slot.rawValue) * shardCount / HashSlot.count
    }

    /// The shard that owns `postID`.
    public func shard(forPost postID: Int64) -> Int {
        shard(for: HashSlot(post: postID))
    }

    /// The slots `shard` owns, as a range of slot numbers.
    public func slots(ofShard shard: Int) -> Range<Int> {
        precondition((0..<shardCount).contains(shard), "no shard \(shard) among \(shardCount)")
        // Smallest slot s with s * shardCount / count >= shard.
        func firstSlot(_ shard: Int) -> Int { (shard * HashSlot.count + shardCount - 1) / shardCount }
        return firstSlot(shard)..<firstSlot(shard + 1)
    }
}

/// A routing request that cannot be satisfied, with a message that says why.
public struct ShardRouterError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
