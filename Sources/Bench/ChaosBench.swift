import BenchKit
import CounterCore
import CounterWire
import Foundation
import PostgresDriver
import Synchronization

/// Options of `counter-bench chaos`.
struct ChaosBenchOptions {
    var minutes = 2
    var connections = 32
    var rate = 800
    var posts = 200
    var backlogLimit = 150
    /// The node's `--hot-idle` (`nil`: its default): a short one evicts posts all the time, so
    /// the faults also hit posts leaving Redis and coming back.
    var hotIdle: String?
    /// `scripts/services`, run with the environment's data folder and ports.
    var servicesScript = "scripts/services"
    var nodeBinary = ".build/release/counter-node"
    var port = 18_180
    var dataDirectory: String
    var postgresPort: Int
    var redisPort: Int
    var appendfsync: String
    /// `--reactions one|many`: the node serves the kinds of `reactionKinds`, one or many per
    /// user, and the load reacts with them; `nil`: likes only.
    var reactionsPerUser: String?
    static let reactionKinds = ["like", "love", "haha", "wow"]

    init(arguments: [String], environment: [String: String]) throws {
        dataDirectory = environment["COUNTER_DATA_DIR"] ?? ".data/chaos"
        postgresPort = Int(environment["COUNTER_PG_PORT"] ?? "") ?? 25_532
        redisPort = Int(environment["COUNTER_REDIS_PORT"] ?? "") ?? 26_479
        appendfsync = environment["COUNTER_REDIS_APPENDFSYNC"] ?? "everysec"
        var reader = BenchArguments(arguments)
        try reader.forEachFlag { flag, reader in
            switch flag {
            case "--minutes": minutes = try reader.number(flag, 1...1_440)
            case "--connections": connections = try reader.number(flag, 1...2_000)
            case "--rate": rate = try reader.number(flag, 10...1_000_000)
            case "--posts": posts = try reader.number(flag, 1...100_000)
            case "--backlog-limit": backlogLimit = try reader.number(flag, 10...1_000_000)
            case "--hot-idle":
                let text = try reader.value(flag)
                guard let idle = Duration.parsingSetting(text), idle > .zero else {
                    throw BenchUsageError(message: "--hot-idle \(text): must be a duration such as 1s, 500ms or 2m")
                }
                hotIdle = idle.settingText
            case "--services": servicesScript = try reader.value(flag)
            case "--node-binary": nodeBinary = try reader.value(flag)
            case "--port": port = try reader.number(flag, 1...65_535)
            case "--reactions":
                let text = try reader.value(flag)
                guard text == "one" || text == "many" else { throw BenchUsageError(message: "--reactions \(text): must be one or many") }
                reactionsPerUser = text
            default: return false
            }
            return true
        }
    }
}

/// `counter-bench chaos`: a node under mixed load (likes, unlikes, toggles on pairs each
/// connection owns, reads, feed queries) while faults come one after another — kill -9 of the
/// node, a PostgreSQL restart, kill -9 of Redis, SIGSTOP of the node, PostgreSQL down until a
/// backlog passes its limit, a poison trigger planted and removed. Then it replays the dead
/// letters, flushes and checks PostgreSQL against every acknowledgement: nothing lost, nothing
/// phantom, `likes_count` equal to the rows, dead letters only of the poison user. Prints a
/// timeline of throughput and failures with the faults laid over it.
struct ChaosBench {
    let options: ChaosBenchOptions

