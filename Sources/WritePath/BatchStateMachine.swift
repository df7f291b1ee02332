import CounterCore
import Persistence
import PostgresDriver
import RedisDriver

/// One batch of a shard, from its requests to their answers, as a state machine: plain values
/// in, the next thing to do out. No I/O, no clock, no suspension — the shard performs each
/// action and hands the result back, so every step can be driven by a test without servers.
///
/// The steps: **read** what Redis knows of the batch's posts (`BatchRead`), and of its warm posts
/// the count and the memberships their hash knows (`WarmRead`); for posts Redis does not hold
/// (cold posts) and for users a warm post's hash does not know, **look them up** in PostgreSQL,
/// in one statement (`ColdLookup`: which exist, their counts, the memberships asked, and the
/// likers of the small cold posts the batch writes) — a cold post that the batch only reads is
/// answered from those rows and never loaded into Redis; a small one it writes is decided on its
/// likers from those rows and loaded by the write itself (it turns hot); a large one it writes is
/// decided on its count and the memberships of the batch's users, and turns warm; **decide** in
/// arrival order (`ShardDecider`); **write** the changes with their log entries, the likers of the
/// posts loaded in passing and the counts and memberships of the warm ones (`BatchWrite`);
/// **finish**: what to tell the flusher and the answers, per the acknowledgement mode. A post
/// whose step fails fails only its own requests; the rest go on.
///
/// Requests are named by their index in the array given to `init`. Answers that are due before
/// the batch ends (failures as they happen, and in `memory` mode every decided answer before the
/// write) are collected for `takeSettled()`; the rest come with `.finish`.
struct BatchStateMachine {
    /// The answer to one request.
    struct Answer: Equatable {
        /// The request's index in the batch.
        let request: Int
        let result: Result<LikeState, CounterError>
    }

    /// What is due at once, before the next action: answers, and posts PostgreSQL does not have
    /// (for the shard to remember).
    struct Settled {
        var answers: [Answer] = []
        var missingPosts: [Int64] = []
    }

    /// What the batch adds to the shard's statistics.
    struct Statistics: Equatable {
        /// Failed steps whose failure was Redis's or PostgreSQL's (one per step, not per post).
        var redisErrors = 0
        var postgresErrors = 0
        /// Changes whose write committed.
        var committedChanges = 0
        /// Changes answered in `memory` mode whose write then failed.
        var lostMemoryAcknowledgements = 0
        /// Read-only requests (`read`, `count`) answered from Redis, and from PostgreSQL (their
        /// post was cold, or warm without the user's membership): the read hit ratio.
        var hotReads = 0
        var coldReads = 0
        /// Writes decided on PostgreSQL's rows (their post was cold), and the cold posts the
        /// write turned warm.
        var coldWrites = 0
        var turnedWarm = 0
    }

    /// How the batch ends.
    struct Completion {
        /// Slots whose write may or may not have run: the flusher must re-read their logs.
        var uncertainSlots: Set<UInt16> = []
        /// Changes logged, per slot (how many, the newest entry holding them), for the flusher.
        var appended: [UInt16: (count: Int, newest: StreamEntryID)] = [:]
        /// Answers to give once the flusher knows of `appended`.
        var answers: [Answer] = []
        /// The posts answered from Redis (hot and warm ones, and those the batch loaded or
        /// turned warm): touched now.
        var touched: [Int64] = []
        /// Per post written, the newest log entry holding one of its changes.
        var newestChanges: [Int64: StreamEntryID] = [:]
        /// Every change logged, in decision order, with the entry holding it (`PendingLikes`).
        var logged: [(change: LikeChange, entry: StreamEntryID)] = []
        /// Per warm post, how many of its users' memberships the batch looked up in PostgreSQL
        /// (the hash did not know them): what promotes it to a whole set.
        var warmLookups: [Int64: Int] = [:]
        /// In `postgres` mode: answers to give once the flusher has applied the newest entry of
        /// every slot in `marks`.
        var afterApplied: (marks: [UInt16: StreamEntryID], answers: [Answer])?
        var statistics = Statistics()
    }

