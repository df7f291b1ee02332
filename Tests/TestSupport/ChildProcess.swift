import Foundation
import Synchronization

/// A child process whose standard output is collected line by line on a thread of its own, so a
/// test can wait for what it prints, kill it, and wait for it to exit.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    private let lines = Mutex<[String]>([])
    private let finishedReading = Atomic<Bool>(false)

    /// Starts `arguments[0]` with a clean signal mask; its stderr is the test's.
    public init(_ arguments: [String]) throws {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw PrivateServersError(message: "pipe() failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        let argv = arguments.map { strdup($0) } + [nil]
        let environment = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + environment).forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, environment)
        close(pipeEnds[1])
        guard spawned == 0 else {
            close(pipeEnds[0])
            throw PrivateServersError(message: "cannot start \(arguments[0]): error \(spawned)")
        }
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
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Where the build put the executables (next to the test bundle).
    public static func builtProduct(_ name: String) -> String {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent(name).path
    }
}