    func run() async throws {
        let minutes = options.minutes
        say(
            "counter-bench chaos: \(minutes) min, \(options.connections) connections at \(options.rate) requests/s; "
                + "Redis appendfsync \(options.appendfsync); data in \(options.dataDirectory)")
        let services = ChaosServices(script: options.servicesScript, dataDirectory: options.dataDirectory)
        try await services.run("start")
        let postgresURL = "postgresql://counter@127.0.0.1:\(options.postgresPort)/counter"
        let redisURL = "redis://127.0.0.1:\(options.redisPort)"
        let endpoint = Endpoint(host: "127.0.0.1", port: options.port)
        let logFile = URL(fileURLWithPath: options.dataDirectory).appendingPathComponent("node.log")
        let node = ChaosNode(
            binary: options.nodeBinary,
            arguments: [
                "--listen", "127.0.0.1:\(options.port)", "--postgres-url", postgresURL, "--redis-url", redisURL,
                "--key-prefix", "chaos", "--node-id", "chaos-1", "--shards", "2", "--backlog-limit", String(options.backlogLimit),
                "--shutdown-timeout", "20s", "--log-level", "info",
            ] + (options.hotIdle.map { ["--hot-idle", $0] } ?? [])
                + (options.reactionsPerUser.map {
                    ["--reactions", ChaosBenchOptions.reactionKinds.joined(separator: ","), "--reactions-per-user", $0]
                } ?? []), endpoint: endpoint, logFile: logFile)
        try await node.startReady()
        say("node answering on \(endpoint) (log: \(logFile.path))")

        let pool = PostgresPool(configuration: PostgresConfiguration(url: postgresURL))
        let base = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        let posts = (0..<Int64(options.posts)).map { base + $0 }
        try await Self.sql(pool, "INSERT INTO posts (id) SELECT unnest($1::bigint[])", [.int64Array(posts)])
        var workload = ChaosWorkload(posts: posts, token: nil, userBase: Int64.random(in: 1...1_000_000) * 1_000_000_000)
        if options.reactionsPerUser != nil { workload.reactionKinds = ChaosBenchOptions.reactionKinds }

        var load = LoadOptions()
        load.endpoints = [endpoint]
        load.connections = options.connections
        load.rate = Double(options.rate)
        load.warmup = .zero
        load.duration = .seconds(minutes * 60)
        load.timeout = .seconds(3)
        let generator = LoadGenerator(options: load, workload: workload)
        let seconds = Mutex<(answered: [Int], failed: [Int], lastFailures: Int)>(([], [], 0))
        let started = ContinuousClock.now
        let loadTask = Task {
            await generator.run { _, answered, failures, _ in
                seconds.withLock { state in
                    state.answered.append(answered)
                    state.failed.append(failures - state.lastFailures)
                    state.lastFailures = failures
                }
            }
        }

        var timeline = ChaosTimeline()
        let schedule = ChaosSchedule(duration: .seconds(minutes * 60))
        let faults = ChaosFaults(
            node: node, services: services, pool: pool, poisonCondition: workload.poisonCondition("COALESCE(NEW.user_id, OLD.user_id)"),
            backlogLimit: options.backlogLimit, reactions: options.reactionsPerUser != nil)
        // Posts the node evicted, summed over its restarts (each start counts from zero): sampled
        // before each fault, which may be a kill.
        var evictions = EvictionTally()
        for entry in schedule.entries {
            try await Task.sleep(until: started + entry.at)
            evictions.observe(faults.evictedPosts())
            let began = (ContinuousClock.now - started).inSeconds
            let note: String
            do {
                note = try await faults.perform(entry.fault)
            } catch {
                note = "the fault itself failed: \(error)"
            }
            let ended = (ContinuousClock.now - started).inSeconds
            timeline.events.append(.init(fault: entry.fault, began: began, ended: ended, note: note))
            say(String(format: "[%6.1f s] %@: %@", began, entry.fault.rawValue, note))
        }
        let result = await loadTask.value
        evictions.observe(faults.evictedPosts())
        (timeline.answered, timeline.failed) = seconds.withLock { ($0.answered, $0.failed) }

        // Settle: the node up, the trigger gone, then the dead letters and the check.
        try await faults.dropPoison()
        try await node.waitUntilAnswering("/readyz", timeout: .seconds(60))
        let letters = try Self.deadLetters(endpoint)
        let unexpected = letters.filter { letter in !(letter.fields["u"].flatMap { Int64($0) }.map(workload.isPoison) ?? false) }
        // A letter whose replay failed stays (the node may not decide at that moment: its lease
        // lapsed in the last fault): replayed again until none fails, for up to a minute.
        var (status, replayBody) = try OneShotHTTP.send(to: endpoint, method: "POST", path: "/admin/dead-letters/replay", token: nil)
        var replay = status == 200 ? try? WireDecoder.decode(ReplayResult.self, from: Array(replayBody.utf8)) : nil
        let replayDeadline = ContinuousClock.now + .seconds(60)
        while replay?.failed.isEmpty != true, ContinuousClock.now < replayDeadline {
            try await Task.sleep(for: .seconds(1))
            try await node.waitUntilAnswering("/readyz", timeout: .seconds(30))
            let earlier = replay
            (status, replayBody) = try OneShotHTTP.send(to: endpoint, method: "POST", path: "/admin/dead-letters/replay", token: nil)
            if status == 200, var again = try? WireDecoder.decode(ReplayResult.self, from: Array(replayBody.utf8)) {
                again.replayed += earlier?.replayed ?? []
                again.superseded += earlier?.superseded ?? []
                replay = again
            }
        }
        let (flushStatus, flushBody) = try OneShotHTTP.send(to: endpoint, method: "POST", path: "/admin/flush", token: nil)
        guard flushStatus == 200 else { throw BenchCheckFailure(message: "POST /admin/flush answered \(flushStatus): \(flushBody)") }
        let report: CorrectnessCheck.Report
        if let perUser = options.reactionsPerUser {
            let reactions = try await PostgresReactions.read(posts, pool: pool)
            report = CorrectnessCheck.runReactions(
                expected: result.expectations, held: reactions.held, counts: reactions.counts, onePerUser: perUser == "one",
                severalKindsAnswers: result.severalKindsAnswers)
        } else {
            let rows = try await Self.sql(pool, "SELECT user_id, post_id FROM likes WHERE post_id = ANY($1::bigint[])", [.int64Array(posts)])
            let members = Set(try rows.map { CorrectnessCheck.Pair(user: try $0.int64(0), post: try $0.int64(1)) })
            let countRows = try await Self.sql(
                pool,
                """
                SELECT p.id, p.likes_count, (SELECT count(*) FROM likes l WHERE l.post_id = p.id) FROM posts p WHERE p.id = ANY($1::bigint[])
                """, [.int64Array(posts)])
            var counts: [Int64: (likesCount: Int64, rows: Int64)] = [:]
            for row in countRows { counts[try row.int64(0)] = (try row.int64(1), try row.int64(2)) }
            report = CorrectnessCheck.run(expected: result.expectations, baseline: [], members: members, counts: counts)
        }
        let exit = await node.stop()
        await pool.close()

        say("\ntimeline (the load began at 0 s):")
        say(timeline.render())
        let total = result.statuses.values.reduce(0, +) + result.errors.values.reduce(0, +)
        say("\nrequests: \(total) sent, \(result.successes) answered 2xx, \(result.failures) failed")
        for (status, count) in result.statuses.sorted(by: { $0.key < $1.key }) where !(200..<300).contains(status) {
            say("  status \(status): \(count)")
        }
        for (kind, count) in result.errors.sorted(by: { $0.value > $1.value }) { say("  \(kind): \(count)") }
        say("pairs: \(report.checkedPairs) checked, \(report.undeterminedPairs) with an unknown last outcome (failed request)")
        say(
            "PostgreSQL after flush: lost \(report.lost.count), phantom \(report.phantom.count), "
                + (options.reactionsPerUser == nil
                    ? "likes_count ≠ rows on \(report.drift.count) post(s)"
                    : "a count ≠ its rows on \(report.drift.count) (post, kind), \(report.severalKindsHeld.count) users holding two kinds, "
                        + "\(result.severalKindsAnswers) answers showing two kinds (--reactions \(options.reactionsPerUser!))"))
        say(
            "dead letters: \(letters.count), of the poison users \(letters.count - unexpected.count), of others \(unexpected.count); "
                + "replay: \(replay.map { "\($0.replayed.count) replayed, \($0.superseded.count) superseded, \($0.failed.count) failed" } ?? "answered \(status)")"
        )
        say(
            "posts evicted from Redis: \(evictions.total) at least (sampled before each fault)"
                + (options.hotIdle.map { "; --hot-idle \($0)" } ?? ""))
        say("node exit status after SIGTERM: \(exit.map(String.init) ?? "none (still running)")")
        for pair in report.lost.prefix(10) { say("  lost \(pair)") }
        for pair in report.phantom.prefix(10) { say("  phantom \(pair)") }
        for drift in report.drift.prefix(10) {
            say("  post \(drift.post)\(drift.kind.map { " \($0)" } ?? ""): count \(drift.likesCount), rows \(drift.rows)")
        }
        let poisonPlanted = timeline.events.contains { $0.fault == .poisonTrigger }
        if poisonPlanted && letters.isEmpty {
            throw BenchCheckFailure(message: "chaos: the poison trigger was in place, but no change of a poison user became a dead letter")
        }
        if options.hotIdle != nil && evictions.total == 0 {
            throw BenchCheckFailure(message: "chaos: with --hot-idle \(options.hotIdle!) the node evicted no post: eviction was not put to the test")
        }
        guard report.passed, unexpected.isEmpty, replay?.failed.isEmpty == true, exit == 0 else {
            let window =
                options.appendfsync == "always"
                ? "" : " (with appendfsync \(options.appendfsync), kill -9 of Redis may lose what it acknowledged in its last second)"
            throw BenchCheckFailure(message: "chaos: the guarantees did not hold\(window)")
        }
        say("chaos: every guarantee held")
    }