    /// What the shard does next. Each I/O action names the event that takes its result.
    enum Action {
        /// Send these groups to Redis; then `redisReplied(_:)`.
        case read([SlotCommands])
        /// Run this lookup (`ColdLookup.query`); then `postsFound(_:)` or `postgresFailed(_:)`.
        case findPosts(ColdLookup)
        /// Send these transactions to Redis; then `redisReplied(_:)`.
        case write([SlotCommands])
        /// Done: tell the flusher, then answer.
        case finish(Completion)
    }

    private enum State {
        case idle
        case reading(BatchRead)
        /// The warm posts' hashes are read; `cold` are the posts Redis holds nothing of.
        case readingWarm(WarmRead, cold: [Int64])
        /// The cold posts looked up, which of them the batch only reads, and the users of warm
        /// posts asked.
        case findingPosts([Int64], readOnly: Set<Int64>, warmUnknown: [ColdLookup.Pair])
        /// The decided answers of `open`, in order, wait for the write.
        case writing(BatchWrite, answers: [LikeState])
        case finished
    }

    private let requests: [ShardDecider.Request]
    private let acknowledgement: AcknowledgementMode
    private let layout: RedisKeyLayout
    /// Cold posts with at least this many likers are not loaded by the batch that writes them:
    /// they turn warm.
    private let warmThreshold: Int64
    /// The deployment's reaction model (`likesOnly`: reads and writes as they always were).
    private let model: ReactionModel
    private var state = State.idle
    /// The requests not answered yet, in arrival order.
    private var open: [Int]
    private var views: [Int64: ShardDecider.PostView] = [:]
    /// Cold posts answered from PostgreSQL's rows: those the batch only reads, and those it
    /// loads in passing.
    private var answeredCold: Set<Int64> = []
    /// Small cold posts the batch writes, with all their likers: the write loads them.
    private var loading: [Int64: [Int64]] = [:]
    /// With reactions: the other kinds' rows of the posts of `loading`, by user.
    private var loadingReactors: [Int64: [Int64: [ReactionKind]]] = [:]
    /// Warm posts (read from their hash), and the large cold posts the batch writes, which turn
    /// warm with its write.
    private var warm: Set<Int64> = []
    private var turningWarm: Set<Int64> = []
    /// With reactions: the warm posts' other kinds' counts, read with their markers.
    private var warmKindCounts: [Int64: [ReactionKind: Int64]] = [:]
    /// The users of warm posts whose membership came from PostgreSQL.
    private var askedPostgres: Set<ColdLookup.Pair> = []
    /// Per post written, the newest log entry holding one of its changes.
    private var newestChanges: [Int64: StreamEntryID] = [:]
    private var logged: [(change: LikeChange, entry: StreamEntryID)] = []
    private var settled = Settled()
    private var statistics = Statistics()

    /// A batch of `requests`, answered per `acknowledgement`, on the keys of `layout`; cold posts
    /// it writes with `warmThreshold` likers or more turn warm.
    init(
        requests: [ShardDecider.Request], acknowledgement: AcknowledgementMode, layout: RedisKeyLayout,
        warmThreshold: Int64 = .max, reactions model: ReactionModel = .likesOnly
    ) {
        self.model = model
        self.requests = requests
        self.acknowledgement = acknowledgement
        self.layout = layout
        self.warmThreshold = warmThreshold
        self.open = Array(requests.indices)
    }

    /// The first action: the read.
    mutating func start() -> Action {
        guard case .idle = state else { preconditionFailure("a batch starts once") }
        let read = BatchRead(requests, reactions: !model.isLikesOnly)
        guard !read.isEmpty else { return finish(decided: [], write: nil) }
        state = .reading(read)
        return .read(read.commands(layout: layout))
    }

    /// Answers and findings due now; each is handed out once.
    mutating func takeSettled() -> Settled {
        let taken = settled
        settled = Settled()
        return taken
    }

    // MARK: - Events

