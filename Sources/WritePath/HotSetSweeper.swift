import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// Keeps Redis a hot set across restarts and under a memory target: the I/O beside the shards
/// that they cannot do themselves, because it concerns a Redis master, not a slot. Three loops
/// run side by side (a walk of a large Redis takes seconds and must delay neither of the others):
///
/// - **Discovery**: once the idle time has passed since the start (no post from before could
///   be evicted sooner; and a short-lived process never walks a large Redis) — and, on a node of
///   a cluster, whose slots come and go, every `discoveryInterval` after — it walks each
///   master's keys (`SCAN … MATCH <prefix>:{*}:hydrated:*`, 10,000 at a time: the walk visits
///   every key of the Redis, whatever its prefix) and tells each shard which of its
///   posts Redis holds, so posts loaded before this process started — which no batch may touch
///   again — are evicted once idle like the others.
/// - **Dead letters**: at the start and every `deadLetterInterval`, it reads the dead-letter
///   stream and tells each shard which of its posts have refused changes there: those stay in
///   Redis until the letters are replayed or dropped (`DeadLetterPins`), on a connection of
///   its own.
/// - **Memory**: every `memoryInterval` it reads each master's `INFO memory` (for `/metrics`)
///   and, with a `hotMemoryTarget`, asks the shards to evict their least recently touched
///   posts on a master above it (`HotSetPlan.shrinkRequests`), as far as nothing of them is
///   pending — the shards decide; this only measures and asks.
struct HotSetSweeper: Sendable {
    /// For the walks and the memory checks.
    let redis: RedisClient
    /// For the reads of the dead letters: a connection of their own, never behind a walk's page.
    let lettersRedis: RedisClient
    let layout: RedisKeyLayout
    let configuration: WritePathConfiguration
    let shardMap: ShardMap
    let shards: [Shard]
    /// Whether keys are walked again after the start (a node of a cluster gains slots later).
    let repeatsDiscovery: Bool
    let log: NodeLog

    static let memoryInterval: Duration = .seconds(1)

    /// When keys are first walked, after the start: the idle time, at most 5 min.
    var firstDiscovery: Duration {
        min(.seconds(300), configuration.hotIdle ?? .seconds(300))
    }

    /// How often keys are walked again after that (a node of a cluster): the idle time, between
    /// 10 s and 5 min.
    var discoveryInterval: Duration {
        max(.seconds(10), firstDiscovery)
    }

    /// How often the dead-letter stream is read again (`DeadLetterPins`).
    static let deadLetterInterval: Duration = .seconds(5)

    /// Most dead letters a read takes: above it, the pins stay as the last read left them (and
    /// a shard that never had a read, or gained slots since, evicts nothing).
    static let deadLettersReadLimit = 100_000

    /// Runs until cancelled: three loops side by side, so that a long walk of a large Redis
    /// delays neither the reads of the dead letters nor the memory checks.
    func run() async {
        let evicts = configuration.hotIdle != nil || configuration.hotMemoryTarget != nil
        await withDiscardingTaskGroup { group in
            if evicts {
                group.addTask {
                    while !Task.isCancelled {
                        await readDeadLetters()
                        try? await Task.sleep(for: Self.deadLetterInterval)
                    }
                }
                group.addTask {
                    try? await Task.sleep(for: firstDiscovery)
                    while !Task.isCancelled {
                        await discover()
                        guard repeatsDiscovery else { return }
                        try? await Task.sleep(for: discoveryInterval)
                    }
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    await measureMemory()
                    try? await Task.sleep(for: Self.memoryInterval)
                }
            }
        }
    }

    // MARK: - Dead letters

    /// Reads the whole dead-letter stream and tells every shard which of its posts have
    /// refused changes there (the posts it must keep in Redis). An empty stream costs one
    /// `XLEN`.
    func readDeadLetters() async {
        let started = ContinuousClock.now
        var posts: [Int64] = []
        do {
            let length = try await lettersRedis.send(.xlen(layout.deadLetters), slot: layout.deadLettersSlot).throwingServerError().integer ?? 0
            guard length <= Self.deadLettersReadLimit else {
                log.log(
                    .warn, "dead_letters_not_read",
                    [
                        "letters": String(length), "limit": String(Self.deadLettersReadLimit),
                        "why": "too many to read: posts are evicted as the last read allowed; replay or drop them",
                    ])
                return
            }
            var start = "-"
            while length > 0 {
                guard !Task.isCancelled else { return }
                let entries = try await lettersRedis.send(.xrange(layout.deadLetters, start: start, count: 1_000), slot: layout.deadLettersSlot)
                    .streamEntries()
                posts += HotSetPlan.pinnedPosts(in: entries)
                guard entries.count == 1_000, let last = entries.last else { break }
                start = "(" + last.id.description
            }
        } catch {
            log.log(.warn, "dead_letters_read_failed", ["error": "\(error)"])
            return
        }
        let byShard = HotSetPlan.byShard(posts, shardMap: shardMap)
        for index in shards.indices {
            shards[index].tell(.deadLettersRead(Set(byShard[index] ?? []), startedAt: started))
        }
    }

    // MARK: - Discovery

