import CounterCore
import Foundation
import Persistence
import ShardRouter
import Synchronization
import TestSupport
import Testing

@testable import WritePath

/// The whole shard — batches, cold reads and writes, warm posts and their promotion, flushes,
/// eviction by idle time and by memory, the sweeper's walks — driven as a state machine against
/// an in-memory Redis and PostgreSQL (`ShardWorld`), with every I/O action run and every result
/// delivered in a random order, and with faults between any two steps: a Redis connection that
/// breaks before or after its commands ran, a Redis restart that breaks every connection at
/// once, PostgreSQL failing before or after a commit, and the node killed (`kill -9`) at any
/// point — its in-flight commands landing or not, later or never — and its slots claimed by the
/// next process under the next epoch.
///
/// Checked after every step: every successful answer (the last of each post and pair in its
/// batch) agrees with the truth — the initial rows with every change ever appended folded in;
/// Redis's copy of every hot and warm post agrees with it; an eviction never deletes a post
/// whose rows PostgreSQL does not all have. At the end, after the drain and what the next start
/// applies: the rows are the truth, every entry appended was applied exactly once, none trimmed
/// before it was applied, every operation of the last process was answered exactly once.
///
/// With reactions (`one` or `many` per user), the requests name kinds and the same books hold per
/// kind: every answer's counts and the user's own kinds, Redis's kinds and counts of each post,
/// the rows of `reactions`; and with one kind per user, no log entry ever leaves a user with two.
///
/// A seed fixes the steps, but the machine walks sets and dictionaries, whose order Swift seeds
/// per process: to replay a failing seed exactly, run with `SWIFT_DETERMINISTIC_HASHING=1`.
@Suite("A whole shard against a model Redis and PostgreSQL, with crashes and Redis losses (pure)")
struct WholeShardModelTests {
    /// How many times each operation was answered, by its number.
    final class AnswerCounts: Sendable {
        private let counts = Mutex<[Int: Int]>([:])
        func add(_ id: Int) { counts.withLock { $0[id, default: 0] += 1 } }
        var all: [Int: Int] { counts.withLock { $0 } }
    }

    /// One process's shard: its machine, its timers, and whether it still runs.
    final class Process {
        var machine: ShardStateMachine
        var timers = ModelTimers()
        var alive = true
        /// The operations it was given, by number.
        var operations: [Int] = []
        init(machine: ShardStateMachine) { self.machine = machine }
    }

    /// An I/O action under way, or its result on the way back, and whose it is.
    struct InFlight {
        let process: Int
        let action: ShardStateMachine.Action
    }
    struct Delivery {
        let process: Int
        let event: ShardStateMachine.Event
    }

    /// Where a sweeper's walk of Redis's markers is.
    enum Walk {
        case idle
        case began(at: ContinuousClock.Instant)
        case pageRead([Int64], began: ContinuousClock.Instant)
    }

    final class Driver {
        let world: ShardWorld
        var random: SeededGenerator
        let configuration: WritePathConfiguration
        var now = ContinuousClock.now
        var processes: [Process] = []
        var inFlight: [InFlight] = []
        var deliveries: [Delivery] = []
        var walk = Walk.idle
        let answerCounts = AnswerCounts()
        let replies = Replies()
        var nextOperation = 0
        /// Answers that disagreed with the truth, Redis copies that did.
        var wrongAnswers: [String] = []
        var checkedAnswers = 0
        /// Where the lists' view (PostgreSQL's rows with the shard's pending changes laid over
        /// them) disagreed with the truth, and how many times it was compared.
        var listDisagreements: [String] = []
        var listChecks = 0
        var crashes = 0, redisRestarts = 0, faults = 0
        /// Whether the current process may decide (its lease holds).
        var deciding = true
        let postIDs: [Int64]
        let slots: [UInt16]
        /// The kinds requests name (`like` alone without reactions).
        let kinds: [ReactionKind]

