import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// The write of a batch, as plain values: its changes as one transaction per slot, and what the
/// replies mean.
///
/// A slot's transaction holds, per post, one `SADD` of the users whose last change in the batch
/// is a like and one `SREM` of those whose last change is an unlike, then the slot's changes as
/// one packed log entry (`ChangeLogEntry`; several above `ChangeLogEntry.maximumChangesPerEntry`,
/// and a change replayed with its first acknowledgement's time in an entry of its own, with that
/// time: `ChangeLogEntry.entryRuns`), so membership and log commit together. A cold post the batch loads in passing (its likers
/// read from PostgreSQL with the batch's lookup) is put first: its likers set replaced with
/// those likers and its hydration marker set, in the same transaction — so the post turns hot
/// with its changes, or not at all. A *warm* post (its count and the memberships seen, not its
/// whole set: `RedisKeyLayout.warmMembers`) gets an `HSET` (several for a view of thousands of
/// users) instead of `SADD`/`SREM`: its count after the batch and every membership the batch
/// knows; one that turns warm with this batch gets its marker set first, in the same
/// transaction.
///
/// In a deployment with other kinds than `like` (`reactions`), a hot post's other kinds are
/// written as each user's kinds after the batch into its reactions hash (`HSET`, or `HDEL` for a
/// user left with none), a warm post's as its hash's values (`ReactionValues.warmValue`), and
/// every post written gets its other kinds' counts after the batch (`DEL` and `HSET` of its
/// counts hash); a post loaded in passing gets its other kinds' rows too. A switch of kinds is
/// never parted between two log entries, so it reaches PostgreSQL in one transaction.
/// No I/O: the shard sends `transactions` and hands the results to `outcome(of:)`.
struct BatchWrite {
    /// What the transactions did.
    struct Outcome {
        /// Each change's log entry id (as `changes`), or `nil` where its slot's transaction failed.
        var entryIDs: [StreamEntryID?]
        /// Why, per post of a failed slot.
        var failures: [Int64: Error] = [:]
        /// Slots whose transaction may or may not have run (the connection broke mid-way): the
        /// flusher must read their logs again.
        var uncertainSlots: Set<UInt16> = []
        /// Changes logged, per slot: how many, and the newest entry holding them.
        var appended: [UInt16: (count: Int, newest: StreamEntryID)] = [:]

        /// Changes whose log entry was written.
        var committed: Int { entryIDs.count - lost }
        /// Changes whose log entry was not written.
        var lost: Int { entryIDs.reduce(0) { $1 == nil ? $0 + 1 : $0 } }
    }

    /// The changes, in decision order.
    let changes: [LikeChange]
    /// One atomic group per slot, in order of the slots' first change.
    let transactions: [SlotCommands]
    /// Per transaction: its slot, the offsets of its changes in `changes` (in order), how many
    /// membership commands precede its log entries, and where each entry's changes end (as
    /// positions in `offsets`: entry `k` holds positions `entryEnds[k - 1]..<entryEnds[k]`, at
    /// most `ChangeLogEntry.maximumChangesPerEntry`; a change with a time of its own is alone).
    private let slots: [(slot: UInt16, offsets: [Int], membershipCommands: Int, entryEnds: [Int])]

