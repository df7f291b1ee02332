import CounterCore
import Foundation
import PostgresDriver
import RedisDriver
import WritePath

// A child process for crash tests: `run` drives a write path with a stream of operations and
// prints every acknowledgement as it happens, until it is killed; `recover` starts a write path
// over the same keys (recovering what the logs hold), flushes everything, and exits.
//
//   CrashDriver run|recover <postgres-url> <redis-url> <key-prefix> <post,post,...> <workers> [<hot-idle-ms>]
//
// With a hot idle time, posts untouched that long are evicted from Redis as they go quiet
// (default: never, within a test's time). Change events are on. `recover` prints, after its flush, the count the
// write path answers for each post (`C <post> <count>`), whether Redis or PostgreSQL answers it.
//
// Lines printed by `run` (one write each, unbuffered):
//   S <worker> <user> <post> <operation>      about to send
//   A <worker> <user> <post> <1|0> <count>    acknowledged: the pair's state after it
//   E <worker> <user> <post> <error>          failed: either state is allowed
//   V <evicted>                               posts evicted so far (every 100 ms)
// Each worker owns its users and sends one operation at a time, so a pair has at most one
// operation in flight.
//
// With `COUNTER_CRASH_REACTIONS=one|many` in the environment, the deployment has the kinds like,
// love and haha, one or many per user; each operation names a random kind, and the lines are
//   S <worker> <user> <post> <operation> <kind>   about to send
//   R <worker> <user> <post> <kinds|-> <total>    acknowledged: the user's kinds after it (by name, commas)
// and `recover` prints each post's counts as `K <post> <kind>:<count>,…` (`-` for none).

func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count == 7 || arguments.count == 8, let workers = Int(arguments[6]) else {
    FileHandle.standardError.write(
        Data("usage: CrashDriver run|recover <postgres-url> <redis-url> <key-prefix> <posts> <workers> [<hot-idle-ms>]\n".utf8))
    exit(2)
}
let posts = arguments[5].split(separator: ",").compactMap { Int64($0) }
var configuration = WritePathConfiguration()
configuration.keyPrefix = arguments[4]
configuration.shardCount = 2
configuration.flushInterval = .milliseconds(50)
configuration.flushBatchSize = 300
configuration.flushMaxAge = .milliseconds(100)
configuration.hotIdle = arguments.count == 8 ? Int64(arguments[7]).map { .milliseconds($0) } : nil
// Every flush writes change events too: the tests hold them to the rows after the kills.
configuration.events = true
let kinds = ["like", "love", "haha"].map { ReactionKind($0)! }
let perUser = ProcessInfo.processInfo.environment["COUNTER_CRASH_REACTIONS"].flatMap { ReactionModel.PerUser(rawValue: $0) }
if let perUser { configuration.reactions = ReactionModel(kinds: .fixed(kinds), perUser: perUser) }
let pool = PostgresPool(configuration: PostgresConfiguration(url: arguments[2]))
let service = try CounterService(configuration: configuration, postgres: pool, redis: try RedisConfiguration(url: arguments[3]))

switch arguments[1] {
case "recover":
    try await ServiceGroup.withRunning([service]) {
        try await service.flush()
        emit("FLUSHED")
        for post in posts {
            let state = try await service.perform(.count, post: post, user: 0)
            emit("C \(post) \(state.likesCount)")
            if perUser != nil {
                let counts = state.reactionSummary.counts.map { "\($0.kind.name):\($0.count)" }.joined(separator: ",")
                emit("K \(post) \(counts.isEmpty ? "-" : counts)")
            }
        }
    }
    exit(0)
case "run":
    try await ServiceGroup.withRunning([service]) {
        await withTaskGroup(of: Void.self) { group in
            // How many posts were evicted so far, every 100 ms: `V <evicted>`.
            group.addTask {
                while true {
                    try? await Task.sleep(for: .milliseconds(100))
                    emit("V \(await service.stats().reduce(0) { $0 + $1.evictedPosts })")
                }
            }
            for worker in 0..<workers {
                group.addTask {
                    var generator = SystemRandomNumberGenerator()
                    let users = (1...4).map { Int64(worker * 100 + $0) }
                    while true {
                        let user = users.randomElement(using: &generator)!
                        let post = posts.randomElement(using: &generator)!
                        let operation = [LikeOperation.toggle, .toggle, .like, .unlike].randomElement(using: &generator)!
                        if perUser != nil {
                            let kind = kinds.randomElement(using: &generator)!
                            emit("S \(worker) \(user) \(post) \(operation.rawValue) \(kind.name)")
                            do {
                                let summary = try await service.perform(operation, post: post, user: user, kind: kind).reactionSummary
                                let mine = summary.mine.map(\.name).joined(separator: ",")
                                emit("R \(worker) \(user) \(post) \(mine.isEmpty ? "-" : mine) \(summary.total)")
                            } catch {
                                emit("E \(worker) \(user) \(post) \(error)")
                            }
                            continue
                        }
                        emit("S \(worker) \(user) \(post) \(operation.rawValue)")
                        do {
                            let state = try await service.perform(operation, post: post, user: user)
                            emit("A \(worker) \(user) \(post) \(state.isLiked ? 1 : 0) \(state.likesCount)")
                        } catch {
                            emit("E \(worker) \(user) \(post) \(error)")
                        }
                    }
                }
            }
        }
    }
default:
    exit(2)
}