        var current: Process { processes[processes.count - 1] }

        /// - Parameter reactions: with reactions of three kinds, one or many per user; `nil`:
        ///   likes only.
        init(seed: UInt64, reactions: ReactionModel.PerUser? = nil) {
            var random = SeededGenerator(seed: seed)
            var configuration = WritePathConfiguration()
            configuration.keyPrefix = "model"
            // Every third seed answers writes once their replicas have them (`--ack replicated`),
            // and a fault makes a batch's WAIT time out.
            if seed % 3 == 0 { configuration.acknowledgement = .replicated }
            configuration.flushBatchSize = 5
            configuration.flushInterval = .milliseconds(30)
            configuration.flushMaxAge = .milliseconds(60)
            configuration.hotIdle = .milliseconds(120)
            configuration.warmThreshold = 6
            configuration.warmPromotionLookups = 3
            configuration.unknownPostMemory = .milliseconds(50)
            configuration.slotMoveWait = .milliseconds(200)
            kinds = reactions == nil ? [.like] : [.like, ReactionKind("love")!, ReactionKind("haha")!]
            if let reactions { configuration.reactions = ReactionModel(kinds: .fixed(kinds), perUser: reactions) }
            self.configuration = configuration
            postIDs = Array(1...10)
            var likes: [Int64: Set<Int64>] = [:]
            var others: [Int64: [Int64: Set<ReactionKind>]] = [:]
            for post in postIDs {
                likes[post] = Set((0..<Int.random(in: 0...9, using: &random)).map { _ in Int64.random(in: 1...12, using: &random) })
                guard reactions != nil else { continue }
                // Rows of the other kinds: with one per user, only users without a like.
                for user in Int64(1)...12 where random.next() % 3 == 0 {
                    var held = Set(kinds.dropFirst().filter { _ in random.next() % 2 == 0 })
                    if reactions == .one {
                        guard !(likes[post]?.contains(user) ?? false), let one = held.first else { continue }
                        held = [one]
                    }
                    if !held.isEmpty { others[post, default: [:]][user] = held }
                }
            }
            world = ShardWorld(layout: RedisKeyLayout(prefix: "model"), likes: likes, reactions: others)
            world.oneKindPerUser = reactions == .one
            world.withReactions = reactions != nil
            self.random = random
            slots = Array(Set(postIDs.map { HashSlot(post: $0).rawValue })).sorted()
            start()
        }

        /// A process starts and claims the slots under the next epoch (the last one's end is a crash).
        func start() {
            let machine = ShardStateMachine(index: 0, slotRange: 0..<HashSlot.count, configuration: configuration, isFenced: true, now: now)
            processes.append(Process(machine: machine))
            deciding = true
            let epochs = world.takeOver(slots)
            deliver(.claim(epochs, reply("claim \(processes.count)")), to: processes.count - 1)
        }

        func reply<Value: Sendable>(_ label: String) -> ShardReply<Value> {
            let replies = self.replies
            return ShardReply { value in replies.add("\(label): \(value)") }
        }

        // MARK: - The shell

        func deliver(_ event: ShardStateMachine.Event, to index: Int) {
            let process = processes[index]
            guard process.alive else { return }
            var actions: [ShardStateMachine.Action] = []
            process.machine.handle(event, now: now, into: &actions)
            for action in actions {
                switch action {
                case .answer(let answers):
                    check(answers.map { ($0.0.request, $0.1) })
                    for (operation, result) in answers { operation.answer(result) }
                case .answerBatch(let operations, let answers):
                    check(answers.sorted { $0.request < $1.request }.map { (operations[$0.request].request, $0.result) })
                    for answer in answers { operations[answer.request].answer(answer.result) }
                case .reply(let delivery):
                    delivery.run()
                case .log:
                    break
                case .setTimer, .cancelTimer:
                    process.timers.take(action)
                case .discardPromotion:
                    _ = world.perform(action)
                default:
                    inFlight.append(InFlight(process: index, action: action))
                }
            }
        }

