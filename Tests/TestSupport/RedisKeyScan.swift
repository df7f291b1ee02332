import RedisDriver

/// The keys matching `pattern` on one Redis server, found with `SCAN … MATCH` a page at a time
/// — never `KEYS`, which holds the server for as long as it walks the whole keyspace: on a
/// development Redis with millions of keys left by benches, that stalled every test beside it
/// past its command timeout.
/// - Parameter send: sends one command to the server (or to the cluster node of a slot).
public func scanKeys(matching pattern: String, send: (RedisCommand) async throws -> RedisReply) async throws -> [String] {
    var cursor = "0"
    var keys: [String] = []
    repeat {
        let reply = try await send(RedisCommand("SCAN", cursor, "MATCH", pattern, "COUNT", "10000"))
        guard let parts = reply.array, parts.count == 2, let next = parts[0].string, let page = parts[1].array else {
            throw PrivateServersError(message: "SCAN answered \(reply)")
        }
        keys += page.compactMap(\.string)
        cursor = next
    } while cursor != "0"
    return keys
}
