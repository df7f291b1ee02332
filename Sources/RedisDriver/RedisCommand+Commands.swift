/// The commands the service uses, named after Redis's own. Anything else can be built with
/// `RedisCommand(_:_:)`.
extension RedisCommand {
    public static func ping() -> RedisCommand { RedisCommand("PING") }
    /// `WAIT replicas timeout`: blocks the connection until its writes so far are on `replicas`
    /// replicas, or `timeout` (whole milliseconds, at least 1) passed; answers how many have them.
    public static func wait(replicas: Int, timeout: Duration) -> RedisCommand {
        RedisCommand(
            "WAIT", Int64(replicas), max(Int64(1), Int64(timeout.components.seconds) * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000))
    }
    public static func get(_ key: String) -> RedisCommand { RedisCommand("GET", key) }
    public static func set(_ key: String, _ value: RedisArgument) -> RedisCommand { RedisCommand("SET", key, value) }
    public static func incrBy(_ key: String, _ amount: Int64) -> RedisCommand { RedisCommand("INCRBY", key, amount) }
    public static func del(_ keys: [String]) -> RedisCommand { RedisCommand("DEL", keys) }
    public static func exists(_ keys: [String]) -> RedisCommand { RedisCommand("EXISTS", keys) }
    /// `RENAME source destination`: replaces `destination`, keeping `source`'s expiry.
    public static func rename(_ source: String, to destination: String) -> RedisCommand { RedisCommand("RENAME", source, destination) }
    public static func expire(_ key: String, seconds: Int) -> RedisCommand { RedisCommand("EXPIRE", key, seconds) }
    public static func persist(_ key: String) -> RedisCommand { RedisCommand("PERSIST", key) }

    // Sets: membership of a post's likers.
    public static func sadd(_ key: String, _ members: [RedisArgument]) -> RedisCommand { RedisCommand("SADD", [key] + members) }
    public static func srem(_ key: String, _ members: [RedisArgument]) -> RedisCommand { RedisCommand("SREM", [key] + members) }
    public static func sismember(_ key: String, _ member: RedisArgument) -> RedisCommand { RedisCommand("SISMEMBER", key, member) }
    /// One reply per member, 1 or 0 (Redis ≥ 6.2).
    public static func smismember(_ key: String, _ members: [RedisArgument]) -> RedisCommand { RedisCommand("SMISMEMBER", [key] + members) }
    public static func scard(_ key: String) -> RedisCommand { RedisCommand("SCARD", key) }

    // Hashes: a warm post's count and known memberships.
    /// `HSET key field value …`.
    public static func hset(_ key: String, _ pairs: [(RedisArgument, RedisArgument)]) -> RedisCommand {
        var arguments: [RedisArgument] = [key]
        arguments.reserveCapacity(1 + pairs.count * 2)
        for (field, value) in pairs {
            arguments.append(field)
            arguments.append(value)
        }
        return RedisCommand("HSET", arguments)
    }
    /// `HMGET key field …`: one reply per field, its value or null.
    public static func hmget(_ key: String, _ fields: [RedisArgument]) -> RedisCommand { RedisCommand("HMGET", [key] + fields) }
    public static func hgetall(_ key: String) -> RedisCommand { RedisCommand("HGETALL", key) }
    public static func hdel(_ key: String, _ fields: [RedisArgument]) -> RedisCommand { RedisCommand("HDEL", [key] + fields) }

    // Streams: the write-behind log.
    /// `XADD key * field value …` (the server assigns the id).
    public static func xadd(_ key: String, fields: [(String, RedisArgument)]) -> RedisCommand {
        var arguments: [RedisArgument] = [key, "*"]
        for (field, value) in fields {
            arguments.append(field)
            arguments.append(value)
        }
        return RedisCommand("XADD", arguments)
    }
    /// `XGROUP CREATE key group id MKSTREAM`: the group starts reading after `startID` (`0` for all).
    public static func xgroupCreate(_ key: String, group: String, startID: String = "0") -> RedisCommand {
        RedisCommand("XGROUP", "CREATE", key, group, startID, "MKSTREAM")
    }
    /// `XREADGROUP GROUP g c COUNT n STREAMS key id`: `>` reads new entries, `0` re-reads the
    /// consumer's pending ones. Never blocks.
    public static func xreadgroup(group: String, consumer: String, count: Int, key: String, id: String = ">") -> RedisCommand {
        RedisCommand("XREADGROUP", "GROUP", group, consumer, "COUNT", count, "STREAMS", key, id)
    }
    public static func xack(_ key: String, group: String, ids: [StreamEntryID]) -> RedisCommand {
        RedisCommand("XACK", [key, group] + ids.map(\.description))
    }
    public static func xdel(_ key: String, ids: [StreamEntryID]) -> RedisCommand {
        RedisCommand("XDEL", [key] + ids.map(\.description))
    }
    public static func xlen(_ key: String) -> RedisCommand { RedisCommand("XLEN", key) }
    /// `XREVRANGE key + - COUNT n`: the newest `n` entries, newest first.
    public static func xrevrange(_ key: String, count: Int) -> RedisCommand {
        RedisCommand("XREVRANGE", key, "+", "-", "COUNT", count)
    }
    /// `XTRIM key MINID <id>`: removes the entries older than `id`; replies how many went.
    public static func xtrim(_ key: String, olderThan id: StreamEntryID) -> RedisCommand {
        RedisCommand("XTRIM", key, "MINID", id.description)
    }
    /// `XRANGE key start end COUNT n`.
    public static func xrange(_ key: String, start: String = "-", end: String = "+", count: Int) -> RedisCommand {
        RedisCommand("XRANGE", key, start, end, "COUNT", count)
    }

    // Scripts.
    public static func scriptLoad(_ script: String) -> RedisCommand { RedisCommand("SCRIPT", "LOAD", script) }
    public static func evalsha(_ sha: String, keys: [String], arguments: [RedisArgument]) -> RedisCommand {
        RedisCommand("EVALSHA", [sha, keys.count] + keys + arguments)
    }
}