        /// The last successful answer of each post (its count) and of each pair (its
        /// membership) must be the truth now: nothing else writes between a batch's write and
        /// its answers. A write answered with a failure after such an answer may have written
        /// all the same (`not_replicated`: written, its replicas unconfirmed), so the state the
        /// earlier answer saw is not the last one: it is not compared.
        func check(_ answers: [(ShardDecider.Request, Result<LikeState, CounterError>)]) {
            // Every kind's count (the likes' alone with likes only), and the user's kinds.
            var counts: [Int64: [ReactionKind: Int64]] = [:]
            var memberships: [LikePair: Set<ReactionKind>] = [:]
            for (request, result) in answers {
                guard case .success(let state) = result else {
                    if request.operation.writes {
                        counts[request.postID] = nil
                        memberships[LikePair(userID: request.userID, postID: request.postID)] = nil
                    }
                    continue
                }
                let summary = state.reactionSummary
                if state.reactions == nil, configuration.reactions != .likesOnly {
                    wrongAnswers.append("post \(request.postID): an answer without its reactions")
                }
                counts[request.postID] = Dictionary(uniqueKeysWithValues: summary.counts.map { ($0.kind, $0.count) })
                if request.operation != .count { memberships[LikePair(userID: request.userID, postID: request.postID)] = Set(summary.mine) }
            }
            for (post, answered) in counts {
                checkedAnswers += 1
                let truth = world.truthCounts(of: post)
                if answered != truth { wrongAnswers.append("post \(post): answered counts \(answered), truth \(truth)") }
            }
            for (pair, mine) in memberships {
                let truth = ShardWorld.kinds(of: pair.userID, post: pair.postID, likes: world.truth, reactions: world.truthReactions)
                if mine != truth {
                    wrongAnswers.append("post \(pair.postID), user \(pair.userID): answered \(mine.sorted()), truth \(truth.sorted())")
                }
            }
        }

        /// The lists' view: wherever the machine says it knows every change waiting for a post
        /// (`pendingAnswer` gives `.changes`), PostgreSQL's rows with those changes laid over them
        /// are the truth — between batches (a batch whose write ran but whose reply has not come
        /// back holds changes nobody acknowledged yet).
        func checkLists() {
            guard current.alive, !current.machine.lane.isBatchInFlight else { return }
            for post in postIDs {
                guard case .changes(let changes) = current.machine.pendingAnswer(.post(post)) else { continue }
                var likes = [post: world.likes[post] ?? []]
                var reactions = [post: world.reactions[post] ?? [:]]
                for change in changes {
                    ShardWorld.fold(
                        LikeChange(userID: change.userID, postID: change.postID, kind: change.kind, liked: change.liked),
                        likes: &likes, reactions: &reactions)
                }
                listChecks += 1
                let truth = world.truth[post] ?? []
                let truthOthers = world.truthReactions[post] ?? [:]
                if likes[post] ?? [] != truth || reactions[post] ?? [:] != truthOthers {
                    listDisagreements.append(
                        "post \(post): rows with pending changes \((likes[post] ?? []).sorted()) \(reactions[post] ?? [:]), truth \(truth.sorted()) \(truthOthers) (pending \(changes.map { "\($0.userID)\($0.liked ? "+" : "-")\($0.kind)" }))"
                    )
                }
            }
        }

        /// Time passes: the current process's timers due by then fire, each at its deadline.
        func pass(_ duration: Duration) {
            let end = now + duration
            let index = processes.count - 1
            while let next = current.timers.next, next.at <= end, current.alive {
                now = max(now, next.at)
                for timer in current.timers.fire(at: now) { deliver(.timerFired(timer), to: index) }
            }
            now = end
        }

        // MARK: - Steps