    /// The node's dead letters (up to 10,000).
    static func deadLetters(_ endpoint: Endpoint) throws -> [DeadLetter] {
        let (status, body) = try OneShotHTTP.send(to: endpoint, method: "GET", path: "/admin/dead-letters?count=10000", token: nil)
        guard status == 200 else { throw BenchCheckFailure(message: "GET /admin/dead-letters answered \(status): \(body)") }
        return try WireDecoder.decode(DeadLetterList.self, from: Array(body.utf8)).deadLetters
    }

    /// `query` on `pool`, tried again for up to 30 s while PostgreSQL is restarting.
    @discardableResult
    static func sql(_ pool: PostgresPool, _ query: String, _ parameters: [PostgresValue] = []) async throws -> PostgresRows {
        var attempt = 0
        while true {
            do {
                return try await pool.query(query, parameters)
            } catch let error as PostgresError {
                attempt += 1
                guard error.isRetryable, attempt < 60 else { throw error }
                try await Task.sleep(for: .milliseconds(500))
            }
        }
    }
}

/// Writes `line` to standard output at once (not buffered: progress shows as it happens, also
/// into a pipe).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Each fault of the schedule, performed; returns what was seen.
struct ChaosFaults {
    let node: ChaosNode
    let services: ChaosServices
    let pool: PostgresPool
    /// SQL that holds for the poison users' rows (`ChaosWorkload.poisonCondition`).
    let poisonCondition: String
    let backlogLimit: Int
    /// Whether the node serves reactions: the poison trigger then refuses the poison users'
    /// rows of every kind (`reactions` too).
    var reactions = false