    /// The transactions that write `changes`, loading first the posts of `loading` (post → its
    /// likers in PostgreSQL) that have changes; the posts of `warm` (post → its view after the
    /// batch's decisions) are written as warm posts, and those of `turningWarm` among them are
    /// marked warm first.
    ///
    /// With `reactions`, `views` holds every written post's view after the batch's decisions,
    /// and `loadingReactors` the other kinds' rows of the posts of `loading`.
    init(
        _ changes: [LikeChange], layout: RedisKeyLayout, loading: [Int64: [Int64]] = [:],
        warm: [Int64: ShardDecider.PostView] = [:], turningWarm: Set<Int64> = [],
        reactions: Bool = false, views: [Int64: ShardDecider.PostView] = [:],
        loadingReactors: [Int64: [Int64: [ReactionKind]]] = [:]
    ) {
        var slotIndex: [UInt16: Int] = [:]
        var offsetsBySlot: [(slot: UInt16, offsets: [Int])] = []
        for (offset, change) in changes.enumerated() {
            let slot = HashSlot(post: change.postID).rawValue
            if let index = slotIndex[slot] {
                offsetsBySlot[index].offsets.append(offset)
            } else {
                slotIndex[slot] = offsetsBySlot.count
                offsetsBySlot.append((slot, [offset]))
            }
        }
        var slots: [(slot: UInt16, offsets: [Int], membershipCommands: Int, entryEnds: [Int])] = []
        slots.reserveCapacity(offsetsBySlot.count)
        var transactions: [SlotCommands] = []
        transactions.reserveCapacity(offsetsBySlot.count)
        for (slot, offsets) in offsetsBySlot {
            let hashSlot = HashSlot(rawValue: slot)!
            let log = layout.changeLog(of: hashSlot)
            let slotChanges = offsets.map { changes[$0] }
            var commands = loading.isEmpty ? [] : Self.loadCommands(slotChanges, loading: loading, layout: layout)
            if reactions, !loading.isEmpty { commands += Self.loadReactionCommands(slotChanges, loading: loadingReactors, layout: layout) }
            if !warm.isEmpty {
                commands += Self.warmCommands(slotChanges, warm: warm, turningWarm: turningWarm, reactions: reactions, layout: layout)
            }
            let hot = warm.isEmpty ? slotChanges : slotChanges.filter { warm[$0.postID] == nil }
            if reactions {
                commands += Self.membershipCommands(hot.filter(\.kind.isLike), layout: layout)
                commands += Self.reactionCommands(hot.filter { !$0.kind.isLike }, views: views, layout: layout)
                commands += Self.reactionCountCommands(slotChanges, views: views, layout: layout)
            } else {
                commands += Self.membershipCommands(hot, layout: layout)
            }
            let membershipCommands = commands.count
            var entryEnds: [Int] = []
            for run in ChangeLogEntry.entryRuns(slotChanges) {
                for end in Self.entryEnds(run, limit: ChangeLogEntry.maximumChangesPerEntry) {
                    commands.append(ChangeLogEntry.append(slotChanges[(entryEnds.last ?? 0)..<end], to: log))
                    entryEnds.append(end)
                }
            }
            slots.append((slot, offsets, membershipCommands, entryEnds))
            transactions.append(SlotCommands(slot: hashSlot, commands: commands, atomic: true))
        }
        self.changes = changes
        self.transactions = transactions
        self.slots = slots
    }

    /// Reads the replies to `transactions`, one result per transaction: `EXEC`'s replies, whose
    /// log entries' ids follow the membership commands. Every change gets the id of the entry
    /// that holds it.
    func outcome(of results: [Result<[RedisReply], RedisError>]) -> Outcome {
        var outcome = Outcome(entryIDs: [StreamEntryID?](repeating: nil, count: changes.count))
        for (index, (slot, offsets, membershipCommands, entryEnds)) in slots.enumerated() {
            let result =
                index < results.count
                ? results[index]
                : .failure(RedisError(code: .unexpectedReply, message: "no reply to the write of slot \(slot)"))
            switch result {
            case .success(let replies):
                var entry = 0
                for (position, offset) in offsets.enumerated() {
                    while entry < entryEnds.count && position >= entryEnds[entry] { entry += 1 }
                    let reply = membershipCommands + entry
                    if reply < replies.count, case .bulkString(let bytes) = replies[reply] {
                        outcome.entryIDs[offset] = StreamEntryID(bytes: bytes)
                    }
                }
            case .failure(let error):
                if error.code == .connectionLost { outcome.uncertainSlots.insert(slot) }
            }
            var appended: (count: Int, newest: StreamEntryID)?
            for offset in offsets {
                if let id = outcome.entryIDs[offset] {
                    appended = ((appended?.count ?? 0) + 1, max(appended?.newest ?? id, id))
                    continue
                }
                let post = changes[offset].postID
                guard outcome.failures[post] == nil else { continue }
                if case .failure(let error) = result {
                    outcome.failures[post] = error
                } else {
                    outcome.failures[post] = CounterError(
                        code: .unavailable, message: "Redis refused the write of post \(post)",
                        retryAfterSeconds: 1)
                }
            }
            if let appended { outcome.appended[slot] = appended }
        }
        return outcome
    }

