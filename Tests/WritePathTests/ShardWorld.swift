import CounterCore
import Foundation
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter

@testable import WritePath

/// Redis and PostgreSQL in memory, as a whole shard sees them — the tests' one fake of the shard's
/// I/O: Redis is a `RedisModel` (the batches' commands run as Redis would run them, the logs are
/// its streams, the epoch keys its strings), PostgreSQL the `posts`, `likes` and `reactions` rows, each log's
/// recorded progress and the slot table's epochs. `perform` answers every I/O action of
/// `ShardStateMachine` as the real servers would — fences, the publication script, the flush
/// transaction's epoch check — so a test can drive shards through batches, flushes, evictions,
/// promotions, crashes and Redis losses with every interleaving it likes (`ShardDriver` drives
/// one shard step by step; `WholeShardModelTests` several processes at random).
///
/// It also keeps the books a test checks against: the truth (the initial rows with every
/// change ever appended to a log folded in, in the order Redis took them), every entry appended,
/// how many times each was applied, those trimmed, and the evictions that deleted a post whose
/// changes PostgreSQL did not all have.
final class ShardWorld {
    let layout: RedisKeyLayout
    var redis = RedisModel()
    /// The model's one Redis server, and which opening of the batches' connection to it is
    /// current: a fault on a batch's pipeline breaks the connection, and the next call opens it
    /// again (`RedisConnection.opening`).
    static let redisEndpoint = RedisEndpoint(host: "model", port: 6379)
    var batchConnectionOpening: UInt64 = 1
    /// PostgreSQL: the posts, their likers, each log's progress, the slot table's epochs.
    var posts: Set<Int64>
    var likes: [Int64: Set<Int64>]
    /// With reactions: the rows of other kinds, per post and user.
    var reactions: [Int64: [Int64: Set<ReactionKind>]] = [:]
    var progress: [String: StreamEntryID] = [:]
    var slotEpochs: [UInt16: Int64] = [:]

    /// The likers each post has once everything appended is applied.
    var truth: [Int64: Set<Int64>]
    /// The other kinds each post's users hold once everything appended is applied.
    var truthReactions: [Int64: [Int64: Set<ReactionKind>]] = [:]
    /// With one kind per user: the moments the truth had a user with two kinds (after a whole
    /// log entry, as every reader sees it): each one a bug.
    var twoKinds: [String] = []
    /// Whether a user may hold one kind of a post at most (checked in `twoKinds`).
    var oneKindPerUser = false
    /// Whether the deployment has other kinds than `like` (a promotion loads them too).
    var withReactions = false
    /// Every entry appended to a log (by its log), in order; how often each was applied; those trimmed.
    var appended: [(log: String, id: StreamEntryID)] = []
    var applied: [StreamEntryID: Int] = [:]
    var trimmed: Set<StreamEntryID> = []
    /// Evictions that deleted a post whose rows were not its truth: each one a bug.
    var unsafeEvictions: [String] = []
    /// How many posts evictions deleted, publications promoted, cold lookups asked about.
    var evictedPosts = 0
    var publications = 0
    var coldLookups = 0
    /// The newest entry of each log already folded into `truth`.
    private var folded: [String: StreamEntryID] = [:]

    /// A pool and a client a `WarmPostPromotion` is built with: never connected (the world
    /// performs its load and publication itself).
    static let idlePool = PostgresPool(configuration: PostgresConfiguration(url: "postgresql://model@127.0.0.1:1/model"))
    static let idleRedis = RedisClient(configuration: RedisConfiguration())

    init(layout: RedisKeyLayout, likes: [Int64: Set<Int64>], reactions: [Int64: [Int64: Set<ReactionKind>]] = [:]) {
        self.layout = layout
        self.posts = Set(likes.keys)
        self.likes = likes
        self.truth = likes
        self.reactions = reactions
        self.truthReactions = reactions
    }

