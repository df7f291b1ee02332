internal import CMicroHTTPD
import Foundation
import Synchronization

/// The thread that drives libmicrohttpd in external epoll mode: it waits until the library's
/// epoll descriptor is readable, a resumed connection needs it, or the library's next timeout
/// comes, then calls `MHD_run`.
///
/// Why not the library's own threads: its poll mode scans every connection on every wake-up
/// (at 1,000 connections and 10,000 requests/s that cost more CPU than the requests), and its
/// internal epoll mode (0.9.75) stalls when exactly 128 connections are ready: after a full
/// batch it calls `epoll_wait` again with the blocking timeout. `MHD_run` passes a zero timeout,
/// so that second call cannot block; the waiting happens here, in `poll` on two descriptors.
///
/// In external mode the library does not wake anyone when a connection is resumed, so
/// `connectionResumed()` does: it counts resumes and, when the loop is asleep, writes a byte
/// to a pipe the loop also waits on. The loop re-checks the count after announcing that it is
/// going to sleep, so no resume is left waiting for the next timeout.
final class EventLoopThread: Sendable {
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let running = Atomic<Bool>(true)
    private let sleeping = Atomic<Bool>(false)
    private let resumes = Atomic<Int>(0)
    /// Set with `requests.quiesce`, so the loop need not take the lock on every pass.
    private let quiesceRequested = Atomic<Bool>(false)
    private let requests = Mutex<Requests>(Requests())

    private struct Requests {
        var quiesce: CheckedContinuation<Int32, Never>?
        var stopped: CheckedContinuation<Void, Never>?
        var ended = false
    }

    /// Longest wait between two `MHD_run` calls when the library names no timeout, so `quiesce`
    /// and `stop` are seen promptly.
    private static let longestWaitMilliseconds: UInt64 = 50

    /// - Throws: `HTTPServerError` when the wake-up pipe cannot be made.
    init() throws {
        (wakeRead, wakeWrite) = try WakeUpPipe.make()
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    /// Starts the thread for `daemon`, which must have been started with `MHD_USE_EPOLL` and
    /// without an internal thread.
    func start(daemon: DaemonHandle, epollDescriptor: Int32) {
        let thread = Thread { [self] in run(daemon: daemon, epollDescriptor: epollDescriptor) }
        thread.name = "http-loop"
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Call after every `MHD_resume_connection`, from any thread.
    func connectionResumed() {
        resumes.add(1, ordering: .sequentiallyConsistent)
        if sleeping.exchange(false, ordering: .sequentiallyConsistent) { wake() }
    }

    /// Ends the loop's current wait.
    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Stops accepting new connections (on the loop thread, where the library wants it) and
    /// returns the listening socket, now the caller's to close, or -1.
    func quiesce() async -> Int32 {
        await withCheckedContinuation { continuation in
            let ended = requests.withLock { requests in
                if requests.ended { return true }
                requests.quiesce = continuation
                return false
            }
            if ended {
                continuation.resume(returning: -1)
            } else {
                quiesceRequested.store(true, ordering: .releasing)
                wake()
            }
        }
    }

    /// Ends the loop and returns once the thread no longer touches the daemon.
    func stop() async {
        running.store(false, ordering: .sequentiallyConsistent)
        wake()
        await withCheckedContinuation { continuation in
            let ended = requests.withLock { requests in
                if requests.ended { return true }
                requests.stopped = continuation
                return false
            }
            if ended { continuation.resume() }
        }
    }

    private func run(daemon: DaemonHandle, epollDescriptor: Int32) {
        var descriptors = [
            pollfd(fd: epollDescriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
        ]
        var drain = [UInt8](repeating: 0, count: 64)
        var resumesSeen = 0
        while running.load(ordering: .sequentiallyConsistent) {
            if quiesceRequested.load(ordering: .acquiring),
                let quiesce = requests.withLock({ requests in
                    defer { requests.quiesce = nil }
                    return requests.quiesce
                })
            {
                quiesceRequested.store(false, ordering: .relaxed)
                quiesce.resume(returning: MHD_quiesce_daemon(daemon.pointer))
            }
            var timeout: CUnsignedLongLong = 0
            let wait =
                MHD_get_timeout(daemon.pointer, &timeout) == .YES
                ? min(UInt64(timeout), Self.longestWaitMilliseconds) : Self.longestWaitMilliseconds
            if wait > 0 {
                sleeping.store(true, ordering: .sequentiallyConsistent)
                if resumes.load(ordering: .sequentiallyConsistent) == resumesSeen {
                    descriptors[0].revents = 0
                    descriptors[1].revents = 0
                    _ = poll(&descriptors, 2, Int32(wait))
                }
                sleeping.store(false, ordering: .sequentiallyConsistent)
                if descriptors[1].revents != 0 {
                    while read(wakeRead, &drain, drain.count) > 0 {}
                }
            }
            resumesSeen = resumes.load(ordering: .sequentiallyConsistent)
            _ = MHD_run(daemon.pointer)
        }
        let (stopped, quiesce) = requests.withLock { requests in
            requests.ended = true
            defer {
                requests.stopped = nil
                requests.quiesce = nil
            }
            return (requests.stopped, requests.quiesce)
        }
        quiesce?.resume(returning: -1)
        stopped?.resume()
    }
}