    /// For each post of `changes` (in order of first change) that `loading` holds: `DEL` of its
    /// likers set, `SADD`s of its likers (at most `PostHydration.usersPerCommand` each), `SET` of
    /// its hydration marker.
    static func loadCommands(_ changes: [LikeChange], loading: [Int64: [Int64]], layout: RedisKeyLayout) -> [RedisCommand] {
        var commands: [RedisCommand] = []
        var seen: Set<Int64> = []
        for change in changes where seen.insert(change.postID).inserted {
            guard let users = loading[change.postID] else { continue }
            let key = layout.likers(ofPost: change.postID)
            commands.append(.del([key]))
            let chunk = PostHydration.usersPerCommand
            for start in stride(from: 0, to: users.count, by: chunk) {
                commands.append(.sadd(key, Array(users[start..<min(start + chunk, users.count)])))
            }
            commands.append(.set(layout.hydratedMarker(ofPost: change.postID), "1"))
        }
        return commands
    }

    /// Where the entries of `run` end (positions in its base collection): at most `limit`
    /// changes each, never between the two changes of a switch of kinds (a pair's end of one
    /// kind, then its next kind).
    static func entryEnds(_ run: ArraySlice<LikeChange>, limit: Int) -> [Int] {
        var ends: [Int] = []
        var start = run.startIndex
        while start < run.endIndex {
            var end = min(start + limit, run.endIndex)
            while end < run.endIndex, end - 1 > start, run[end - 1].kind != run[end].kind,
                run[end - 1].userID == run[end].userID, run[end - 1].postID == run[end].postID
            {
                end -= 1
            }
            ends.append(end)
            start = end
        }
        return ends
    }

    /// For each post of `changes` (in order of first change) that `loading` holds: `DEL` of its
    /// reactions hash, then `HSET`s of each reactor's other kinds (its rows in PostgreSQL).
    static func loadReactionCommands(
        _ changes: [LikeChange], loading: [Int64: [Int64: [ReactionKind]]], layout: RedisKeyLayout
    ) -> [RedisCommand] {
        var commands: [RedisCommand] = []
        var seen: Set<Int64> = []
        for change in changes where seen.insert(change.postID).inserted {
            guard let reactors = loading[change.postID] else { continue }
            let key = layout.reactions(ofPost: change.postID)
            commands.append(.del([key]))
            var pairs: [(RedisArgument, RedisArgument)] = []
            let perCommand = FencedScript.maximumArgumentsPerCommand / 2 - 1
            for (user, kinds) in reactors.sorted(by: { $0.key < $1.key }) {
                if pairs.count == perCommand {
                    commands.append(.hset(key, pairs))
                    pairs = []
                }
                pairs.append((user, ReactionValues.kindsValue(kinds)))
            }
            if !pairs.isEmpty { commands.append(.hset(key, pairs)) }
        }
        return commands
    }

    /// For each hot post of `changes` (other kinds than `like`): `HSET` of the kinds each user
    /// whose kinds changed holds after the batch (`views`), `HDEL` of those who hold none.
    static func reactionCommands(_ changes: [LikeChange], views: [Int64: ShardDecider.PostView], layout: RedisKeyLayout) -> [RedisCommand] {
        guard !changes.isEmpty else { return [] }
        var postOrder: [Int64] = []
        var users: [Int64: [Int64]] = [:]
        var seen: Set<LikePair> = []
        for change in changes where seen.insert(LikePair(change)).inserted {
            if users[change.postID] == nil { postOrder.append(change.postID) }
            users[change.postID, default: []].append(change.userID)
        }
        var commands: [RedisCommand] = []
        let perCommand = FencedScript.maximumArgumentsPerCommand / 2 - 1
        for post in postOrder {
            let key = layout.reactions(ofPost: post)
            let view = views[post]
            var set: [(RedisArgument, RedisArgument)] = []
            var deleted: [RedisArgument] = []
            for user in users[post]! {
                if let kinds = view?.others[user], !kinds.isEmpty {
                    set.append((user, ReactionValues.kindsValue(kinds)))
                    if set.count == perCommand {
                        commands.append(.hset(key, set))
                        set = []
                    }
                } else {
                    deleted.append(user)
                    if deleted.count == FencedScript.maximumArgumentsPerCommand {
                        commands.append(.hdel(key, deleted))
                        deleted = []
                    }
                }
            }
            if !set.isEmpty { commands.append(.hset(key, set)) }
            if !deleted.isEmpty { commands.append(.hdel(key, deleted)) }
        }
        return commands
    }

