import RedisDriver
import ShardRouter

/// `--ack replicated`: after a batch's writes, `WAIT` on every master it wrote to, on the shard's
/// own connection to it — on the very opening of it that carried the writes (`writtenOn`): `WAIT`
/// counts its own connection's writes, so on a connection reopened since it would confirm at once
/// writes it never carried. A master whose connection was reopened is not confirmed. All masters
/// at once.
enum ReplicaWait {
    static func wait(
        on slots: [UInt16], replicas: Int, timeout: Duration, writtenOn: RedisOpenings, redis: RedisClient
    ) async -> ReplicationOutcome {
        let map = redis.topology.map
        let owners = slots.map { ($0, HashSlot(rawValue: $0).flatMap(map.master(of:))) }
        // A slot with no master in the map now (a failover under way) cannot be confirmed by
        // the others' replicas.
        if let orphan = owners.first(where: { $0.1 == nil }) {
            return ReplicationOutcome(confirmed: false, detail: "no master serves slot \(orphan.0) now")
        }
        let masters = Set(owners.compactMap(\.1)).sorted()
        guard !masters.isEmpty else { return ReplicationOutcome(confirmed: false, detail: "no master serves the batch's slots") }
        let answers = await withTaskGroup(of: (RedisEndpoint, Result<Int64, RedisError>).self) { group in
            for master in masters {
                group.addTask {
                    (master, await redis.waitForReplicas(master: master, replicas: replicas, timeout: timeout, carriedBy: writtenOn))
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        var confirmed = true
        var parts: [String] = []
        for (master, answer) in answers.sorted(by: { $0.0 < $1.0 }) {
            switch answer {
            case .success(let count):
                if count < replicas { confirmed = false }
                parts.append("\(master): \(count) of \(replicas) replica(s)")
            case .failure(let error):
                confirmed = false
                parts.append("\(master): \(error.message)")
            }
        }
        return ReplicationOutcome(confirmed: confirmed, detail: parts.joined(separator: "; "))
    }
}