    /// Redis's results (one per group) for the last `.read` or `.write`.
    mutating func redisReplied(_ results: [Result<[RedisReply], RedisError>]) -> Action {
        switch state {
        case .reading(let read):
            let outcome = read.outcome(of: results)
            fail(outcome.failures)
            views = outcome.views
            warmKindCounts = outcome.warmKindCounts
            if !outcome.warm.isEmpty, !open.isEmpty {
                let warmRead = WarmRead(posts: outcome.warm, users: outcome.warmUsers)
                state = .readingWarm(warmRead, cold: outcome.unhydrated)
                return .read(warmRead.commands(layout: layout))
            }
            guard !outcome.unhydrated.isEmpty, !open.isEmpty else { return decide() }
            return lookUpCold(outcome.unhydrated, warmUnknown: [])

        case .readingWarm(let warmRead, let cold):
            let outcome = warmRead.outcome(of: results)
            fail(outcome.failures)
            for (post, view) in outcome.views {
                views[post] = view
                if let counts = warmKindCounts[post] { views[post]!.kindCounts = KindCounts(counts) }
                warm.insert(post)
            }
            guard !cold.isEmpty || !outcome.unknown.isEmpty, !open.isEmpty else { return decide() }
            return lookUpCold(cold, warmUnknown: outcome.unknown)

        case .writing(let write, let answers):
            let outcome = write.outcome(of: results)
            if let error = outcome.failures.values.first { count(error) }
            statistics.committedChanges = outcome.committed
            logged.reserveCapacity(write.changes.count)
            for (change, id) in zip(write.changes, outcome.entryIDs) {
                guard let id else { continue }
                logged.append((change, id))
                if let newest = newestChanges[change.postID], newest >= id { continue }
                newestChanges[change.postID] = id
            }
            return finish(decided: answers, write: outcome)

        default:
            preconditionFailure("no Redis call was asked for in state \(state)")
        }
    }

    /// What the last `.findPosts` found: the cold posts that exist, with their counts, the
    /// memberships asked and the likers of the small ones the batch writes. Those the batch only
    /// reads are answered from it; of those it writes, the large ones are decided on their count
    /// and the memberships asked, and turn warm with the write; the others are decided on their
    /// likers and loaded by the write. The users a warm post's hash did not know get their
    /// membership from it too.
    mutating func postsFound(_ lookup: ColdLookup.Found) -> Action {
        guard case .findingPosts(let posts, let readOnly, let warmUnknown) = state else {
            preconditionFailure("no posts were looked for in state \(state)")
        }
        let requests = self.requests
        for pair in warmUnknown where views[pair.post] != nil {
            views[pair.post]!.members[pair.user] = lookup.likers[pair.post]?.contains(pair.user) == true
            if let kinds = lookup.reactors[pair.post]?[pair.user] { views[pair.post]!.others[pair.user] = kinds }
            askedPostgres.insert(pair)
        }
        var users: [Int64: [Int64]] = [:]
        for index in open {
            let request = requests[index]
            guard lookup.counts[request.postID] != nil, request.operation != .count else { continue }
            users[request.postID, default: []].append(request.userID)
        }
        for post in posts {
            guard let count = lookup.counts[post] else { continue }
            // A post is loaded whole below the threshold of all its reactions together, as the
            // lookup read its rows (`ColdLookup.reactionLoadingPart`): its likes alone would
            // take a post of few likes and many other kinds for one whose rows all came back.
            let reactions = count + (lookup.kindCounts[post]?.values.reduce(0, +) ?? 0)
            if readOnly.contains(post) {
                views[post] = lookup.view(of: post, users: users[post] ?? [])
            } else if reactions >= warmThreshold {
                views[post] = lookup.view(of: post, users: users[post] ?? [])
                turningWarm.insert(post)
            } else {
                views[post] = lookup.wholeView(of: post, users: users[post] ?? [])
                loading[post] = lookup.likers[post] ?? []
                if !model.isLikesOnly { loadingReactors[post] = lookup.reactors[post] ?? [:] }
            }
            answeredCold.insert(post)
        }
        let missing = posts.filter { lookup.counts[$0] == nil }
        if !missing.isEmpty {
            settled.missingPosts += missing
            let missingSet = Set(missing)
            open = open.filter { index in
                let post = requests[index].postID
                guard missingSet.contains(post) else { return true }
                settled.answers.append(Answer(request: index, result: .failure(.unknownPost(post))))
                return false
            }
        }
        return decide()
    }

