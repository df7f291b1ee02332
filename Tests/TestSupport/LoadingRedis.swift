import Foundation

/// A `redis-server` of its own that is still loading its data: it is filled with `keys` keys,
/// saved, and started again reading them back slowly (`key-load-delay`), answering `LOADING`
/// meanwhile (`loading-process-events-interval-bytes` 1024, so it answers at all while it loads).
/// `init` returns once the server has logged that the load began.
public final class LoadingRedis: Sendable {
    public let port: Int
    /// The keys it loads.
    public let keys: Int
    private let server: ChildProcess
    private let folder: URL

    /// - Parameter microsecondsPerKey: how long loading each key takes, so the load lasts about
    ///   `keys × microsecondsPerKey`.
    public init(keys: Int = 3_000, microsecondsPerKey: Int = 2_000) async throws {
        self.keys = keys
        folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("counter-loading-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        port = try PrivateServers.freePort()
        let server = [
            "/usr/bin/redis-server", "--port", String(port), "--bind", "127.0.0.1", "--dir", folder.path, "--save", "", "--appendonly", "no",
        ]
        // First: fill and save. (Its log goes to standard output, which `ChildProcess` reads.)
        let filling = try ChildProcess(server)
        try await Self.waitForLog(filling, "Ready to accept connections")
        try await Self.cli(port, ["eval", "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'k' .. i, i) end return 1", "0", String(keys)])
        try await Self.cli(port, ["save"])
        filling.kill(SIGTERM)
        _ = try await filling.waitForExit()
        // Then: load it again, slowly. It listens before it loads, and logs the load's start.
        self.server = try ChildProcess(
            server + ["--key-load-delay", String(microsecondsPerKey), "--loading-process-events-interval-bytes", "1024"])
        try await Self.waitForLog(self.server, "Loading RDB produced by")
    }

    /// Ends the server and removes its folder.
    public func stop() {
        server.kill(SIGKILL)
        var status: Int32 = 0
        waitpid(server.pid, &status, 0)
        try? FileManager.default.removeItem(at: folder)
    }

    private static func waitForLog(_ process: ChildProcess, _ text: String) async throws {
        guard try await process.waitForOutput(timeout: .seconds(60), { $0.contains { $0.contains(text) } }) else {
            process.kill(SIGKILL)
            throw PrivateServersError(message: "redis-server did not log \"\(text)\": \(process.lastLines)")
        }
    }

    private static func cli(_ port: Int, _ arguments: [String]) async throws {
        let run = try ChildProcess(["/usr/bin/redis-cli", "-p", String(port)] + arguments, mergingStandardError: true)
        guard try await run.waitForExit() == 0, !(run.output.first ?? "").hasPrefix("ERR") else {
            throw PrivateServersError(message: "redis-cli \(arguments.first ?? ""): \(run.output)")
        }
    }
}
