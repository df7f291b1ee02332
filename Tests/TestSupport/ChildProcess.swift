import ChildProcesses
import Foundation
import Synchronization

/// A child process whose standard output is collected line by line on a thread of its own, so a
/// test can wait for what it prints, kill it, and wait for it to exit.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    private let lines = Mutex<[String]>([])
    private let finishedReading = Atomic<Bool>(false)

    /// Starts `arguments[0]` with a clean signal mask and the test's environment with `adding`
    /// set; its stderr is the test's, or collected with its standard output when
    /// `mergingStandardError`.
    public init(_ arguments: [String], mergingStandardError: Bool = false, adding: [String: String] = [:]) throws {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw PrivateServersError(message: "pipe() failed") }
        let environment = ProcessInfo.processInfo.environment.merging(adding) { $1 }.map { "\($0.key)=\($0.value)" }
        let pid: pid_t
        do {
            pid = try ProcessSpawn.spawn(arguments, environment: environment) { actions in
                posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
                if mergingStandardError { posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 2) }
                posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
            }
        } catch {
            close(pipeEnds[0])
            close(pipeEnds[1])
            throw error
        }
        close(pipeEnds[1])
        self.pid = pid
        let readEnd = pipeEnds[0]
        let thread = Thread { [self] in self.collect(from: readEnd) }
        thread.start()
    }

    private func collect(from descriptor: Int32) {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            pending.append(contentsOf: buffer[0..<count])
            var complete: [String] = []
            while let newline = pending.firstIndex(of: 10) {
                complete.append(String(decoding: pending[..<newline], as: UTF8.self))
                pending.removeSubrange(...newline)
            }
            if !complete.isEmpty { lines.withLock { $0.append(contentsOf: complete) } }
        }
        if !pending.isEmpty {
            let last = String(decoding: pending, as: UTF8.self)
            lines.withLock { $0.append(last) }
        }
        close(descriptor)
        finishedReading.store(true, ordering: .releasing)
    }

    /// Every line printed so far.
    public var output: [String] { lines.withLock { $0 } }

    /// Waits until `predicate` holds for the output, or `timeout` passes.
    /// - Returns: whether it held.
    public func waitForOutput(timeout: Duration, _ predicate: ([String]) -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if lines.withLock({ predicate($0) }) { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return lines.withLock { predicate($0) }
    }

    /// Waits until a `counter-node serve` child prints "counter-node listening on …", and returns
    /// whether it did; it stops waiting early when the node says it cannot start. The bound is
    /// generous: on a loaded 2-core CI machine running every suite at once, a debug-built node
    /// took over 30 s to adopt its 16,384 slots and listen (it takes about 1 s alone).
    public func waitUntilListening(timeout: Duration = .seconds(120)) async throws -> Bool {
        let listening: (String) -> Bool = { $0.hasPrefix("counter-node listening on") }
        _ = try await waitForOutput(timeout: timeout) { lines in
            lines.contains { listening($0) || $0.contains("cannot start") }
        }
        return output.contains(where: listening)
    }

    /// The last lines printed, for a failed expectation's message.
    public var lastLines: String { output.suffix(10).joined(separator: " | ") }

    public func kill(_ signal: Int32) {
        _ = Glibc.kill(pid, signal)
    }

    /// Waits for the process to exit and its output to be read; returns its exit status
    /// (128 + signal when a signal ended it).
    public func waitForExit(timeout: Duration = .seconds(60)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid { break }
            guard ContinuousClock.now < deadline else {
                kill(SIGKILL)
                throw PrivateServersError(message: "process \(pid) did not exit in time")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        while !finishedReading.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(10)) }
        return ProcessSpawn.exitStatus(status)
    }

    /// Where the build put the executables (next to the test bundle).
    public static func builtProduct(_ name: String) -> String {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent(name).path
    }
}