    /// Looks the cold posts up in PostgreSQL: all of them for existence and count, the
    /// memberships the reads of those the batch only reads ask, the memberships of the users of
    /// those it writes (for a large one, which turns warm) and every liker of those it writes
    /// that are small (loaded whole); and the memberships of `warmUnknown`, the users warm
    /// posts' hashes did not know.
    private mutating func lookUpCold(_ posts: [Int64], warmUnknown: [ColdLookup.Pair]) -> Action {
        let cold = Set(posts)
        var written: Set<Int64> = []
        for index in open where requests[index].operation.mayWrite && cold.contains(requests[index].postID) {
            written.insert(requests[index].postID)
        }
        let readOnly = cold.subtracting(written)
        var pairs = warmUnknown
        for index in open {
            let request = requests[index]
            guard cold.contains(request.postID) else { continue }
            if written.contains(request.postID) ? request.operation != .count : request.operation == .read {
                pairs.append(ColdLookup.Pair(post: request.postID, user: request.userID))
            }
        }
        state = .findingPosts(posts, readOnly: readOnly, warmUnknown: warmUnknown)
        return .findPosts(
            ColdLookup(
                posts: posts, pairs: pairs, loading: posts.filter(written.contains), loadBelow: warmThreshold,
                reactions: !model.isLikesOnly))
    }

    /// PostgreSQL failed the last `.findPosts`: every request still open fails with it, those
    /// of posts Redis had loaded too.
    mutating func postgresFailed(_ error: Error) -> Action {
        switch state {
        case .findingPosts: break
        default: preconditionFailure("PostgreSQL was not asked in state \(state)")
        }
        count(error)
        let failure = Self.counterError(error)
        for index in open { settled.answers.append(Answer(request: index, result: .failure(failure))) }
        open = []
        return finish(decided: [], write: nil)
    }

    /// The shard stops deciding (its node cannot renew its lease) while the batch waits for
    /// Redis, which may not answer for as long as its command timeout: every request still
    /// unanswered is answered now, and the batch answers nothing more. Requests read but not yet
    /// decided get `notDecided` (nothing was done: once the read is back the batch decides on
    /// none of them and writes nothing); those whose write was sent get `maybeWritten` (the write
    /// may or may not run — it goes on, and what it logs is flushed as ever). In `memory` mode a
    /// sent write's requests were answered at the decision already.
    mutating func giveUpAnswers(notDecided: CounterError, maybeWritten: CounterError) -> [Answer] {
        let error: CounterError
        switch state {
        case .reading, .readingWarm, .findingPosts: error = notDecided
        case .writing(let write, _):
            state = .writing(write, answers: [])
            guard acknowledgement != .memory else {
                open = []
                return []
            }
            error = maybeWritten
        case .idle, .finished: return []
        }
        let answers = open.map { Answer(request: $0, result: .failure(error)) }
        open = []
        return answers
    }

    // MARK: - Steps