    /// For each post of `changes`: its other kinds' counts after the batch (`views`), written
    /// whole — `DEL` of its counts hash and `HSET` of the kinds above zero (a post holds a few).
    static func reactionCountCommands(_ changes: [LikeChange], views: [Int64: ShardDecider.PostView], layout: RedisKeyLayout) -> [RedisCommand] {
        var commands: [RedisCommand] = []
        var seen: Set<Int64> = []
        for change in changes where seen.insert(change.postID).inserted {
            guard let view = views[change.postID] else { continue }
            let key = layout.reactionCounts(ofPost: change.postID)
            commands.append(.del([key]))
            let counts = view.kindCounts.byName
            if !counts.isEmpty { commands.append(.hset(key, counts.map { ($0.kind.name, $0.count) })) }
        }
        return commands
    }

    /// For each post of `changes` (in order of first change) that `warm` holds: for one in
    /// `turningWarm`, `DEL` of any likers set or hash and `SET` of the marker to warm; then
    /// `HSET` of its count and of every membership its view knows (split so that no command has
    /// more than `FencedScript.maximumArgumentsPerCommand` arguments).
    static func warmCommands(
        _ changes: [LikeChange], warm: [Int64: ShardDecider.PostView], turningWarm: Set<Int64>, reactions: Bool = false,
        layout: RedisKeyLayout
    ) -> [RedisCommand] {
        var commands: [RedisCommand] = []
        var seen: Set<Int64> = []
        for change in changes where seen.insert(change.postID).inserted {
            guard let view = warm[change.postID] else { continue }
            let key = layout.warmMembers(ofPost: change.postID)
            if turningWarm.contains(change.postID) {
                var keys = [layout.likers(ofPost: change.postID), key]
                if reactions { keys.append(layout.reactions(ofPost: change.postID)) }
                commands.append(.del(keys))
                commands.append(.set(layout.hydratedMarker(ofPost: change.postID), RedisKeyLayout.warmMarkerValue))
            }
            var pairs: [(RedisArgument, RedisArgument)] = [(RedisKeyLayout.warmCountField, view.likesCount)]
            let perCommand = FencedScript.maximumArgumentsPerCommand / 2 - 1
            for (user, liked) in view.members.sorted(by: { $0.key < $1.key }) {
                if pairs.count == perCommand {
                    commands.append(.hset(key, pairs))
                    pairs = []
                }
                pairs.append((user, ReactionValues.warmValue(liked: liked, others: view.others[user] ?? [])))
            }
            commands.append(.hset(key, pairs))
        }
        return commands
    }

    /// The `SADD`/`SREM` commands that bring each post's likers set to the state of the last
    /// change per user among `changes` (in order): one of each per post, or more for more than
    /// `FencedScript.maximumArgumentsPerCommand` users.
    static func membershipCommands(_ changes: [LikeChange], layout: RedisKeyLayout) -> [RedisCommand] {
        struct Pair: Hashable {
            let post: Int64
            let user: Int64
        }
        var last: [Pair: Bool] = [:]
        last.reserveCapacity(changes.count)
        var postOrder: [Int64] = []
        var seenPosts: Set<Int64> = []
        var pairOrder: [Pair] = []
        for change in changes {
            let pair = Pair(post: change.postID, user: change.userID)
            if last.updateValue(change.liked, forKey: pair) == nil { pairOrder.append(pair) }
            if seenPosts.insert(change.postID).inserted { postOrder.append(change.postID) }
        }
        var added: [Int64: [RedisArgument]] = [:]
        var removed: [Int64: [RedisArgument]] = [:]
        for pair in pairOrder {
            if last[pair]! { added[pair.post, default: []].append(pair.user) } else { removed[pair.post, default: []].append(pair.user) }
        }
        var commands: [RedisCommand] = []
        // A fenced write's script unpacks each command's arguments, which Lua limits: large
        // sets of users go in several commands.
        let chunk = FencedScript.maximumArgumentsPerCommand
        for post in postOrder {
            let likers = layout.likers(ofPost: post)
            if let users = added[post] {
                for start in stride(from: 0, to: users.count, by: chunk) {
                    commands.append(.sadd(likers, Array(users[start..<min(start + chunk, users.count)])))
                }
            }
            if let users = removed[post] {
                for start in stride(from: 0, to: users.count, by: chunk) {
                    commands.append(.srem(likers, Array(users[start..<min(start + chunk, users.count)])))
                }
            }
        }
        return commands
    }
}