    /// Walks every master's hydration markers and hands the posts to their shards.
    func discover() async {
        let pattern = HotSetPlan.markerPattern(layout)
        for shard in shards { shard.tell(.discoveryBegan) }
        defer { for shard in shards { shard.tell(.discoveryEnded) } }
        for master in redis.masters {
            var cursor = "0"
            repeat {
                guard !Task.isCancelled else { return }
                do {
                    let reply = try await redis.pipeline([RedisCommand("SCAN", cursor, "MATCH", pattern, "COUNT", "10000")], toMaster: master)[0]
                        .throwingServerError()
                    guard let (next, keys) = HotSetPlan.scanPage(reply) else { break }
                    cursor = next
                    let posts = keys.compactMap { HotSetPlan.post(ofMarker: $0, layout: layout) }
                    for (shard, posts) in HotSetPlan.byShard(posts, shardMap: shardMap) {
                        shards[shard].tell(.discovered(posts))
                    }
                } catch {
                    log.log(.warn, "hot_set_discovery_failed", ["redis": "\(master)", "error": "\(error)"])
                    break
                }
            } while cursor != "0"
        }
    }

    // MARK: - Memory

    /// Reads every master's memory; above the target, asks the shards to shrink there.
    func measureMemory() async {
        var used: [RedisEndpoint: Int] = [:]
        for master in redis.masters {
            guard let reply = try? await redis.pipeline([RedisCommand("INFO", "memory")], toMaster: master)[0],
                case .bulkString(let bytes) = reply,
                let memory = RedisMemoryInfo.parse(String(decoding: bytes, as: UTF8.self))
            else { continue }
            redis.topology.recordMemory(master, memory)
            used[master] = memory.usedBytes
        }
        guard let target = configuration.hotMemoryTarget else { return }
        let map = redis.topology.map
        let hotPosts = await shardHotPosts()
        for request in HotSetPlan.shrinkRequests(
            used: used, target: target, isCluster: redis.topology.isCluster,
            slotsOf: { master in map.slots(of: master) }, hotPostsPerShard: hotPosts)
        {
            shards[request.shard].tell(.shrink(slots: request.slots, count: request.count))
        }
    }

    private func shardHotPosts() async -> [Int] {
        var counts: [Int] = []
        for shard in shards { counts.append(await shard.ask { .statistics($0) }.hotPosts) }
        return counts
    }
}

/// The pure parts of `HotSetSweeper`: key patterns, `SCAN` pages, and how much to ask each
/// shard to evict.
enum HotSetPlan {
    /// The `SCAN MATCH` pattern of every hydration marker under `layout` (glob characters of
    /// the prefix escaped).
    static func markerPattern(_ layout: RedisKeyLayout) -> String {
        var escaped = ""
        for character in layout.prefix {
            if "*?[]\\".contains(character) { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped + ":{*}:hydrated:*"
    }

    /// The post id of a marker key (`<prefix>:{tag}:hydrated:<post>`), `nil` for another key.
    static func post(ofMarker key: String, layout: RedisKeyLayout) -> Int64? {
        guard let colon = key.lastIndex(of: ":"), let post = Int64(key[key.index(after: colon)...]), post > 0,
            key == layout.hydratedMarker(ofPost: post)
        else { return nil }
        return post
    }

    /// A `SCAN` reply: the next cursor and the keys.
    static func scanPage(_ reply: RedisReply) -> (cursor: String, keys: [String])? {
        guard let parts = reply.array, parts.count == 2, case .bulkString(let cursor) = parts[0], let keys = parts[1].array else { return nil }
        return (
            String(decoding: cursor, as: UTF8.self),
            keys.compactMap { key in
                if case .bulkString(let bytes) = key { return String(decoding: bytes, as: UTF8.self) }
                return nil
            }
        )
    }

    /// The posts of the refused changes among dead letters (those with an SQLSTATE: their
    /// change is in Redis and not in PostgreSQL).
    static func pinnedPosts(in letters: [StreamEntry]) -> [Int64] {
        letters.compactMap { letter in
            letter.fields["sqlstate"] == nil ? nil : ChangeLogEntry.change(from: letter)?.postID
        }
    }

    /// `posts` grouped by the shard that owns their slot.
    static func byShard(_ posts: [Int64], shardMap: ShardMap) -> [Int: [Int64]] {
        var grouped: [Int: [Int64]] = [:]
        for post in posts { grouped[shardMap.shard(forPost: post), default: []].append(post) }
        return grouped
    }

    /// What to ask of whom.
    struct ShrinkRequest: Equatable {
        let shard: Int
        /// The slots of the master above its target (`nil`: every slot — one Redis).
        let slots: Set<UInt16>?
        let count: Int
    }

    /// For every master whose `used` bytes are above `target`: each shard evicts the share of
    /// its hot posts that the excess is of the master's memory (at least 100 posts, so a small
    /// excess still moves, at most 5,000 per round): measured again a second later, the
    /// requests shrink as memory falls.
    static func shrinkRequests(
        used: [RedisEndpoint: Int], target: Int, isCluster: Bool,
        slotsOf: (RedisEndpoint) -> Set<UInt16>, hotPostsPerShard: [Int]
    ) -> [ShrinkRequest] {
        var requests: [ShrinkRequest] = []
        for (master, bytes) in used.sorted(by: { $0.key < $1.key }) where bytes > target && bytes > 0 {
            let share = Double(bytes - target) / Double(bytes)
            let slots: Set<UInt16>? = isCluster ? slotsOf(master) : nil
            for (shard, hot) in hotPostsPerShard.enumerated() where hot > 0 {
                let count = min(5_000, max(100, Int((Double(hot) * share).rounded(.up))))
                requests.append(ShrinkRequest(shard: shard, slots: slots, count: count))
            }
        }
        return requests
    }
}