        func submit() {
            var operations: [ShardOperation] = []
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let kind: LikeOperation = [.toggle, .toggle, .like, .unlike, .read, .count].randomElement(using: &random)!
                // A head of three posts takes most of the traffic; the tail goes idle and is evicted.
                let post = random.next() % 10 < 7 ? postIDs[Int.random(in: 0..<3, using: &random)] : postIDs.randomElement(using: &random)!
                let request = ShardDecider.Request(
                    operation: kind, postID: post, userID: kind == .count ? 0 : Int64.random(in: 1...12, using: &random),
                    kind: kind == .count || kinds.count == 1 ? .like : kinds.randomElement(using: &random)!)
                let id = nextOperation
                nextOperation += 1
                current.operations.append(id)
                let counts = answerCounts
                operations.append(ShardOperation(request) { _ in counts.add(id) })
            }
            deliver(.operations(operations), to: processes.count - 1)
        }

        /// Whether an action talks to Redis, to PostgreSQL, or both.
        static func touches(_ action: ShardStateMachine.Action) -> (redis: Bool, postgres: Bool) {
            switch action {
            case .findPosts, .applyFlush: return (false, true)
            case .loadWarmPost: return (true, true)
            default: return (true, false)
            }
        }

        /// Runs one action under way (its result goes back to a living process).
        func performOne(at position: Int, trouble: ShardWorld.Trouble) {
            let flight = inFlight.remove(at: position)
            if let event = world.perform(flight.action, trouble: trouble), processes[flight.process].alive {
                deliveries.append(Delivery(process: flight.process, event: event))
            }
        }

        func randomTrouble(for action: ShardStateMachine.Action) -> ShardWorld.Trouble {
            guard random.next() % 100 < 6 else { return .none }
            faults += 1
            let (redis, postgres) = Self.touches(action)
            var trouble = ShardWorld.Trouble()
            if postgres && (!redis || random.next() % 2 == 0) {
                trouble.postgresBeforeCommit = random.next() % 2 == 0
            } else {
                trouble.redis = [RedisModel.Fault.lostBeforeRunning, .lostAfterRunning].randomElement(using: &random)!
            }
            return trouble
        }

        /// One random step; in a `quiet` stretch nobody calls (posts go idle, time passes).
        func step(quiet: Bool) {
            let roll = Int(random.next() % 1000)
            switch roll {
            case 0..<250:
                if quiet {
                    pass(.milliseconds(Int.random(in: 5...30, using: &random)))
                } else if current.alive && current.machine.lifecycle == .running {
                    submit()
                }
            case 250..<560:
                guard !inFlight.isEmpty else { return }
                let position = Int.random(in: 0..<inFlight.count, using: &random)
                performOne(at: position, trouble: randomTrouble(for: inFlight[position].action))
            case 560..<860:
                guard !deliveries.isEmpty else { return }
                let delivery = deliveries.remove(at: Int.random(in: 0..<deliveries.count, using: &random))
                deliver(delivery.event, to: delivery.process)
            case 860..<947:
                pass(.milliseconds(Int.random(in: 5...60, using: &random)))
            case 947..<950:
                // The node's lease lapses (it stops deciding: what waits is refused, a batch
                // waiting for PostgreSQL is given up) or holds again.
                deciding.toggle()
                deliver(.deciding(deciding), to: processes.count - 1)
            case 950..<965:
                let some = Set(slots.filter { _ in random.next() % 2 == 0 })
                deliver(.shrink(slots: random.next() % 2 == 0 ? nil : some, count: Int.random(in: 1...4, using: &random)), to: processes.count - 1)
            case 965..<995:
                advanceWalk()
            case 995..<998:
                deliver(.flushAll(reply("flushAll")), to: processes.count - 1)
            case 998:
                crash()
            case 999:
                restartRedis()
            default:
                break
            }
        }