    /// `change` laid over rows of likes and of other kinds.
    static func fold(_ change: LikeChange, likes: inout [Int64: Set<Int64>], reactions: inout [Int64: [Int64: Set<ReactionKind>]]) {
        if change.kind.isLike {
            if change.liked { likes[change.postID, default: []].insert(change.userID) } else { likes[change.postID]?.remove(change.userID) }
            return
        }
        var users = reactions[change.postID] ?? [:]
        var kinds = users[change.userID] ?? []
        if change.liked { kinds.insert(change.kind) } else { kinds.remove(change.kind) }
        users[change.userID] = kinds.isEmpty ? nil : kinds
        reactions[change.postID] = users.isEmpty ? nil : users
    }

    /// Every kind `user` holds of `post` in `likes` and `reactions`.
    static func kinds(of user: Int64, post: Int64, likes: [Int64: Set<Int64>], reactions: [Int64: [Int64: Set<ReactionKind>]]) -> Set<ReactionKind> {
        var kinds = reactions[post]?[user] ?? []
        if likes[post]?.contains(user) == true { kinds.insert(.like) }
        return kinds
    }

    /// Every kind's count of `post` in the truth (kinds above zero).
    func truthCounts(of post: Int64) -> [ReactionKind: Int64] {
        var counts: [ReactionKind: Int64] = [:]
        if let likers = truth[post], !likers.isEmpty { counts[.like] = Int64(likers.count) }
        for kinds in (truthReactions[post] ?? [:]).values { for kind in kinds { counts[kind, default: 0] += 1 } }
        return counts
    }

    // MARK: - Keys

    func logKey(_ slot: UInt16) -> String { layout.changeLog(of: HashSlot(rawValue: slot)!) }
    func epochKey(_ slot: UInt16) -> String { layout.epoch(of: HashSlot(rawValue: slot)!) }
    func marker(_ post: Int64) -> String? { redis.strings[layout.hydratedMarker(ofPost: post)] }

    // MARK: - Books

    /// Folds the entries Redis's logs gained since the last call into `truth`.
    func foldAppends() {
        for (log, entries) in redis.streams {
            for entry in entries where folded[log].map({ entry.id > $0 }) ?? true {
                folded[log] = entry.id
                appended.append((log, entry.id))
                let changes = ChangeLogEntry.changes(from: entry) ?? []
                for change in changes { Self.fold(change, likes: &truth, reactions: &truthReactions) }
                if oneKindPerUser {
                    for change in changes where Self.kinds(of: change.userID, post: change.postID, likes: truth, reactions: truthReactions).count > 1
                    {
                        twoKinds.append(
                            "entry \(entry.id): user \(change.userID) holds \(Self.kinds(of: change.userID, post: change.postID, likes: truth, reactions: truthReactions).sorted()) of post \(change.postID)"
                        )
                    }
                }
            }
        }
    }

    /// Applies an entry's changes to the rows.
    private func apply(_ id: StreamEntryID, _ changes: [LikeChange], skipping: Set<LikePair> = []) {
        applied[id, default: 0] += 1
        for change in changes where !skipping.contains(LikePair(change)) {
            Self.fold(change, likes: &likes, reactions: &reactions)
        }
    }

    /// What the next start (or the next owner) does first: applies what every log holds past its
    /// progress.
    func drainEverything() {
        for (log, entries) in redis.streams {
            for entry in entries where progress[log].map({ entry.id > $0 }) ?? true {
                apply(entry.id, ChangeLogEntry.changes(from: entry) ?? [])
                progress[log] = entry.id
            }
        }
    }

    /// Appends one entry of `changes` to `slot`'s log, as another process's batch did (the shard
    /// driven knows nothing of it): its id.
    @discardableResult
    func appendLogEntry(_ changes: [LikeChange], slot: UInt16) -> StreamEntryID {
        let reply = redis.run(RedisCommand.xadd(logKey(slot), fields: [(ChangeLogEntry.packedField, ChangeLogEntry.pack(changes))]))
        foldAppends()
        return StreamEntryID(reply.string ?? "")!
    }

