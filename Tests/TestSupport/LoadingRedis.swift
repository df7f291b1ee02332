import ChildProcesses
import Foundation

/// A `redis-server` of its own that is still loading its data: it is filled with `keys` keys,
/// saved, and started again reading them back slowly (`key-load-delay`), answering `LOADING`
/// meanwhile (`loading-process-events-interval-bytes` 1024, so it answers at all while it loads).
/// `init` returns once a `PING` has been answered `LOADING`.
public final class LoadingRedis: Sendable {
    public let port: Int
    /// The keys it loads.
    public let keys: Int
    private let pid: pid_t
    private let folder: URL

    /// - Parameter microsecondsPerKey: how long loading each key takes, so the load lasts about
    ///   `keys × microsecondsPerKey`.
    public init(keys: Int = 3_000, microsecondsPerKey: Int = 2_000) async throws {
        self.keys = keys
        folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("counter-loading-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        port = try PrivateServers.freePort()
        let common = ["--port", String(port), "--bind", "127.0.0.1", "--dir", folder.path, "--save", "", "--appendonly", "no"]
        // First: fill and save.
        let filling = try Self.spawn(common)
        try await Self.waitForAnswer(port: port) { $0 == "PONG" }
        try await Self.cli(port, ["eval", "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'k' .. i, i) end return 1", "0", String(keys)])
        try await Self.cli(port, ["save"])
        kill(filling, SIGTERM)
        var status: Int32 = 0
        waitpid(filling, &status, 0)
        // Then: load it again, slowly.
        pid = try Self.spawn(
            common + ["--key-load-delay", String(microsecondsPerKey), "--loading-process-events-interval-bytes", "1024"])
        try await Self.waitForAnswer(port: port) { $0.hasPrefix("LOADING") }
    }

    /// Ends the server and removes its folder.
    public func stop() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(at: folder)
    }

    private static func spawn(_ arguments: [String]) throws -> pid_t {
        try ProcessSpawn.spawn(
            ["/usr/bin/redis-server"] + arguments,
            environment: ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        ) { actions in
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
    }

    private static func cli(_ port: Int, _ arguments: [String]) async throws {
        let run = try ChildProcess(["/usr/bin/redis-cli", "-p", String(port)] + arguments, mergingStandardError: true)
        guard try await run.waitForExit() == 0, !(run.output.first ?? "").hasPrefix("ERR") else {
            throw PrivateServersError(message: "redis-cli \(arguments.first ?? ""): \(run.output)")
        }
    }

    /// Asks `PING` until the answer satisfies `accepted` (60 s at most).
    private static func waitForAnswer(port: Int, _ accepted: (String) -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let ping = try ChildProcess(["/usr/bin/redis-cli", "-p", String(port), "ping"], mergingStandardError: true)
            _ = try await ping.waitForExit()
            if let answer = ping.output.first, accepted(answer) { return }
            guard ContinuousClock.now < deadline else {
                throw PrivateServersError(message: "the Redis on port \(port) did not answer as expected: \(ping.output)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