        /// The sweeper: a walk begins, reads a page of markers (the posts Redis holds now), and
        /// hands it over with its end, and with a read of the dead-letter stream begun with the
        /// walk (it is empty here: every post exists and no change is refused).
        func advanceWalk() {
            switch walk {
            case .idle:
                deliver(.discoveryBegan, to: processes.count - 1)
                walk = .began(at: now)
            case .began(let began):
                walk = .pageRead(world.posts.sorted().filter { world.marker($0) != nil }, began: began)
            case .pageRead(let posts, let began):
                deliver(.discovered(posts), to: processes.count - 1)
                deliver(.discoveryEnded, to: processes.count - 1)
                if world.redis.streams[world.layout.deadLetters] == nil { deliver(.deadLettersRead([], startedAt: began), to: processes.count - 1) }
                walk = .idle
            }
        }

        /// `kill -9`: the process hears nothing more; of what it had sent, some lands now, some
        /// later (it stays under way, its result dropped), some never. The next process claims.
        func crash() {
            crashes += 1
            current.alive = false
            deliveries.removeAll { !processes[$0.process].alive }
            inFlight.removeAll { !processes[$0.process].alive && random.next() % 3 == 0 }
            var index = 0
            while index < inFlight.count {
                if !processes[inFlight[index].process].alive && random.next() % 2 == 0 {
                    performOne(at: index, trouble: .none)
                } else {
                    index += 1
                }
            }
            walk = .idle
            start()
        }

        /// Redis restarts (keeping its data): every command under way breaks, before it ran or after.
        func restartRedis() {
            redisRestarts += 1
            var index = 0
            while index < inFlight.count {
                let action = inFlight[index].action
                if Self.touches(action).redis {
                    let fault = [RedisModel.Fault.lostBeforeRunning, .lostAfterRunning].randomElement(using: &random)!
                    performOne(at: index, trouble: ShardWorld.Trouble(redis: fault))
                } else {
                    index += 1
                }
            }
        }