    /// The newest entry of `slot`'s log, if any.
    func newestEntry(_ slot: UInt16) -> StreamEntryID? {
        redis.streams[logKey(slot)]?.last?.id
    }

    /// Redis loses what `slot`'s log holds (a failover before its replica had it, a restart
    /// without its data), and nothing else.
    func loseLog(_ slot: UInt16) {
        redis.streams[logKey(slot)] = []
    }

    /// Another node takes `slots` for good: PostgreSQL's slot table and Redis's epoch keys give
    /// each the epoch after the one PostgreSQL has (a shard still writing under the old one is
    /// refused by both).
    @discardableResult
    func anotherNodeTakes(_ slots: [UInt16]) -> [UInt16: Int64] {
        let epochs = takeOver(slots)
        for (slot, epoch) in epochs { redis.strings[epochKey(slot)] = String(epoch) }
        return epochs
    }

    /// Another node wins `slots`: PostgreSQL's slot table gives each the epoch after the one it has.
    func takeOver(_ slots: [UInt16]) -> [UInt16: Int64] {
        var epochs: [UInt16: Int64] = [:]
        for slot in slots {
            let next = (slotEpochs[slot] ?? 0) + 1
            slotEpochs[slot] = next
            epochs[slot] = next
        }
        return epochs
    }

    // MARK: - Redis writes, fenced

    /// Runs `groups` as `SlotWriter.execute` does: a group whose slot has no epoch fails unsent,
    /// one whose epoch is no longer its key's is refused (`FENCED`), the others run (or break as
    /// `fault` says).
    func fencedExecute(_ groups: [SlotCommands], epochs: [UInt16: Int64]?, fault: (SlotCommands) -> RedisModel.Fault?)
        -> (results: [Result<[RedisReply], RedisError>], fenced: [ShardStateMachine.FencedSlot])
    {
        var results: [Result<[RedisReply], RedisError>] = []
        var fenced: [ShardStateMachine.FencedSlot] = []
        for group in groups {
            let slot = group.slot.rawValue
            if let epochs {
                guard let epoch = epochs[slot] else {
                    results.append(.failure(SlotWriter.notHeld(group.slot)))
                    continue
                }
                if redis.strings[epochKey(slot)] != String(epoch) {
                    fenced.append(.init(slot: slot, epoch: epoch))
                    results.append(.failure(RedisError(code: .fenced, message: "FENCED model: slot \(slot) is not at epoch \(epoch)")))
                    continue
                }
            }
            results.append(redis.execute([group], fault: fault)[0])
        }
        foldAppends()
        return (results, fenced)
    }

    // MARK: - Performing actions

    /// How one action meets trouble.
    struct Trouble {
        /// Redis's connection breaks: before the commands run, or after.
        var redis: RedisModel.Fault?
        /// PostgreSQL fails: `true` before a commit (nothing happened), `false` after it (the
        /// commit happened, its answer was lost).
        var postgresBeforeCommit: Bool?

        static let none = Trouble()
    }