    /// Decides the open requests in arrival order, then writes or finishes.
    private mutating func decide() -> Action {
        guard !open.isEmpty else { return finish(decided: [], write: nil) }
        let requests = self.requests
        if !answeredCold.isEmpty {
            for index in open where requests[index].operation.mayWrite && answeredCold.contains(requests[index].postID) {
                statistics.coldWrites += 1
            }
        }
        for index in open where !requests[index].operation.mayWrite {
            let request = requests[index]
            if answeredCold.contains(request.postID)
                || (!askedPostgres.isEmpty && askedPostgres.contains(ColdLookup.Pair(post: request.postID, user: request.userID)))
            {
                statistics.coldReads += 1
            } else {
                statistics.hotReads += 1
            }
        }
        let decision = ShardDecider.decide(open.map { requests[$0] }, views: &views, model: model)
        var answers = decision.answers
        if !decision.refused.isEmpty {
            // Refused requests (a kind past the post's cap) are answered now; they changed nothing.
            var keptOpen: [Int] = []
            var keptAnswers: [LikeState] = []
            for (position, index) in open.enumerated() {
                if let refusal = decision.refused[position] {
                    settled.answers.append(Answer(request: index, result: .failure(refusal)))
                } else {
                    keptOpen.append(index)
                    keptAnswers.append(answers[position])
                }
            }
            open = keptOpen
            answers = keptAnswers
        }
        if acknowledgement == .memory {
            settled.answers.reserveCapacity(settled.answers.count + open.count)
            for (index, answer) in zip(open, answers) {
                settled.answers.append(Answer(request: index, result: .success(answer)))
            }
        }
        guard !decision.changes.isEmpty else { return finish(decided: answers, write: nil) }
        var warmViews: [Int64: ShardDecider.PostView] = [:]
        for post in warm.union(turningWarm) { warmViews[post] = views[post] }
        let write = BatchWrite(
            decision.changes, layout: layout, loading: loading, warm: warmViews, turningWarm: turningWarm,
            reactions: !model.isLikesOnly, views: model.isLikesOnly ? [:] : views, loadingReactors: loadingReactors)
        state = .writing(write, answers: answers)
        return .write(write.transactions)
    }

    /// The end: what the write did, and the answers of the open requests (`decided`, in order)
    /// per the acknowledgement mode.
    private mutating func finish(decided: [LikeState], write outcome: BatchWrite.Outcome?) -> Action {
        state = .finished
        var completion = Completion(statistics: statistics)
        // In Redis now: what Redis answered, and the posts the write loaded or turned warm.
        completion.touched = views.keys.filter {
            !answeredCold.contains($0) || ((loading[$0] != nil || turningWarm.contains($0)) && newestChanges[$0] != nil)
        }
        completion.newestChanges = newestChanges
        completion.logged = logged
        completion.statistics.turnedWarm = turningWarm.filter { newestChanges[$0] != nil }.count
        for pair in askedPostgres { completion.warmLookups[pair.post, default: 0] += 1 }
        if let outcome {
            completion.uncertainSlots = outcome.uncertainSlots
            completion.appended = outcome.appended
        }
        if acknowledgement == .memory {
            // Answered at the decision already.
            completion.statistics.lostMemoryAcknowledgements = outcome?.lost ?? 0
            return .finish(completion)
        }
        let waitForPostgres = acknowledgement == .postgres && !completion.appended.isEmpty
        var waiting: [Answer] = []
        completion.answers.reserveCapacity(waitForPostgres ? 0 : decided.count)
        for (index, answer) in zip(open, decided) {
            if let error = outcome?.failures[requests[index].postID] {
                completion.answers.append(Answer(request: index, result: .failure(Self.counterError(error))))
            } else if waitForPostgres {
                waiting.append(Answer(request: index, result: .success(answer)))
            } else {
                completion.answers.append(Answer(request: index, result: .success(answer)))
            }
        }
        if waitForPostgres { completion.afterApplied = (completion.appended.mapValues(\.newest), waiting) }
        return .finish(completion)
    }

    /// Answers the open requests on `failures`' posts with their post's failure.
    private mutating func fail(_ failures: [Int64: Error]) {
        guard !failures.isEmpty else { return }
        if let error = failures.values.first { count(error) }
        open = open.filter { index in
            guard let error = failures[requests[index].postID] else { return true }
            settled.answers.append(Answer(request: index, result: .failure(Self.counterError(error))))
            return false
        }
    }

    private mutating func count(_ error: Error) {
        if error is RedisError { statistics.redisErrors += 1 }
        if error is PostgresError { statistics.postgresErrors += 1 }
    }

    /// What a caller is told for `error`: a `CounterError` as it is, anything else as
    /// `unavailable` (retryable) with its description.
    /// A write Redis fenced did not run: the slot is another node's now.
    static func counterError(_ error: Error) -> CounterError {
        if let error = error as? RedisError, error.code == .fenced {
            return CounterError(code: .notOwner, message: "this node no longer owns the post's slot; nothing was done here (\(error.message))")
        }
        return (error as? CounterError) ?? CounterError(code: .unavailable, message: "\(error)", retryAfterSeconds: 1)
    }
}