        /// Stops the last process with a drain and runs everything out, without faults.
        func finish() {
            if !deciding {
                deciding = true
                deliver(.deciding(true), to: processes.count - 1)
            }
            if case .pageRead = walk { advanceWalk() }
            if case .began = walk {
                advanceWalk()
                advanceWalk()
            }
            walk = .idle
            deliver(.stop(drain: true), to: processes.count - 1)
            for _ in 0..<20_000 {
                if !inFlight.isEmpty {
                    performOne(at: 0, trouble: .none)
                } else if !deliveries.isEmpty {
                    let delivery = deliveries.removeFirst()
                    deliver(delivery.event, to: delivery.process)
                } else if current.machine.isFinished {
                    break
                } else if let next = current.timers.next {
                    pass(max(.zero, next.at - now))
                } else {
                    Issue.record("the last process waits for nothing and has not finished")
                    break
                }
            }
        }
    }

    @Test(
        "random steps with crashes, Redis restarts and failures: answers, Redis and PostgreSQL agree with the truth; nothing lost or applied twice",
        arguments: Array(UInt64(1)...UInt64(12)))
    func wholeShard(seed: UInt64) throws {
        try run(seed: seed, reactions: nil)
    }

    @Test(
        "with reactions, one and many per user: every answer's counts and kinds, Redis's kinds and counts and the rows agree with the truth per kind; one per user never shows two",
        arguments: [ReactionModel.PerUser.one, .many], [UInt64(5), 7, 8, 9, 10])
    func wholeShardWithReactions(perUser: ReactionModel.PerUser, seed: UInt64) throws {
        try run(seed: seed, reactions: perUser)
    }

    func run(seed: UInt64, reactions: ReactionModel.PerUser?) throws {
        let driver = Driver(seed: seed, reactions: reactions)
        let world = driver.world
        for step in 0..<6_000 {
            // Busy and quiet stretches in turn.
            driver.step(quiet: (step / 400) % 3 == 2)
            let disagreements = world.redisDisagreements()
            try #require(disagreements.isEmpty, "seed \(seed), step \(step): \(disagreements)")
            try #require(driver.wrongAnswers.isEmpty, "seed \(seed), step \(step): \(driver.wrongAnswers)")
            try #require(world.unsafeEvictions.isEmpty, "seed \(seed), step \(step): \(world.unsafeEvictions)")
            try #require(world.twoKinds.isEmpty, "seed \(seed), step \(step): \(world.twoKinds)")
            driver.checkLists()
            try #require(driver.listDisagreements.isEmpty, "seed \(seed), step \(step): \(driver.listDisagreements)")
        }
        driver.finish()
        #expect(driver.current.machine.isFinished, "seed \(seed): the last process ended its drain")
        #expect(driver.wrongAnswers.isEmpty, "seed \(seed): \(driver.wrongAnswers)")
        #expect(world.unsafeEvictions.isEmpty, "seed \(seed): \(world.unsafeEvictions)")
        #expect(world.redisDisagreements().isEmpty, "seed \(seed): \(world.redisDisagreements())")
        // Drained, the lists' view knows every slot again (no log left "unindexed" for good):
        // nothing waits, for a post or a user, and the shard answers for every slot it still
        // owns (a fault may have fenced the last process out of some).
        var served: Set<Int> = []
        for post in driver.postIDs {
            switch driver.current.machine.pendingAnswer(.post(post)) {
            case .changes(let changes):
                #expect(changes.isEmpty, "seed \(seed): post \(post): \(changes)")
                served.insert(Int(HashSlot(post: post).rawValue))
            case .notOwner: continue
            case let answer: Issue.record("seed \(seed): post \(post)'s pending changes are not known after the drain: \(answer)")
            }
        }
        if case .userChanges(let changes, let answered) = driver.current.machine.pendingAnswer(.user(1)) {
            #expect(
                changes.isEmpty && Set(answered.ranges.flatMap { Array($0) }) == served,
                "seed \(seed): user 1: \(changes), answered for \(answered.ranges), serving \(served.sorted())")
        } else {
            Issue.record("seed \(seed): a user's pending changes are not known after the drain")
        }

        // What is left in the logs is the next start's to apply.
        world.drainEverything()
        for post in world.posts.sorted() {
            #expect(world.likes[post] ?? [] == world.truth[post] ?? [], "seed \(seed): the rows of post \(post)")
            #expect(world.reactions[post] ?? [:] == world.truthReactions[post] ?? [:], "seed \(seed): the reactions rows of post \(post)")
        }
        let notOnce = world.appended.filter { world.applied[$0.id] != 1 }
        #expect(notOnce.isEmpty, "seed \(seed): entries not applied exactly once: \(notOnce.map { "\($0.id): \(world.applied[$0.id] ?? 0)" })")
        #expect(world.trimmed.isSubset(of: Set(world.applied.keys)), "seed \(seed): trimmed before it was applied")
        let counts = driver.answerCounts.all
        #expect(counts.values.allSatisfy { $0 == 1 }, "seed \(seed): an operation answered twice")
        let unanswered = driver.current.operations.filter { counts[$0] == nil }
        #expect(unanswered.isEmpty, "seed \(seed): operations of the last process never answered: \(unanswered.count)")
        print(
            "whole shard seed \(seed): \(driver.nextOperation) operations, \(driver.checkedAnswers) answers checked, "
                + "\(world.appended.count) entries, \(world.evictedPosts) evictions, \(world.publications) promotions, "
                + "\(world.coldLookups) cold lookups, \(driver.listChecks) list views checked, \(driver.crashes) crashes, \(driver.redisRestarts) Redis restarts, \(driver.faults) faults"
        )
        #expect(driver.listChecks > 1_000, "seed \(seed): the lists' view must be compared often (\(driver.listChecks))")
        #expect(
            world.appended.count > 50 && world.evictedPosts > 5 && world.coldLookups > 20,
            "seed \(seed): the run must write, evict and read cold (\(world.appended.count) entries, \(world.evictedPosts) evictions, \(world.coldLookups) lookups)"
        )
    }
}
