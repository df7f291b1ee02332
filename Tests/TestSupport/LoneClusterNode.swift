import ChildProcesses
import Foundation

/// One cluster-enabled Redis that serves only some slots (a cluster with holes), for tests of
/// what the node says when its seeds do not cover every slot.
public final class LoneClusterNode: Sendable {
    public let port: Int
    private let pid: pid_t
    private let folder: URL

    /// Starts `redis-server` in cluster mode on a free port and assigns it `slots`.
    public init(slots: ClosedRange<Int>) async throws {
        folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("counter-lone-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var chosen = 0
        for _ in 0..<100 {
            let candidate = Int.random(in: 20_000...29_000)
            if PrivateServers.isFree(candidate) && PrivateServers.isFree(candidate + 10_000) {
                chosen = candidate
                break
            }
        }
        guard chosen > 0 else { throw PrivateServersError(message: "no free port for a lone cluster node") }
        port = chosen
        pid = try ProcessSpawn.spawn(
            [
                "/usr/bin/redis-server", "--port", String(chosen), "--bind", "127.0.0.1", "--dir", folder.path,
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--save", "", "--appendonly", "no",
            ],
            environment: ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        ) { actions in
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        // Until it answers (not merely until its port is bound): on a loaded CI machine, starting
        // took more than the 5 s once allowed here.
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let ping = try ChildProcess(["/usr/bin/redis-cli", "-p", String(chosen), "ping"], mergingStandardError: true)
            if try await ping.waitForExit() == 0, ping.output.first == "PONG" { break }
            guard ContinuousClock.now < deadline else {
                stop()
                throw PrivateServersError(message: "the lone cluster node on port \(chosen) did not answer PING: \(ping.output)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        let add = try ChildProcess(
            [
                "/usr/bin/redis-cli", "-p", String(chosen), "cluster", "addslotsrange",
                String(slots.lowerBound), String(slots.upperBound),
            ], mergingStandardError: true)
        guard try await add.waitForExit() == 0, add.output.first == "OK" else {
            stop()
            throw PrivateServersError(message: "CLUSTER ADDSLOTSRANGE failed: \(add.output)")
        }
    }

    /// Ends the server and removes its folder.
    public func stop() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(at: folder)
    }
}