    /// Performs an I/O action now and returns the event that brings its result (`nil`: none).
    /// Answers, replies and log lines are the shell's, not the world's.
    func perform(_ action: ShardStateMachine.Action, trouble: Trouble = .none) -> ShardStateMachine.Event? {
        let lost = RedisError(code: .connectionLost, message: "model: the connection broke")
        let redisFault = trouble.redis
        switch action {
        case .answer, .answerBatch, .reply, .log, .setTimer, .cancelTimer:
            fatalError("the shell performs \(action)")

        case .batchRedis(let groups, let epochs):
            let (results, fenced) = fencedExecute(groups, epochs: epochs) { _ in redisFault }
            var openings = RedisOpenings()
            if redisFault == nil {
                openings.note(Self.redisEndpoint, opening: batchConnectionOpening)
            } else {
                batchConnectionOpening += 1
            }
            return .batchRedisReplied(results, fenced: fenced, openings: openings)

        case .readFlushProgress(let slots):
            if trouble.postgresBeforeCommit != nil {
                return .flushProgressRead(.failure(PostgresError(code: .connectionFailed, message: "model: down")))
            }
            var found: [UInt16: StreamEntryID] = [:]
            for slot in slots { found[slot] = progress[logKey(slot)] }
            return .flushProgressRead(.success(found))

        case .listSlotPosts(let slots):
            // The model's Redis is one server: it never fails over, so nothing asks this.
            return .slotPostsListed(Dictionary(uniqueKeysWithValues: slots.map { ($0, .success([])) }))

        case .awaitReplication(_, _, _, let writtenOn):
            // No replicas here: a fault stands for a WAIT that timed out. As the real client
            // does, the WAIT is asked only on the opening of the connection that carried the
            // writes; one reopened since confirms nothing.
            let sameOpening = writtenOn.opening(of: Self.redisEndpoint) == batchConnectionOpening
            return .replicationAwaited(
                ReplicationOutcome(confirmed: redisFault == nil && sameOpening, detail: sameOpening ? "model" : "model: the connection was reopened"))

        case .findPosts(let lookup, let take):
            if trouble.postgresBeforeCommit != nil {
                return .batchPostsFound(take: take, .failure(PostgresError(code: .connectionFailed, message: "model: down")))
            }
            coldLookups += lookup.posts.count
            let model = PostgresModel(posts: posts, likes: likes.mapValues { $0.sorted() }, reactions: reactions)
            return .batchPostsFound(take: take, .success(model.lookUp(lookup)))

        case .loadWarmPost(let post):
            let promotion = WarmPostPromotion(
                post: post, pool: Self.idlePool, redis: Self.idleRedis, layout: layout,
                pageSize: 3, reactions: withReactions)
            if trouble.postgresBeforeCommit != nil || redisFault == .lostBeforeRunning || redisFault == .nodeDown {
                return .warmPostLoaded(promotion, .failure(lost))
            }
            let users = likes[post] ?? []
            if !users.isEmpty { redis.sets[promotion.loading, default: []].formUnion(users.map(String.init)) }
            if let key = promotion.loadingReactions, let reactors = reactions[post], !reactors.isEmpty {
                var hash = redis.hashes[key] ?? [:]
                for (user, kinds) in reactors { hash[String(user)] = ReactionValues.kindsValue(kinds.sorted()) }
                redis.hashes[key] = hash
            }
            if redisFault == .lostAfterRunning { return .warmPostLoaded(promotion, .failure(lost)) }
            return .warmPostLoaded(promotion, .success(users.count))

        case .publishPromotion(let promotion, let loaded, let epoch):
            if redisFault == .lostBeforeRunning || redisFault == .nodeDown { return .promotionPublished(post: promotion.post, .failure(lost)) }
            let result = publish(promotion, loaded: loaded, epoch: epoch)
            if redisFault == .lostAfterRunning { return .promotionPublished(post: promotion.post, .failure(lost)) }
            return .promotionPublished(post: promotion.post, result)

        case .discardPromotion(let promotion):
            if redisFault == nil {
                redis.sets[promotion.loading] = nil
                if let key = promotion.loadingReactions { redis.hashes[key] = nil }
            }
            return nil

        case .raiseEpochKeys(let epochs, let forClaim, let then):
            var results: [UInt16: Result<Int64, RedisError>] = [:]
            for (slot, epoch) in epochs {
                if redisFault == .lostBeforeRunning || redisFault == .nodeDown {
                    results[slot] = .failure(lost)
                    continue
                }
                let held = max(Int64(redis.strings[epochKey(slot)] ?? "0")!, epoch)
                redis.strings[epochKey(slot)] = String(held)
                results[slot] = redisFault == nil ? .success(held) : .failure(lost)
            }
            then?.run()
            return forClaim ? .epochKeysRaised(results) : nil

        case .rescanLogs(let slots, let listing):
            var summaries: [UInt16: Result<ShardStateMachine.LogSummary, Error>] = [:]
            for slot in slots {
                if redisFault != nil {
                    summaries[slot] = .failure(lost)
                    continue
                }
                let entries = redis.streams[logKey(slot)] ?? []
                let perEntry = entries.last.flatMap { ChangeLogEntry.changes(from: $0)?.count } ?? 1
                summaries[slot] = .success(
                    .init(
                        changes: entries.count * max(1, perEntry), newest: entries.last?.id,
                        entries: listing.contains(slot) ? entries.map(\.id) : nil))
            }
            return .logsRescanned(summaries)

        case .readLogs(let slots, let changesPerSlot):
            if redisFault != nil { return .logsRead([:], failure: lost) }
            var reads: [UInt16: LogRead] = [:]
            for slot in slots { reads[slot] = Self.read(redis.streams[logKey(slot)] ?? [], changesPerSlot: changesPerSlot) }
            return .logsRead(reads, failure: nil)

        case .addDeadLetters(let letters, _):
            if redisFault == .lostBeforeRunning || redisFault == .nodeDown { return .deadLettersAdded(.failure(lost)) }
            for letter in letters {
                _ = redis.run(RedisCommand.xadd(layout.deadLetters, fields: letter.fields(log: logKey(letter.slot), reason: "model", at: "0")))
            }
            return .deadLettersAdded(redisFault == nil ? .success(()) : .failure(lost))

        case .applyFlush(let transaction):
            if trouble.postgresBeforeCommit == true {
                return .flushTransactionEnded(.failed(PostgresError(code: .connectionFailed, message: "model: down")))
            }
            let stale = transaction.epochs.filter { slotEpochs[$0.key] != $0.value }.keys.sorted()
            if !stale.isEmpty { return .flushTransactionEnded(.staleSlots(stale)) }
            var byEntry: [StreamEntryID: (log: String, changes: [LikeChange])] = [:]
            for change in transaction.entries { byEntry[change.entryID, default: (change.log, [])].changes.append(change.change) }
            for (id, entry) in byEntry.sorted(by: { $0.key < $1.key }) where progress[entry.log].map({ id > $0 }) ?? true {
                apply(id, entry.changes, skipping: transaction.skipping)
                progress[entry.log] = id
            }
            if trouble.postgresBeforeCommit == false {
                return .flushTransactionEnded(.failed(PostgresError(code: .connectionLost, message: "model: lost after commit")))
            }
            return .flushTransactionEnded(.committed(at: Date()))

        case .trimLogs(let newest, let epochs):
            var removed: [UInt16: Result<Int, RedisError>] = [:]
            var fenced: [ShardStateMachine.FencedSlot] = []
            for (slot, last) in newest {
                if let epochs {
                    guard let epoch = epochs[slot] else {
                        removed[slot] = .failure(SlotWriter.notHeld(HashSlot(rawValue: slot)!))
                        continue
                    }
                    if redis.strings[epochKey(slot)] != String(epoch) {
                        fenced.append(.init(slot: slot, epoch: epoch))
                        removed[slot] = .failure(RedisError(code: .fenced, message: "FENCED model"))
                        continue
                    }
                }
                if redisFault == .lostBeforeRunning || redisFault == .nodeDown {
                    removed[slot] = .failure(lost)
                    continue
                }
                let before = redis.streams[logKey(slot)] ?? []
                let kept = before.filter { $0.id > last }
                for entry in before where entry.id <= last { trimmed.insert(entry.id) }
                redis.streams[logKey(slot)] = kept
                removed[slot] = redisFault == nil ? .success(before.count - kept.count) : .failure(lost)
            }
            return .logsTrimmed(removed, fenced: fenced)

        case .readLogLengths(let question):
            var lengths: [UInt16: Int] = [:]
            if redisFault == nil {
                for slot in question.appendedWhenAsked.keys { lengths[slot] = redis.streams[logKey(slot)]?.count ?? 0 }
            }
            return .logLengthsRead(question, lengths)

        case .probePosts:
            fatalError("the model answers no operator's probe")

        case .unloadPosts(let unloading, let epochs, let purpose):
            let hadKeys = unloading.filter { marker($0) != nil }
            let groups = PostHydration.transactions(unloading: unloading, layout: layout)
            let (results, fenced) = fencedExecute(groups, epochs: epochs) { _ in redisFault }
            if case .evicted = purpose {
                for post in hadKeys where marker(post) == nil {
                    evictedPosts += 1
                    if likes[post] ?? [] != truth[post] ?? [] || reactions[post] ?? [:] != truthReactions[post] ?? [:] {
                        unsafeEvictions.append(
                            "post \(post) evicted with rows \((likes[post] ?? []).sorted()) \(reactions[post] ?? [:]) but truth \((truth[post] ?? []).sorted()) \(truthReactions[post] ?? [:])"
                        )
                    }
                }
            }
            return .postsUnloaded(purpose, failed: Set(PostHydration.failures(of: unloading, results).keys), fenced: fenced)
        }
    }

