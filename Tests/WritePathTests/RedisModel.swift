import RedisDriver
import ShardRouter
import TestSupport

/// A tiny in-memory Redis for tests of the shard's batch protocol: sets, strings, hashes and
/// streams, and just the commands a batch sends (`EXISTS`, `GET`, `SCARD`, `SMISMEMBER`, `SADD`,
/// `SREM`, `HMGET`, `HGETALL`, `HSET`, `HDEL`, `DEL`, `UNLINK`, `SET`, `XADD`). It runs the commands themselves, decoded from their RESP encoding, so a test
/// checks what the protocol really emits.
struct RedisModel {
    /// How a group fails, when it does.
    enum Fault {
        /// Its node is down: nothing ran (`connectionFailed`).
        case nodeDown
        /// The connection broke before the commands ran (`connectionLost`).
        case lostBeforeRunning
        /// The connection broke after the commands ran (`connectionLost`).
        case lostAfterRunning
    }

    var sets: [String: Set<String>] = [:]
    var strings: [String: String] = [:]
    var hashes: [String: [String: String]] = [:]
    var streams: [String: [StreamEntry]] = [:]
    private var milliseconds: UInt64 = 1_700_000_000_000
    private var sequence: UInt64 = 0

    /// Runs `groups` as `RedisClient.execute` would: one result per group, an atomic group's
    /// result being the replies inside its `EXEC`. `fault` may break a group.
    mutating func execute(_ groups: [SlotCommands], fault: (SlotCommands) -> Fault? = { _ in nil }) -> [Result<[RedisReply], RedisError>] {
        groups.map { group in
            switch fault(group) {
            case .nodeDown?:
                return .failure(RedisError(code: .connectionFailed, message: "model: the node is down"))
            case .lostBeforeRunning?:
                return .failure(RedisError(code: .connectionLost, message: "model: lost before running"))
            case .lostAfterRunning?:
                for command in group.commands { _ = run(command) }
                return .failure(RedisError(code: .connectionLost, message: "model: lost after running"))
            case nil:
                return .success(group.commands.map { run($0) })
            }
        }
    }

    /// The members of the set at `key`, as integers.
    func members(_ key: String) -> Set<Int64> {
        Set((sets[key] ?? []).map { Int64($0)! })
    }

    /// Runs one command and returns its reply.
    mutating func run(_ command: RedisCommand) -> RedisReply {
        let arguments = command.decodedArguments
        let key = arguments.count > 1 ? arguments[1] : ""
        switch arguments[0] {
        case "EXISTS":
            return .integer(
                Int64(arguments.dropFirst().filter { sets[$0] != nil || strings[$0] != nil || hashes[$0] != nil || streams[$0] != nil }.count))
        case "GET":
            guard sets[key] == nil, hashes[key] == nil, streams[key] == nil else { return .error("WRONGTYPE model: not a string") }
            return strings[key].map { .bulkString(Array($0.utf8)) } ?? .null
        case "HMGET":
            guard sets[key] == nil, strings[key] == nil else { return .error("WRONGTYPE model: not a hash") }
            return .array(arguments.dropFirst(2).map { field in hashes[key]?[field].map { .bulkString(Array($0.utf8)) } ?? .null })
        case "HGETALL":
            guard sets[key] == nil, strings[key] == nil else { return .error("WRONGTYPE model: not a hash") }
            return .array(
                (hashes[key] ?? [:]).sorted { $0.key < $1.key }.flatMap {
                    [RedisReply.bulkString(Array($0.key.utf8)), .bulkString(Array($0.value.utf8))]
                })
        case "HDEL":
            guard sets[key] == nil, strings[key] == nil else { return .error("WRONGTYPE model: not a hash") }
            var hash = hashes[key] ?? [:]
            let removed = arguments.dropFirst(2).filter { hash.removeValue(forKey: $0) != nil }.count
            hashes[key] = hash.isEmpty ? nil : hash // Redis deletes an empty hash
            return .integer(Int64(removed))
        case "HSET":
            guard sets[key] == nil, strings[key] == nil, arguments.count >= 4, arguments.count % 2 == 0 else {
                return .error("ERR model: HSET takes a key and pairs")
            }
            var hash = hashes[key] ?? [:]
            var added = 0
            for index in stride(from: 2, to: arguments.count, by: 2) where hash.updateValue(arguments[index + 1], forKey: arguments[index]) == nil {
                added += 1
            }
            hashes[key] = hash
            return .integer(Int64(added))
        case "SCARD":
            return .integer(Int64(sets[key]?.count ?? 0))
        case "SMISMEMBER":
            return .array(arguments.dropFirst(2).map { .integer(sets[key]?.contains($0) == true ? 1 : 0) })
        case "SADD":
            var set = sets[key] ?? []
            let added = arguments.dropFirst(2).filter { set.insert($0).inserted }.count
            sets[key] = set
            return .integer(Int64(added))
        case "SREM":
            var set = sets[key] ?? []
            let removed = arguments.dropFirst(2).filter { set.remove($0) != nil }.count
            sets[key] = set.isEmpty ? nil : set // Redis deletes an empty set
            return .integer(Int64(removed))
        case "DEL", "UNLINK":
            var deleted = 0
            for key in arguments.dropFirst() {
                if sets.removeValue(forKey: key) != nil || strings.removeValue(forKey: key) != nil
                    || hashes.removeValue(forKey: key) != nil || streams.removeValue(forKey: key) != nil
                {
                    deleted += 1
                }
            }
            return .integer(Int64(deleted))
        case "SET":
            strings[key] = arguments[2]
            return .status("OK")
        case "XADD":
            guard arguments[2] == "*", arguments.count % 2 == 1 else { return .error("ERR model: XADD takes * and pairs") }
            sequence += 1
            let id = StreamEntryID(milliseconds: milliseconds, sequence: sequence)
            var fields: [String: [UInt8]] = [:]
            for index in stride(from: 3, to: arguments.count, by: 2) { fields[arguments[index]] = Array(arguments[index + 1].utf8) }
            streams[key, default: []].append(StreamEntry(id: id, fields: fields))
            return .bulkString(Array(id.description.utf8))
        default:
            return .error("ERR model: unknown command '\(arguments[0])'")
        }
    }
}
