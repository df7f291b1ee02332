import Persistence
import RedisDriver

/// Moves dead letters from the key versions before Redis Cluster support used (`cs:dead-letters`,
/// no hash tag) to today's (`cs:{dead-letters}`, one known slot). Only a single Redis can hold the
/// old key: those versions did not run on a cluster.
enum DeadLetterKeyUpgrade {
    /// Renames the old stream when the new one does not exist yet; otherwise copies its entries
    /// over (with their fields; new ids) and deletes it. A crash in the middle of a copy leaves
    /// letters in both, which the next start copies again: a letter may then be listed twice,
    /// and replaying it twice is harmless (a replay sets a state, it does not toggle).
    static func run(_ redis: RedisClient, layout: RedisKeyLayout) async throws {
        guard !redis.topology.isCluster else { return }
        let slot = layout.deadLettersSlot
        guard try await redis.send(.exists([layout.legacyDeadLetters]), slot: slot).integer == 1 else { return }
        if try await redis.send(RedisCommand("RENAMENX", layout.legacyDeadLetters, layout.deadLetters), slot: slot).integer == 1 {
            return
        }
        while true {
            let entries = try await redis.send(.xrange(layout.legacyDeadLetters, count: 1_000), slot: slot).streamEntries()
            guard !entries.isEmpty else { break }
            var commands: [RedisCommand] = entries.map { entry in
                .xadd(layout.deadLetters, fields: entry.fields.sorted { $0.key < $1.key }.map { ($0.key, $0.value as RedisArgument) })
            }
            commands.append(.xdel(layout.legacyDeadLetters, ids: entries.map(\.id)))
            for reply in try await redis.transaction(commands, slot: slot) { _ = try reply.throwingServerError() }
        }
        try await redis.send(.del([layout.legacyDeadLetters]), slot: slot)
    }
}