    /// A log's `entries` read as the flusher reads them: in slices sized by `LogRead`, up to
    /// `changesPerSlot` changes.
    static func read(_ entries: [StreamEntry], changesPerSlot: Int) -> LogRead {
        var read = LogRead()
        var rest = entries[...]
        while !rest.isEmpty {
            let asked = read.nextSliceSize(changesPerSlot: changesPerSlot)
            let slice = Array(rest.prefix(asked))
            rest = rest.dropFirst(slice.count)
            if !read.take(slice, asked: asked, changesPerSlot: changesPerSlot) { break }
        }
        return read
    }

    /// `PostHydration.publishScript`, run on the model: all or nothing.
    private func publish(_ promotion: WarmPostPromotion, loaded: Int, epoch: Int64?) -> Result<Void, Error> {
        let post = promotion.post
        let slot = HashSlot(post: post).rawValue
        if let epoch, redis.strings[epochKey(slot)] != String(epoch) {
            return .failure(RedisError(code: .fenced, message: "FENCED model"))
        }
        let warmKey = layout.warmMembers(ofPost: post)
        guard marker(post) == "warm", let hash = redis.hashes[warmKey], let count = hash["n"].flatMap({ Int($0) }) else {
            return .failure(RedisError(code: .server, message: "GONE the post is no longer warm in Redis"))
        }
        var set = redis.sets[promotion.loading] ?? []
        guard set.count == loaded else { return .failure(RedisError(code: .server, message: "INCOMPLETE model")) }
        for (field, value) in hash where field != "n" {
            if value.first == "1" { set.insert(field) } else { set.remove(field) }
        }
        guard set.count == count else {
            redis.sets[promotion.loading] = set
            return .failure(RedisError(code: .server, message: "MISMATCH model"))
        }
        // With reactions: the warm hash's kinds laid over the loading hash, counted against the
        // post's counts, as `PostHydration.publishWithReactionsScript` does.
        var loadedKinds: [String: String] = [:]
        if let key = promotion.loadingReactions {
            loadedKinds = redis.hashes[key] ?? [:]
            for (field, value) in hash where field != "n" {
                let kinds = String(value.dropFirst(2))
                loadedKinds[field] = kinds.isEmpty ? nil : kinds
            }
            var counted: [String: Int] = [:]
            for kinds in loadedKinds.values { for kind in kinds.split(separator: ",") { counted[String(kind), default: 0] += 1 } }
            let held = (redis.hashes[layout.reactionCounts(ofPost: post)] ?? [:]).mapValues { Int($0) ?? -1 }
            redis.hashes[key] = loadedKinds.isEmpty ? nil : loadedKinds
            guard counted == held else { return .failure(RedisError(code: .server, message: "MISMATCH model: kinds")) }
        }
        redis.sets[promotion.loading] = nil
        redis.sets[layout.likers(ofPost: post)] = set.isEmpty ? nil : set
        if let key = promotion.loadingReactions {
            redis.hashes[key] = nil
            redis.hashes[layout.reactions(ofPost: post)] = loadedKinds.isEmpty ? nil : loadedKinds
        }
        redis.hashes[warmKey] = nil
        redis.strings[layout.hydratedMarker(ofPost: post)] = "1"
        publications += 1
        return .success(())
    }

