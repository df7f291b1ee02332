import ShardRouter

/// The epoch a writer must hold for its writes to a slot to run: a key of the slot that holds
/// the slot's epoch (which key is the service's layout: `RedisKeyLayout.epoch(of:)`), and the
/// value it must have. A group of `SlotCommands` with a fence runs as one script that compares
/// the key and runs the commands only on a match, atomically — a node that lost the slot
/// (paused, partitioned, slow to notice) is refused by Redis itself, on every write, even before
/// it learns that it lost it. A missing key refuses too (fail closed).
public struct SlotFence: Sendable, Hashable {
    /// The slot's epoch key.
    public let key: String
    /// The epoch the writer holds.
    public let epoch: Int64

    public init(key: String, epoch: Int64) {
        self.key = key
        self.epoch = epoch
    }
}

/// The script that fences slot writes in Redis, and how a fenced group is sent (`SlotDispatch`).
public enum FencedScript {
    /// Runs the commands in `ARGV[2…]` (each as its argument count, then its arguments) if
    /// `KEYS[1]` holds `ARGV[1]`, and returns their replies as `EXEC` would (an error reply in
    /// place of a command that failed, the others still run); otherwise refuses with `FENCED`.
    public static let guardedWrite = """
        local held = redis.call('GET', KEYS[1])
        if held ~= ARGV[1] then
          return redis.error_reply('FENCED slot epoch is ' .. (held or 'missing') .. ', the writer holds ' .. ARGV[1])
        end
        local replies = {}
        local i = 2
        local last = #ARGV
        while i <= last do
          local n = tonumber(ARGV[i])
          replies[#replies + 1] = redis.pcall(unpack(ARGV, i + 1, i + n))
          i = i + n + 1
        end
        return replies
        """

    /// The SHA-1 of `guardedWrite`, under which Redis caches it (`EVALSHA`). A test checks it
    /// against `SCRIPT LOAD`.
    public static let guardedWriteSHA = "0c35b1b41b63d57ba4be21dd555122e0d89148b2"

    /// Several fenced groups in one script, for a Redis that is not a cluster (where a script may
    /// touch keys of any slot): `KEYS[g]` is group g's epoch key; `ARGV` holds, per group, the
    /// epoch it must hold, the number of arguments of its commands that follow, then its
    /// commands as in `guardedWrite`. Returns one element per group: the replies of its commands,
    /// or the `FENCED` error for a group whose epoch is not held (the others still run). One
    /// script instead of one per slot saves Redis the call's own cost per slot, which on a spread
    /// batch (a slot per change) was about half of the write.
    public static let guardedWrites = """
        local results = {}
        local i = 1
        for g = 1, #KEYS do
          local epoch = ARGV[i]
          local stop = i + 1 + tonumber(ARGV[i + 1])
          local held = redis.call('GET', KEYS[g])
          if held ~= epoch then
            results[g] = redis.error_reply('FENCED slot epoch is ' .. (held or 'missing') .. ', the writer holds ' .. epoch)
          else
            local replies = {}
            local j = i + 2
            while j <= stop do
              local n = tonumber(ARGV[j])
              replies[#replies + 1] = redis.pcall(unpack(ARGV, j + 1, j + n))
              j = j + n + 1
            end
            results[g] = replies
          end
          i = stop + 1
        end
        return results
        """

    /// The SHA-1 of `guardedWrites`. A test checks it against `SCRIPT LOAD`.
    public static let guardedWritesSHA = "62c299fa8a88196a7f54d1e6e14764ae69d9279b"

    /// Most groups one `guardedWrites` script carries: it runs atomically, so other clients of
    /// Redis wait for all of it; 64 slots' writes take well under a millisecond.
    public static let maximumGroupsPerScript = 64

    /// Most arguments one command in a fenced group may have: Lua's `unpack` refuses more than
    /// about 8,000 values, so callers split larger `SADD`s and `SREM`s.
    public static let maximumArgumentsPerCommand = 4_000

    /// `EVALSHA` (or, with `loadingScript`, `EVAL` with the script's text, which also puts it in
    /// Redis's cache) of `guardedWrite` over `commands`, fenced by `fence`.
    static func command(for commands: [RedisCommand], fence: SlotFence, loadingScript: Bool) -> RedisCommand {
        let arguments: [[UInt8]] = [
            Array((loadingScript ? guardedWrite : guardedWriteSHA).utf8), Array("1".utf8), Array(fence.key.utf8),
            Array(String(fence.epoch).utf8),
        ]
        var tail: [UInt8] = []
        let count = arguments.count + appendArguments(of: commands, to: &tail)
        return RedisCommand(preEncodedName: loadingScript ? "EVAL" : "EVALSHA", leading: arguments, argumentCount: count, tail: tail)
    }

    /// `EVALSHA` (or `EVAL`) of `guardedWrites` over several fenced groups, in order.
    static func command(forGroups groups: [(commands: [RedisCommand], fence: SlotFence)], loadingScript: Bool) -> RedisCommand {
        var leading: [[UInt8]] = [Array((loadingScript ? guardedWrites : guardedWritesSHA).utf8), Array(String(groups.count).utf8)]
        leading.reserveCapacity(2 + groups.count)
        for group in groups { leading.append(Array(group.fence.key.utf8)) }
        var tail: [UInt8] = []
        var count = leading.count
        var body: [UInt8] = []
        for group in groups {
            body.removeAll(keepingCapacity: true)
            let arguments = appendArguments(of: group.commands, to: &body)
            RESPEncoding.appendBulk(group.fence.epoch, to: &tail)
            RESPEncoding.appendBulk(Int64(arguments), to: &tail)
            tail.append(contentsOf: body)
            count += 2 + arguments
        }
        return RedisCommand(preEncodedName: loadingScript ? "EVAL" : "EVALSHA", leading: leading, argumentCount: count, tail: tail)
    }

    /// Appends `commands` as the scripts read them — each as its argument count, then its
    /// arguments — and returns how many script arguments that is. `encoded` is `*<n>\r\n` then
    /// n bulk strings: n goes as a bulk string, then the same bulk strings as they are.
    private static func appendArguments(of commands: [RedisCommand], to tail: inout [UInt8]) -> Int {
        var count = 0
        for command in commands {
            let (n, headerLength) = arrayHeader(command.encoded)
            RESPEncoding.appendBulk(Int64(n), to: &tail)
            tail.append(contentsOf: command.encoded[headerLength...])
            count += 1 + n
        }
        return count
    }

    /// The element count of a RESP array header (`*<n>\r\n`) and its length in bytes.
    private static func arrayHeader(_ bytes: [UInt8]) -> (count: Int, length: Int) {
        var count = 0
        var index = 1
        while bytes[index] != 13 {
            count = count * 10 + Int(bytes[index] - 48)
            index += 1
        }
        return (count, index + 2)
    }
}