    func perform(_ fault: ChaosFault) async throws -> String {
        let began = ContinuousClock.now
        func since() -> String { String(format: "%.1f s", (ContinuousClock.now - began).inSeconds) }
        switch fault {
        case .killNode:
            await node.killNow()
            try await node.startReady()
            return "killed; ready again after \(since()) (the id's lease running out, taking the slots over and draining their logs included)"
        case .restartPostgres:
            try await services.run("stop", "postgres")
            try await Task.sleep(for: .seconds(3))
            try await services.run("start", "postgres")
            try await node.waitUntilAnswering("/readyz", timeout: .seconds(30))
            return "down 3 s; the node ready again after \(since())"
        case .killRedis:
            try services.killRedis()
            try await Task.sleep(for: .seconds(1))
            try await services.run("start", "redis")
            try await node.waitUntilAnswering("/readyz", timeout: .seconds(30))
            return "killed; restarted, and the node ready again after \(since())"
        case .pauseNode:
            node.signal(SIGSTOP)
            try await Task.sleep(for: .seconds(4))
            node.signal(SIGCONT)
            try await node.waitUntilAnswering("/readyz", timeout: .seconds(30))
            return "stopped for 4 s; ready again after \(since())"
        case .backlogPastLimit:
            try await services.run("stop", "postgres")
            var reached: String?
            let deadline = ContinuousClock.now + .seconds(30)
            while reached == nil && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(250))
                if let pending = pendingPerShard(), let largest = pending.max(), largest >= backlogLimit {
                    reached = "a shard's backlog reached its limit of \(backlogLimit) after \(since()) (writes got 503 backlog_full)"
                }
            }
            try await services.run("start", "postgres")
            let restarted = ContinuousClock.now
            var drained = "not drained within 30 s"
            while ContinuousClock.now - restarted < .seconds(30) {
                if let pending = pendingPerShard(), pending.allSatisfy({ $0 < backlogLimit / 2 }) {
                    drained = String(format: "below half the limit %.1f s after PostgreSQL returned", (ContinuousClock.now - restarted).inSeconds)
                    break
                }
                try await Task.sleep(for: .milliseconds(250))
            }
            return (reached ?? "the backlog did not reach its limit in 30 s") + "; " + drained
        case .poisonTrigger:
            try await ChaosBench.sql(
                pool,
                """
                CREATE OR REPLACE FUNCTION chaos_poison() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF \(poisonCondition) THEN RAISE EXCEPTION 'chaos: user % is poison', COALESCE(NEW.user_id, OLD.user_id); END IF;
                    RETURN COALESCE(NEW, OLD);
                END $$
                """)
            for table in poisonedTables {
                try await ChaosBench.sql(
                    pool, "CREATE TRIGGER chaos_poison BEFORE INSERT OR DELETE ON \(table) FOR EACH ROW EXECUTE FUNCTION chaos_poison()")
            }
            try await Task.sleep(for: .seconds(8))
            try await dropPoison()
            return "refused the poison users' rows for \(since())"
        }
    }

    /// Removes the poison trigger if it is there.
    func dropPoison() async throws {
        for table in poisonedTables { try await ChaosBench.sql(pool, "DROP TRIGGER IF EXISTS chaos_poison ON \(table)") }
    }

    /// The tables of the poison users' rows.
    private var poisonedTables: [String] { reactions ? ["likes", "reactions"] : ["likes"] }

    /// The posts the node evicted since it started (`/admin/stats`), or `nil` when it does not
    /// answer.
    func evictedPosts() -> Int? {
        guard let (status, body) = try? OneShotHTTP.send(to: node.endpoint, method: "GET", path: "/admin/stats", token: nil, timeoutSeconds: 5),
            status == 200, let statistics = try? WireDecoder.decode(ServiceStatistics.self, from: Array(body.utf8))
        else { return nil }
        return statistics.shards.reduce(0) { $0 + $1.evictedPosts }
    }

    /// The changes waiting per shard (`/admin/stats`), or `nil` when the node does not answer.
    private func pendingPerShard() -> [Int]? {
        guard let (status, body) = try? OneShotHTTP.send(to: node.endpoint, method: "GET", path: "/admin/stats", token: nil, timeoutSeconds: 5),
            status == 200, let statistics = try? WireDecoder.decode(ServiceStatistics.self, from: Array(body.utf8))
        else { return nil }
        return statistics.shards.map(\.pendingChanges)
    }
}

/// A counter a process restarts from zero, summed over its restarts from samples: a sample below
/// the one before means a restart, so the one before is kept and counting starts over.
struct EvictionTally {
    private var before = 0
    private var last = 0

    /// At least this many, in all.
    var total: Int { before + last }

    mutating func observe(_ sample: Int?) {
        guard let sample else { return }
        if sample < last { before += last }
        last = sample
    }
}
