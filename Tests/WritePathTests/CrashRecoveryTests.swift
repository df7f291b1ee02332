import CounterCore
import Foundation
import NodeTestSupport
import Persistence
import PostgresDriver
import ShardRouter
import TestSupport
import Testing

@testable import WritePath

@Suite("Crash and restart", .serialized)
struct CrashRecoveryTests {
    /// What the harness knows of one pair after reading a driver's output.
    enum Expected: Equatable {
        case liked(Bool)
        /// An operation was in flight or failed: either state is allowed.
        case either
    }

    static func expectations(from lines: [String]) -> [Pair: Expected] {
        var expected: [Pair: Expected] = [:]
        for line in lines {
            let fields = line.split(separator: " ")
            guard fields.count >= 4, let user = Int64(fields[2]), let post = Int64(fields[3]) else { continue }
            let pair = Pair(user: user, post: post)
            switch fields[0] {
            case "S":
                // Until its answer arrives, the operation may or may not take effect.
                expected[pair] = .either
            case "A":
                expected[pair] = .liked(fields[4] == "1")
            default:
                expected[pair] = .either
            }
        }
        return expected
    }

    /// PostgreSQL against what the drivers were told, after recovery and flush: every
    /// acknowledged like has its row (else lost), no acknowledged unlike or unasked pair has one
    /// (else phantom), each recorded as an issue; every post's `likes_count` equals its rows.
    /// - Returns: the counts, the pairs left undetermined (in flight at a kill), and each post's rows.
    static func audit(_ expected: [Pair: Expected], posts: [Int64], pool: PostgresPool) async throws
        -> (lost: Int, phantom: Int, undetermined: Int, rows: [Int64: Int64])
    {
        let rows = try await pool.query("SELECT user_id, post_id FROM likes WHERE post_id = ANY($1::bigint[])", [.int64Array(posts)])
        let members = Set(try rows.map { Pair(user: try $0.int64(0), post: try $0.int64(1)) })
        var lost = 0
        var phantom = 0
        var undetermined = 0
        for (pair, state) in expected {
            switch state {
            case .liked(true):
                if !members.contains(pair) {
                    lost += 1
                    Issue.record("acknowledged like lost: \(pair)")
                }
            case .liked(false):
                if members.contains(pair) {
                    phantom += 1
                    Issue.record("acknowledged unlike undone: \(pair)")
                }
            case .either: undetermined += 1
            }
        }
        for pair in members where expected[pair] == nil {
            phantom += 1
            Issue.record("a like nobody requested: \(pair)")
        }
        let counts = try await pool.query(
            """
            SELECT p.id, p.likes_count, (SELECT count(*) FROM likes l WHERE l.post_id = p.id)
            FROM posts p WHERE p.id = ANY($1::bigint[])
            """, [.int64Array(posts)])
        var rowsByPost: [Int64: Int64] = [:]
        for row in counts {
            let (post, count, rowCount) = (try row.int64(0), try row.int64(1), try row.int64(2))
            #expect(count == rowCount, "post \(post): likes_count \(count), rows \(rowCount)")
            rowsByPost[post] = rowCount
        }
        try await auditEvents(members: members, posts: posts, pool: pool)
        return (lost, phantom, undetermined, rowsByPost)
    }

