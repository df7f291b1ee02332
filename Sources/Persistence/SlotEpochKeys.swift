import RedisDriver
import ShardRouter

/// Setting the slots' epoch keys in Redis (`RedisKeyLayout.epoch(of:)`), which fence every
/// write for a slot (`SlotFence`). Only a node that has just won a slot in PostgreSQL sets its
/// key, and a key only ever rises: a claim delayed past a later one cannot bring an old owner
/// back.
public enum SlotEpochKeys {
    /// Raises each slot's epoch key to the given epoch (a key already higher stays).
    /// - Returns: per slot, in order, the epoch its key holds afterwards — the given one, or a
    ///   higher one when a later claim got there first — or why it could not be set.
    public static func raise(
        _ epochs: [(slot: HashSlot, epoch: Int64)], layout: RedisKeyLayout,
        redis: RedisClient
    ) async -> [Result<Int64, RedisError>] {
        let groups = epochs.map { slot, epoch in
            SlotCommands(
                slot: slot,
                commands: [
                    RedisCommand("EVAL", raiseEpoch, 1, layout.epoch(of: slot), epoch)
                ])
        }
        var results: [Result<Int64, RedisError>] = []
        results.reserveCapacity(groups.count)
        for start in stride(from: 0, to: groups.count, by: 4_096) {
            let part = Array(groups[start..<min(start + 4_096, groups.count)])
            for result in await redis.execute(part) {
                results.append(
                    result.flatMap { replies in
                        if case .error(let text) = replies.first { return .failure(RedisError(code: .server, message: "(Redis) \(text)")) }
                        guard let held = replies.first?.integer else {
                            return .failure(RedisError(code: .unexpectedReply, message: "raising an epoch key answered \(replies)"))
                        }
                        return .success(held)
                    })
            }
        }
        return results
    }

    /// Raises `KEYS[1]` to `ARGV[1]` if that is higher than what it holds (or it holds nothing),
    /// and returns the epoch it holds afterwards: a claim that finds a higher epoch there was
    /// overtaken by a later one and must not serve.
    static let raiseEpoch = """
        local held = tonumber(redis.call('GET', KEYS[1]) or '0')
        local wanted = tonumber(ARGV[1])
        if wanted > held then
          redis.call('SET', KEYS[1], ARGV[1])
          return wanted
        end
        return held
        """

    /// The epoch each slot's key holds (`nil`: none), or why it could not be read.
    public static func read(_ slots: [HashSlot], layout: RedisKeyLayout, redis: RedisClient) async -> [Result<Int64?, RedisError>] {
        let results = await redis.execute(slots.map { SlotCommands(slot: $0, commands: [RedisCommand("GET", layout.epoch(of: $0))]) })
        return results.map { result in
            result.map { replies in replies.first?.integer }
        }
    }
}