    // MARK: - Checks

    /// What disagrees between Redis's copy of each post and the truth: a hot post's likers set,
    /// a warm post's count and the memberships its hash knows.
    func redisDisagreements() -> [String] {
        var found: [String] = []
        for post in posts.sorted() {
            let expected = truth[post] ?? []
            switch marker(post) {
            case "1"?:
                if redis.members(layout.likers(ofPost: post)) != expected {
                    found.append("hot post \(post): Redis \(redis.members(layout.likers(ofPost: post)).sorted()), truth \(expected.sorted())")
                }
                // Each user's other kinds, whole.
                let held = (redis.hashes[layout.reactions(ofPost: post)] ?? [:]).mapValues { ReactionValues.kinds(Array($0.utf8)).map(Set.init) }
                let expectedOthers = truthReactions[post] ?? [:]
                if held.count != expectedOthers.count || expectedOthers.contains(where: { held[String($0.key)] != .some($0.value) }) {
                    found.append("hot post \(post): Redis's kinds \(held), truth \(expectedOthers)")
                }
                found += countDisagreements(post)
            case "warm"?:
                let hash = redis.hashes[layout.warmMembers(ofPost: post)] ?? [:]
                if hash["n"] != String(expected.count) { found.append("warm post \(post): count \(hash["n"] ?? "none"), truth \(expected.count)") }
                for (field, value) in hash where field != "n" {
                    let user = Int64(field)!
                    let truthOthers = truthReactions[post]?[user] ?? []
                    guard let (liked, others) = ReactionValues.warmMembership(Array(value.utf8)) else {
                        found.append("warm post \(post): user \(field) has the value \(value)")
                        continue
                    }
                    if liked != expected.contains(user) || Set(others) != truthOthers {
                        found.append("warm post \(post): user \(field) is \(value), truth \(expected.contains(user)) \(truthOthers.sorted())")
                    }
                }
                found += countDisagreements(post)
            case nil:
                if redis.sets[layout.likers(ofPost: post)] != nil { found.append("cold post \(post) has a likers set") }
                if redis.hashes[layout.reactions(ofPost: post)] != nil || redis.hashes[layout.reactionCounts(ofPost: post)] != nil {
                    found.append("cold post \(post) has reactions in Redis")
                }
            case let other?:
                found.append("post \(post): marker \(other)")
            }
        }
        return found
    }

    /// Where a hot or warm post's counts of other kinds in Redis differ from the truth.
    private func countDisagreements(_ post: Int64) -> [String] {
        let read = redis.hashes[layout.reactionCounts(ofPost: post)] ?? [:]
        var expected = truthCounts(of: post)
        expected[.like] = nil
        let held = Dictionary(uniqueKeysWithValues: read.map { (ReactionKind($0.key), Int64($0.value)) })
        guard held.count == expected.count, expected.allSatisfy({ held[$0.key] == .some($0.value) }) else {
            return ["post \(post): Redis's counts \(read), truth \(expected)"]
        }
        return []
    }
}
