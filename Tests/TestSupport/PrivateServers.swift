import ChildProcesses
import Foundation

/// A PostgreSQL and a Redis of a test's own, started with `scripts/services` in a temporary data
/// folder on free ports, so a test can stop and restart them without disturbing other tests.
public final class PrivateServers: Sendable {
    public let dataDirectory: URL
    public let postgresPort: Int
    public let redisPort: Int
    /// Redis's AOF policy: `everysec` (as deployed by default), or `always` for a test that
    /// kills Redis and expects every acknowledged write to survive.
    public let redisAppendfsync: String

    public var postgresURL: String { "postgresql://counter@127.0.0.1:\(postgresPort)/counter" }
    public var redisURL: String { "redis://127.0.0.1:\(redisPort)" }

    private init(redisAppendfsync: String) throws {
        self.redisAppendfsync = redisAppendfsync
        let folder = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("counter-private-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            at: folder, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755])
        dataDirectory = folder
        postgresPort = try Self.serverPort()
        redisPort = try Self.serverPort(besides: postgresPort)
    }

    /// Two private servers start at a time (an `initdb` each), however many tests ask at once.
    private static let startups = StartupGate(limit: 2)

    /// Starts both servers, runs `body` with them, and stops and removes them afterwards, also
    /// when `body` throws.
    ///
    /// A start that fails is tried again (twice at most) on other ports: a port chosen free can be
    /// taken by another process before the server binds it.
    public static func with<T>(redisAppendfsync: String = "everysec", _ body: (PrivateServers) async throws -> T) async throws -> T {
        let servers = try await startedServers(redisAppendfsync: redisAppendfsync)
        do {
            let value = try await body(servers)
            try await servers.tearDown()
            return value
        } catch {
            try? await servers.tearDown()
            throw error
        }
    }

    private static func startedServers(redisAppendfsync: String, attempts: Int = 3) async throws -> PrivateServers {
        var attempt = 1
        while true {
            let servers = try PrivateServers(redisAppendfsync: redisAppendfsync)
            do {
                try await startups.pass { try await servers.run("start") }
                return servers
            } catch {
                try? await servers.tearDown()
                guard attempt < attempts else { throw error }
                FileHandle.standardError.write(Data("private servers: \(error); trying other ports\n".utf8))
                attempt += 1
            }
        }
    }

    /// Runs `scripts/services <command>` against these servers and waits for it — on a thread
    /// of its own, so a cooperative thread is never blocked for the seconds it takes.
    public func run(_ command: String, only server: String? = nil) async throws {
        try await runServicesScript(
            [command] + (server.map { [$0] } ?? []),
            environment: [
                "COUNTER_DATA_DIR": dataDirectory.path, "COUNTER_PG_PORT": String(postgresPort), "COUNTER_REDIS_PORT": String(redisPort),
                "COUNTER_REDIS_APPENDFSYNC": redisAppendfsync,
            ])
    }

    /// Kills the Redis with SIGKILL (no shutdown, no last write to its files) and waits until it
    /// is gone; `run("start", only: "redis")` starts it again from its AOF.
    public func killRedis() async throws {
        let pidFile = dataDirectory.appendingPathComponent("redis/redis.pid")
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8), let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw PrivateServersError(message: "no Redis pid in \(pidFile.path)")
        }
        kill(pid, SIGKILL)
        let deadline = ContinuousClock.now + .seconds(10)
        while kill(pid, 0) == 0 {
            guard ContinuousClock.now < deadline else { throw PrivateServersError(message: "Redis (pid \(pid)) still there 10 s after SIGKILL") }
            try await Task.sleep(for: .milliseconds(10))
        }
        try? FileManager.default.removeItem(at: pidFile)
    }

    /// Stops both servers and removes their data.
    public func tearDown() async throws {
        try await run("stop")
        try? FileManager.default.removeItem(at: dataDirectory)
    }

    /// Whether `port` on 127.0.0.1 could be bound a moment ago.
    public static func isFree(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// A port for a server of a test's own that was free a moment ago, chosen at random in
    /// 10000–19999: below the kernel's ephemeral range (32768–60999), so neither an outgoing
    /// connection's local port nor another test's `freePort()` can take it in the meantime, and
    /// apart from the Redis Cluster blocks (20000–39999) and the project's own servers.
    public static func serverPort(besides taken: Int? = nil) throws -> Int {
        for _ in 0..<200 {
            let candidate = Int.random(in: 10_000...19_999)
            if candidate != taken && isFree(candidate) { return candidate }
        }
        throw PrivateServersError(message: "no free port in 10000–19999")
    }

    /// A port that was free a moment ago: bind port 0 and read what the kernel gave.
    public static func freePort() throws -> Int {
        let (descriptor, port) = try boundSocket(listening: false)
        close(descriptor)
        return port
    }

    /// A socket bound to a free loopback port (and listening, if asked): a port a test holds so
    /// that nothing else can listen there. The caller closes the descriptor.
    public static func boundSocket(listening: Bool) throws -> (descriptor: Int32, port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw PrivateServersError(message: "socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound, !listening || listen(descriptor, 1) == 0 else {
            close(descriptor)
            throw PrivateServersError(message: "bind() or listen() failed")
        }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }
}

/// Runs `scripts/services <arguments>` with `environment` added to the test's own, and waits for
/// it — on a thread of its own, so a cooperative thread is never blocked for the seconds it takes.
/// - Throws: when it exits non-zero.
func runServicesScript(_ arguments: [String], environment: [String: String]) async throws {
    let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/services").path
    let pairs = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }.map { "\($0.key)=\($0.value)" }
    let status = try await ProcessSpawn.run(["/bin/bash", script] + arguments, environment: pairs)
    guard status == 0 else {
        let settings = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        throw PrivateServersError(message: "\(settings) scripts/services \(arguments.joined(separator: " ")) exited with \(status)")
    }
}

public struct PrivateServersError: Error, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
