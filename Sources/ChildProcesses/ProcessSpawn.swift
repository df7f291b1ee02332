import Foundation

/// Child processes with a clean signal mask and default signal handling, for the bench's chaos
/// run and the tests. A process that blocks signals on its threads (a Swift test runner, say)
/// passes that mask on to its children: a Redis started with SIGTERM blocked would never stop.
public enum ProcessSpawn {
    /// A process could not be started.
    public struct Failure: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// Starts `arguments[0]` (a path) with `environment` (`NAME=value`); `fileActions` may
    /// redirect its descriptors.
    public static func spawn(
        _ arguments: [String], environment: [String],
        fileActions: (inout posix_spawn_file_actions_t) -> Void = { _ in }
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        fileActions(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard spawned == 0 else { throw Failure(message: "cannot start \(arguments[0]): \(String(cString: strerror(spawned)))") }
        return pid
    }

    /// This process's environment as `spawn` takes it, with `overrides`.
    public static func environment(_ overrides: [String: String] = [:]) -> [String] {
        ProcessInfo.processInfo.environment.merging(overrides) { _, new in new }.map { "\($0.key)=\($0.value)" }
    }

    /// Runs `arguments[0]` with its standard output sent to /dev/null, on a thread of its own
    /// (never blocking the cooperative pool), and returns its exit status.
    public static func run(_ arguments: [String], environment: [String]) async throws -> Int32 {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(
                    with: Result {
                        let pid = try spawn(arguments, environment: environment) { actions in
                            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
                        }
                        var status: Int32 = 0
                        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                        return exitStatus(status)
                    })
            }.start()
        }
    }

    /// WIFEXITED / WEXITSTATUS by hand (Swift does not import the macros): the exit status, or
    /// 128 + the signal that ended the process.
    public static func exitStatus(_ status: Int32) -> Int32 {
        (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}
