import Synchronization

/// Tokens already verified, by the SHA-256 of their bytes: a keep-alive client sends the same
/// token with every request, and pays the signature check once. Bounded: sixteen shards, each
/// with two generations of at most `capacity / 16` entries; when the newer fills up, the older is
/// dropped and the newer takes its place, so memory stays under twice the capacity and the
/// tokens still in use stay (a hit in the older generation moves the token to the newer).
/// An entry is used only until the token's `exp` (plus leeway).
public final class VerifiedTokenCache: Sendable {
    struct Entry {
        let user: Int64
        let acceptedUntil: Double
    }

    private struct Generations {
        var current: [TokenDigest: Entry] = [:]
        var previous: [TokenDigest: Entry] = [:]
    }

    private final class Shard: Sendable {
        let generations = Mutex(Generations())
    }

    private let shards: [Shard]
    private let perShard: Int

    /// - Parameter capacity: tokens kept per generation across the shards (at least 16).
    public init(capacity: Int) {
        perShard = max(1, capacity / 16)
        shards = (0..<16).map { _ in Shard() }
    }

    /// The user of the token with `digest`, if it was verified and is still accepted at `now`.
    func user(for digest: TokenDigest, now: Double) -> Int64? {
        shards[digest.shard].generations.withLock { generations in
            if let entry = generations.current[digest] {
                return entry.acceptedUntil > now ? entry.user : nil
            }
            guard let entry = generations.previous.removeValue(forKey: digest), entry.acceptedUntil > now else { return nil }
            Self.insert(entry, for: digest, into: &generations, limit: perShard)
            return entry.user
        }
    }

    func remember(_ user: Int64, acceptedUntil: Double, for digest: TokenDigest) {
        shards[digest.shard].generations.withLock { generations in
            Self.insert(Entry(user: user, acceptedUntil: acceptedUntil), for: digest, into: &generations, limit: perShard)
        }
    }

    /// Forgets every token (the keys changed: one verified with a removed key is not good anymore).
    public func removeAll() {
        for shard in shards { shard.generations.withLock { $0 = Generations() } }
    }

    /// How many tokens are remembered.
    public var count: Int {
        shards.reduce(0) { total, shard in total + shard.generations.withLock { $0.current.count + $0.previous.count } }
    }

    private static func insert(_ entry: Entry, for digest: TokenDigest, into generations: inout Generations, limit: Int) {
        if generations.current.count >= limit {
            generations.previous = generations.current
            generations.current = [:]
        }
        generations.current[digest] = entry
    }
}
