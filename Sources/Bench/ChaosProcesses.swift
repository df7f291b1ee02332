import BenchKit
import ChildProcesses
import Foundation
import Synchronization

/// The node of a chaos run as a child process: started, killed, paused and started again with
/// the same command line; its output goes to a log file, its pid to `node.pid` beside it (for
/// `scripts/chaos` to end it should the bench itself die).
final class ChaosNode: Sendable {
    let binary: String
    let arguments: [String]
    let endpoint: Endpoint
    let logFile: URL
    private let current = Mutex<pid_t?>(nil)

    init(binary: String, arguments: [String], endpoint: Endpoint, logFile: URL) {
        self.binary = binary
        self.arguments = arguments
        self.endpoint = endpoint
        self.logFile = logFile
    }

    /// Starts the node and returns once `/healthz` answers (or throws after `timeout`).
    func start(timeout: Duration = .seconds(60)) async throws {
        let log = logFile.path
        let pid = try ProcessSpawn.spawn([binary, "serve"] + arguments, environment: ProcessSpawn.environment()) { actions in
            posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        current.withLock { $0 = pid }
        try? String(pid).write(to: logFile.deletingLastPathComponent().appendingPathComponent("node.pid"), atomically: true, encoding: .utf8)
        try await waitUntilAnswering(timeout: timeout)
    }

    /// Starts the node and returns once `/readyz` answers 200: it serves every slot.
    func startReady(timeout: Duration = .seconds(60)) async throws {
        try await start(timeout: timeout)
        try await waitUntilAnswering("/readyz", timeout: timeout)
    }

    /// Whether the node process has exited (and, if so, reaps it); its status when it has.
    private func exited() -> Int32? {
        guard let pid = current.withLock({ $0 }) else { return nil }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        current.withLock { $0 = nil }
        return ProcessSpawn.exitStatus(status)
    }

    /// Waits until `path` (`/healthz`: the process answers; `/readyz`: it serves every slot,
    /// with Redis and PostgreSQL reachable) answers 200.
    func waitUntilAnswering(_ path: String = "/healthz", timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if current.withLock({ $0 }) == nil {
                throw BenchCheckFailure(message: "the node is not running; see \(logFile.path)")
            }
            if let status = exited() {
                throw BenchCheckFailure(message: "the node exited (status \(status)) before it answered; see \(logFile.path)")
            }
            if let (status, _) = try? OneShotHTTP.send(to: endpoint, method: "GET", path: path, token: nil, timeoutSeconds: 2), status == 200 {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BenchCheckFailure(message: "the node did not answer \(path) with 200 within \(timeout); see \(logFile.path)")
    }

    /// Sends `signal` to the node.
    func signal(_ signal: Int32) {
        if let pid = current.withLock({ $0 }) { kill(pid, signal) }
    }

    /// SIGKILL, and waits until the process is gone.
    func killNow() async {
        signal(SIGKILL)
        while current.withLock({ $0 }) != nil, exited() == nil { try? await Task.sleep(for: .milliseconds(10)) }
    }

    /// SIGTERM, and waits (up to `timeout`) for the exit status; `nil` if it did not exit.
    func stop(timeout: Duration = .seconds(60)) async -> Int32? {
        signal(SIGTERM)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = exited() { return status }
            if current.withLock({ $0 }) == nil { return nil }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }
}

/// PostgreSQL and Redis of a chaos run: `scripts/services` on a data folder of the run's own
/// (its settings come from the environment: `COUNTER_DATA_DIR`, `COUNTER_PG_PORT`,
/// `COUNTER_REDIS_PORT`, `COUNTER_REDIS_APPENDFSYNC`).
struct ChaosServices {
    let script: String
    let dataDirectory: String

    /// Runs `scripts/services <command> [server]` and waits for it.
    func run(_ command: String, _ server: String? = nil) async throws {
        let status = try await ProcessSpawn.run(
            ["/bin/bash", script, command] + (server.map { [$0] } ?? []), environment: ProcessSpawn.environment())
        guard status == 0 else {
            throw BenchCheckFailure(message: "scripts/services \(command) \(server ?? "") exited with status \(status)")
        }
    }

    /// SIGKILL to Redis (by its pid file): what it had not yet written to its AOF is lost.
    func killRedis() throws {
        let pidFile = URL(fileURLWithPath: dataDirectory).appendingPathComponent("redis/redis.pid")
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw BenchCheckFailure(message: "no Redis pid in \(pidFile.path)")
        }
        kill(pid, SIGKILL)
        // Gone, or a zombie nobody reaped yet (its port is free either way): at most 3 s.
        for _ in 0..<300 {
            let state = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))?.split(separator: " ").dropFirst(2).first
            if state == nil || state == "Z" { break }
            usleep(10_000)
        }
    }
}