    /// The change events (the drivers write them) against the rows: each pair's events
    /// alternate like, unlike, like… from a like (none twice: a flush applied twice would repeat
    /// one), and the last one says what the rows say — no event without its row change, no row
    /// change without its event, whatever step of a flush the kills cut.
    static func auditEvents(members: Set<Pair>, posts: [Int64], pool: PostgresPool) async throws {
        let events = try await pool.query(
            "SELECT user_id, post_id, liked FROM counter_like_events WHERE post_id = ANY($1::bigint[]) ORDER BY id", [.int64Array(posts)])
        var last: [Pair: Bool] = [:]
        var repeated = 0
        for row in events {
            let pair = Pair(user: try row.int64(0), post: try row.int64(1))
            let liked = try row.bool(2)
            if last[pair] == liked || (last[pair] == nil && !liked) {
                repeated += 1
                if repeated <= 5 { Issue.record("event liked=\(liked) of \(pair) does not change what the one before it said") }
            }
            last[pair] = liked
        }
        #expect(!last.isEmpty, "the drivers write change events")
        let told = Set(last.filter(\.value).keys)
        #expect(
            told == members,
            "events say \(told.subtracting(members).count) pairs liked that have no row, and miss \(members.subtracting(told).count) rows")
    }

    /// The most posts a driver reported evicted (`V <evicted>` lines).
    static func evictions(in lines: [String]) -> Int {
        lines.lazy.filter { $0.hasPrefix("V ") }.compactMap { Int($0.dropFirst(2)) }.max() ?? 0
    }

    /// Runs the driver's `recover` (the logs flushed, then every post's count answered), audits
    /// PostgreSQL against `expected` — nothing lost or phantom, counts equal rows — and checks
    /// that the count answered for every post, hot or cold, equals its rows.
    static func recoverAndAudit(
        driver: String, _ common: [String], _ expected: [Pair: Expected], posts: [Int64],
        pool: PostgresPool
    ) async throws -> (lost: Int, phantom: Int) {
        let recovery = try ChildProcess([driver, "recover"] + common + ["1", "100"])
        #expect(try await recovery.waitForExit() == 0)
        #expect(recovery.output.contains("FLUSHED"))
        let (lost, phantom, _, rowsByPost) = try await audit(expected, posts: posts, pool: pool)
        #expect(lost == 0 && phantom == 0, "lost \(lost), phantom \(phantom)")
        let answered = recovery.output.filter { $0.hasPrefix("C ") }.map { $0.split(separator: " ") }
        #expect(answered.count == posts.count)
        for fields in answered {
            #expect(
                Int64(fields[2]) == rowsByPost[Int64(fields[1]) ?? 0],
                "post \(fields[1]): answered \(fields[2]), rows \(rowsByPost[Int64(fields[1]) ?? 0] ?? -1)")
        }
        return (lost, phantom)
    }

    /// The answers in a driver's output that do not follow from the one before them on their
    /// pair (one operation in flight per pair): a toggle flips it, like and unlike set it; after a
    /// failure or a kill before its answer, the pair's state is unknown until its next answer.
    /// Each one is recorded as an issue (the first five).
    static func wrongAnswers(in lines: [String]) -> Int {
        var previous: [Pair: Bool?] = [:]
        var inFlight: [Pair: String] = [:]
        var wrongAnswers = 0
        for line in lines {
            let fields = line.split(separator: " ")
            guard fields.count >= 5, let user = Int64(fields[2]), let post = Int64(fields[3]) else { continue }
            let pair = Pair(user: user, post: post)
            switch fields[0] {
            case "S":
                if inFlight[pair] != nil { previous[pair] = .some(nil) } // killed before its answer
                inFlight[pair] = String(fields[4])
            case "A":
                let liked = fields[4] == "1"
                let before = previous[pair] ?? false // fresh posts: nobody likes them
                let wanted: Bool? =
                    switch inFlight[pair] {
                    case "toggle": before.map { !$0 }
                    case "like": true
                    case "unlike": false
                    default: nil
                    }
                if let wanted, wanted != liked {
                    wrongAnswers += 1
                    if wrongAnswers <= 5 { Issue.record("\(pair): \(inFlight[pair] ?? "?") answered \(liked) after \(String(describing: before))") }
                }
                previous[pair] = .some(liked)
                inFlight[pair] = nil
            default:
                previous[pair] = .some(nil)
                inFlight[pair] = nil
            }
        }
        return wrongAnswers
    }

    @Test(
        "SIGKILL in the middle of acknowledged changes: after restart and flush, PostgreSQL holds exactly the acknowledged states",
        arguments: RedisTarget.allCases)
    func killNineThenRecover(redis: RedisTarget) async throws {
        let pool = try await TestEnvironment.migratedPool()
        let posts = try await TestEnvironment.createPosts(6, in: pool)
        let prefix = TestEnvironment.uniqueKeyPrefix("crash")
        let driver = ChildProcess.builtProduct("CrashDriver")
        let common = [TestEnvironment.postgresURL, redis.url, prefix, posts.map(String.init).joined(separator: ",")]

        let child = try ChildProcess([driver, "run"] + common + ["16"])
        let enough = try await child.waitForOutput(timeout: .seconds(60)) { lines in
            lines.lazy.filter { $0.hasPrefix("A ") }.count >= 3_000
        }
        child.kill(SIGKILL)
        let status = try await child.waitForExit()
        #expect(enough, "the driver acknowledged too little before the kill")
        #expect(status == 128 + SIGKILL)
        let lines = child.output
        let acknowledged = lines.filter { $0.hasPrefix("A ") }.count
        let expected = Self.expectations(from: lines)

        let recovery = try ChildProcess([driver, "recover"] + common + ["1"])
        #expect(try await recovery.waitForExit() == 0)
        #expect(recovery.output.contains("FLUSHED"))

        let (lost, phantom, undetermined, _) = try await Self.audit(expected, posts: posts, pool: pool)
        print(
            "crash test (\(redis)): \(acknowledged) acknowledged operations over \(expected.count) pairs before SIGKILL; \(undetermined) pairs in flight; lost \(lost), phantom \(phantom)"
        )
        await pool.close()
    }

    /// What the drivers were told of each pair with reactions (`R` lines): the user's kinds, or
    /// `nil` when an operation was in flight at a kill or failed (any kinds are allowed).
    static func reactionExpectations(from lines: [String]) -> [Pair: Set<String>?] {
        var expected: [Pair: Set<String>?] = [:]
        for line in lines {
            let fields = line.split(separator: " ")
            guard fields.count >= 4, let user = Int64(fields[2]), let post = Int64(fields[3]) else { continue }
            let pair = Pair(user: user, post: post)
            if fields[0] == "R", fields.count >= 5 {
                expected[pair] = .some(fields[4] == "-" ? [] : Set(fields[4].split(separator: ",").map(String.init)))
            } else {
                expected[pair] = .some(nil)
            }
        }
        return expected
    }

    @Test(
        "with reactions, one and many per user: SIGKILL twice in the middle of acknowledged changes — after the restart and flush, each pair's rows are exactly its acknowledged kinds, each kind's count equals its rows, one per user never shows two, and every count answered equals the rows",
        arguments: [ReactionModel.PerUser.one, .many])
    func killNineWithReactions(perUser: ReactionModel.PerUser) async throws {
        let url = try await TestEnvironment.reactionsDatabase()
        let pool = PostgresPool(configuration: PostgresConfiguration(url: url))
        let posts = try await TestEnvironment.createPosts(6, in: pool)
        let prefix = TestEnvironment.uniqueKeyPrefix("crash-reactions")
        let driver = ChildProcess.builtProduct("CrashDriver")
        let common = [url, RedisTarget.single.url, prefix, posts.map(String.init).joined(separator: ",")]
        let mode = ["COUNTER_CRASH_REACTIONS": perUser.rawValue]
        var lines: [String] = []
        for round in 1...2 {
            let child = try ChildProcess([driver, "run"] + common + ["16"], adding: mode)
            let enough = try await child.waitForOutput(timeout: .seconds(60)) { lines in
                lines.lazy.filter { $0.hasPrefix("R ") }.count >= 2_000
            }
            child.kill(SIGKILL)
            #expect(try await child.waitForExit() == 128 + SIGKILL)
            #expect(enough, "round \(round): the driver acknowledged too little before the kill")
            lines += child.output
        }
        let answered = lines.filter { $0.hasPrefix("R ") }
        if perUser == .one {
            let twoKinds = answered.filter { $0.split(separator: " ")[4].contains(",") }
            #expect(twoKinds.isEmpty, "answers with two kinds: \(twoKinds.prefix(3))")
        }
        let expected = Self.reactionExpectations(from: lines)
        let recovery = try ChildProcess([driver, "recover"] + common + ["1"], adding: mode)
        #expect(try await recovery.waitForExit() == 0)
        #expect(recovery.output.contains("FLUSHED"))

        let rows = try await pool.query(
            """
            SELECT user_id, post_id, 'like' FROM likes WHERE post_id = ANY($1::bigint[])
            UNION ALL SELECT user_id, post_id, kind FROM reactions WHERE post_id = ANY($1::bigint[])
            """, [.int64Array(posts)])
        var held: [Pair: Set<String>] = [:]
        for row in rows { held[Pair(user: try row.int64(0), post: try row.int64(1)), default: []].insert(row.string(2) ?? "") }
        var wrong = 0
        var undetermined = 0
        for (pair, kinds) in expected {
            guard let kinds else {
                undetermined += 1
                continue
            }
            if held[pair] ?? [] != kinds {
                wrong += 1
                if wrong <= 5 { Issue.record("\(pair): acknowledged \(kinds.sorted()), rows \((held[pair] ?? []).sorted())") }
            }
        }
        let unasked = held.keys.filter { expected[$0] == nil }
        #expect(unasked.isEmpty, "rows nobody asked for: \(unasked.prefix(5))")
        if perUser == .one {
            let several = held.filter { $0.value.count > 1 }
            #expect(several.isEmpty, "rows of two kinds for one user: \(several.prefix(5))")
        }
        let tallies = try await ReactionTallies.of(posts, in: pool)
        for (key, tally) in tallies {
            #expect(tally.rows == tally.count, "post \(key.postID) kind \(key.kind): count \(tally.count), rows \(tally.rows)")
        }
        // Every post's counts as answered after the recovery: its rows.
        for line in recovery.output where line.hasPrefix("K ") {
            let fields = line.split(separator: " ")
            let post = Int64(fields[1])!
            var rowsByKind: [String: Int] = [:]
            for (pair, kinds) in held where pair.post == post { for kind in kinds { rowsByKind[kind, default: 0] += 1 } }
            var answeredCounts: [String: Int] = [:]
            for part in fields[2].split(separator: ",") where fields[2] != "-" {
                let halves = part.split(separator: ":")
                answeredCounts[String(halves[0])] = Int(halves[1])!
            }
            #expect(answeredCounts == rowsByKind, "post \(post): answered \(answeredCounts), rows \(rowsByKind)")
        }
        #expect(recovery.output.filter { $0.hasPrefix("K ") }.count == posts.count)
        #expect(wrong == 0)
        print(
            "crash with reactions (\(perUser)): \(answered.count) acknowledged over \(expected.count) pairs in two runs; \(undetermined) in flight at a kill; \(wrong) pairs whose rows differ from their last answer"
        )
        await pool.close()
    }

    @Test(
        "SIGKILL twice while idle posts are evicted every 100 ms: nothing acknowledged lost, nothing phantom, and every count answered after the restart equals PostgreSQL's rows",
        arguments: RedisTarget.allCases)
    func killNineWhileEvicting(redis: RedisTarget) async throws {
        let pool = try await TestEnvironment.migratedPool()
        // Many posts, few operations on each: every post goes quiet now and then, and is evicted.
        let posts = try await TestEnvironment.createPosts(1_500, in: pool)
        let prefix = TestEnvironment.uniqueKeyPrefix("crash-evict")
        let driver = ChildProcess.builtProduct("CrashDriver")
        let common = [TestEnvironment.postgresURL, redis.url, prefix, posts.map(String.init).joined(separator: ",")]
        var lines: [String] = []
        for round in 1...2 {
            let child = try ChildProcess([driver, "run"] + common + ["8", "100"])
            // Killed once it has acknowledged enough and evicted some (however long that takes).
            let enough = try await child.waitForOutput(timeout: .seconds(60)) { lines in
                lines.lazy.filter { $0.hasPrefix("A ") }.count >= 4_000 && Self.evictions(in: lines) > 0
            }
            child.kill(SIGKILL)
            #expect(try await child.waitForExit() == 128 + SIGKILL)
            #expect(enough, "round \(round): the driver acknowledged too little before the kill")
            let evicted = Self.evictions(in: child.output)
            #expect(evicted > 0, "round \(round): no post was evicted while the driver ran")
            lines += child.output
        }
        let expected = Self.expectations(from: lines)
        // A post evicted with a change still pending would be read stale from PostgreSQL.
        #expect(Self.wrongAnswers(in: lines) == 0)

        let (lost, phantom) = try await Self.recoverAndAudit(driver: driver, common, expected, posts: posts, pool: pool)
        print(
            "crash while evicting (\(redis)): \(lines.filter { $0.hasPrefix("A ") }.count) acknowledged over \(expected.count) pairs in two runs; lost \(lost), phantom \(phantom)"
        )
        await pool.close()
    }

    @Test(
        "Redis killed (SIGKILL) twice while idle posts are evicted every 100 ms, on a Redis that syncs each write: nothing acknowledged lost, nothing phantom, every answer follows from the one before, and every count after the restart equals PostgreSQL's rows",
        .timeLimit(.minutes(4)))
    func redisKilledWhileEvicting() async throws {
        // A Redis of its own, killed and started again from its AOF; with `appendfsync always` it
        // loses nothing it acknowledged, so neither may the service. Evictions run all the time,
        // so the kills land before, inside and after their transactions.
        try await PrivateServers.with(redisAppendfsync: "always") { servers in
            let pool = PostgresPool(configuration: PostgresConfiguration(url: servers.postgresURL))
            _ = try await SchemaMigrator.migrate(pool)
            let posts = try await TestEnvironment.createPosts(1_500, in: pool)
            let prefix = TestEnvironment.uniqueKeyPrefix("redis-kill-evict")
            let driver = ChildProcess.builtProduct("CrashDriver")
            let common = [servers.postgresURL, servers.redisURL, prefix, posts.map(String.init).joined(separator: ",")]
            let child = try ChildProcess([driver, "run"] + common + ["8", "100"])
            var evictedBefore = 0
            for round in 1...2 {
                // Served and evicting since the round before.
                let acknowledged = round * 3_000
                let enough = try await child.waitForOutput(timeout: .seconds(60)) { lines in
                    lines.lazy.filter { $0.hasPrefix("A ") }.count >= acknowledged && Self.evictions(in: lines) > evictedBefore
                }
                #expect(enough, "round \(round): the driver acknowledged too little, or no post was evicted, before Redis was killed")
                evictedBefore = Self.evictions(in: child.output)
                try await servers.killRedis()
                try await Task.sleep(for: .milliseconds(300))
                try await servers.run("start", only: "redis")
            }
            // Served again after the last restart: more answers, and more evictions.
            let answeredAfter = child.output.lazy.filter { $0.hasPrefix("A ") }.count + 2_000
            let served = try await child.waitForOutput(timeout: .seconds(60)) { lines in
                lines.lazy.filter { $0.hasPrefix("A ") }.count >= answeredAfter && Self.evictions(in: lines) > evictedBefore
            }
            #expect(served, "the driver was not served again, or evicted nothing, after Redis came back")
            child.kill(SIGKILL)
            #expect(try await child.waitForExit() == 128 + SIGKILL)
            let lines = child.output
            let evicted = Self.evictions(in: lines)
            let failed = lines.lazy.filter { $0.hasPrefix("E ") }.count

            let expected = Self.expectations(from: lines)
            #expect(Self.wrongAnswers(in: lines) == 0)
            let (lost, phantom) = try await Self.recoverAndAudit(driver: driver, common, expected, posts: posts, pool: pool)
            print(
                "Redis killed while evicting: \(lines.filter { $0.hasPrefix("A ") }.count) acknowledged, \(failed) failed while Redis was down, \(evicted) evictions, over \(expected.count) pairs; lost \(lost), phantom \(phantom)"
            )
            await pool.close()
        }
    }

    @Test(
        "a restart without a final flush: the new service recovers the logs, flushes them, and reads its state from Redis",
        arguments: RedisTarget.allCases)
    func restartWithoutFlush(redis: RedisTarget) async throws {
        let harness = try await WritePathHarness.start(posts: 3, redis: redis) { configuration in
            configuration.flushOnlyWhenAsked()
        }
        for user in 1...40 {
            for post in harness.posts { _ = try await harness.service.perform(.like, post: post, user: Int64(user)) }
        }
        await harness.stopService(drain: false)
        #expect(try await harness.postgresMembers().isEmpty, "nothing was meant to be flushed yet")

        let restarted = try await harness.restarted()
        #expect(await restarted.service.stats().reduce(0) { $0 + $1.pendingChanges } == 120)
        #expect(
            try await restarted.service.perform(.read, post: harness.posts[0], user: 1)
                == LikeState(postID: harness.posts[0], userID: 1, isLiked: true, likesCount: 40))
        try await restarted.service.flush()
        #expect(try await restarted.postgresMembers().count == 120)
        for (_, state) in try await restarted.postgresCounts() { #expect(state.count == 40 && state.rows == 40) }
        await restarted.stop()
    }

    @Test(
        "an upgrade: one-change entries the previous version left in a log are applied beside packed ones, each once, also when some were applied before a crash",
        .timeLimit(.minutes(1)), arguments: RedisTarget.allCases)
    func upgradeFromOneChangeEntries(redis: RedisTarget) async throws {
        let pool = try await TestEnvironment.migratedPool()
        let audit = try await AuditTable.create(TestEnvironment.uniqueKeyPrefix("upgrade"), in: pool)
        let harness = try await WritePathHarness.start(posts: 2, redis: redis) { configuration in
            configuration.flushOnlyWhenAsked()
            configuration.flushAudit = audit.flushAudit
        }
        let (packedPost, oldPost) = (harness.posts[0], harness.posts[1])
        for user in 1...10 { _ = try await harness.service.perform(.like, post: packedPost, user: Int64(user)) }
        // As the previous version wrote them: one entry per change (fields u, p, l).
        let slot = HashSlot(post: oldPost)
        let log = harness.layout.changeLog(of: slot)
        for (user, liked) in [(1, true), (2, true), (1, false), (3, true)] as [(Int64, Bool)] {
            _ = try await harness.redis.pipeline([.xadd(log, fields: [("u", user), ("p", oldPost), ("l", liked ? "1" : "0")])], slot: slot)
        }
        let written = try await harness.redis.pipeline([.xrange(log, count: 100)], slot: slot)[0].streamEntries()
        #expect(written.count == 4)
        // The previous version applied the first two, then died before trimming them.
        let appliedBeforeCrash = written.prefix(2).map { entry in
            LoggedLikeChange(log: log, slot: slot.rawValue, entryID: entry.id, change: ChangeLogEntry.change(from: entry)!)
        }
        _ = try await pool.withTransaction { connection in
            try LikeBatchApplier.apply(appliedBeforeCrash, on: connection, audit: audit.flushAudit)
        }
        await harness.stopService(drain: false)

        // The new version recovers both logs and flushes them: the applied entries are skipped
        // (applying one twice would break the audit table's key and fail the flush).
        let restarted = try await harness.restarted()
        try await restarted.service.flush()
        #expect(try await restarted.postgresMembers([oldPost]) == [Pair(user: 2, post: oldPost), Pair(user: 3, post: oldPost)])
        #expect(try await restarted.postgresMembers([packedPost]) == Set((1...10).map { Pair(user: Int64($0), post: packedPost) }))
        for (_, state) in try await restarted.postgresCounts() { #expect(state.count == state.rows) }
        #expect(try await LikeBatchApplier.progress(of: log, pool: pool) == written.last?.id)
        // Entries without a time of their own: each like's row keeps its entry's time.
        let times = try await pool.query(
            "SELECT user_id, (extract(epoch FROM created_at) * 1000)::bigint FROM likes WHERE post_id = $1 ORDER BY user_id", [.int64(oldPost)])
        #expect(
            try times.map { [try $0.int64(0), try $0.int64(1)] } == [
                [2, Int64(written[1].id.milliseconds)], [3, Int64(written[3].id.milliseconds)],
            ])
        let auditRows = try await pool.query("SELECT count(*) FROM \(audit.name) WHERE log = $1", [.text(log)])
        #expect(try auditRows.first?.int64(0) == 4)
        let remaining = try await harness.redis.pipeline([.xlen(log)], slot: slot)
        #expect(remaining.first?.integer == 0)
        await restarted.stop()
        try await pool.query("DROP TABLE \(audit.name)")
        await pool.close()
    }
}
