internal import CLinuxEvents
// <sys/socket.h>'s names (SOCK_STREAM, …) are seen through the module that includes it first in
// this target, libmicrohttpd's.
internal import CMicroHTTPD
import Foundation
import Synchronization

/// The peer client's thread: every connection to every peer in one epoll set. Its state is
/// touched by that thread only; other threads hand it jobs through `inbox` and a wake-up pipe.
final class PeerLoop: @unchecked Sendable {
    /// One request and who waits for its outcome.
    struct Job {
        let key: String
        let address: PeerAddress
        let bytes: [UInt8]
        let continuation: CheckedContinuation<PeerClient.Outcome, Never>
        var deadline = ContinuousClock.now
    }

    private struct Connection {
        let key: String
        let descriptor: Int32
        var connecting: Bool
        var watchingWrites: Bool
        var job: Job?
        var written = 0
        var input: [UInt8] = []
        var idleSince = ContinuousClock.now
    }

    private struct Peer {
        /// Connections with nothing in flight, most recently used last.
        var idle: [Int] = []
        var open = 0
        /// Requests waiting for a connection, oldest first.
        var waiting: [Job] = []
    }

    private let maximumConnectionsPerPeer: Int
    private let timeout: Duration
    private let idleLimit: Duration
    private let inbox = Mutex<(jobs: [Job], stopping: Bool)>(([], false))
    private let signaled = Atomic<Bool>(false)
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let epoll: Int32
    private static let wakeToken = UInt64.max

    // The loop thread's own state.
    private var peers: [String: Peer] = [:]
    private var connections: [Int: Connection] = [:]
    private var nextID = 0
    private var lastSweep = ContinuousClock.now

    init(maximumConnectionsPerPeer: Int, timeout: Duration, idleLimit: Duration) throws {
        self.maximumConnectionsPerPeer = max(1, maximumConnectionsPerPeer)
        self.timeout = timeout
        self.idleLimit = idleLimit
        (wakeRead, wakeWrite) = try WakeUpPipe.make()
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else {
            close(wakeRead)
            close(wakeWrite)
            throw HTTPServerError(message: "cannot make the peer client's epoll set")
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = Self.wakeToken
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, wakeRead, &event)
        let thread = Thread { self.run() }
        thread.name = "peer-client"
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Hands `job` to the loop (any thread).
    func submit(_ job: Job) {
        var job = job
        job.deadline = .now + timeout
        let accepted = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping else { return false }
            inbox.jobs.append(job)
            return true
        }
        guard accepted else { return job.continuation.resume(returning: .notSent("the node is shutting down")) }
        wake()
    }

    /// Ends the loop: waiting requests get `.notSent`, requests in flight `.broken`.
    func stop() {
        inbox.withLock { $0.stopping = true }
        wake()
    }

    private func wake() {
        guard !signaled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    // MARK: - The loop

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while true {
            let ready = epoll_wait(epoll, &events, Int32(events.count), 50)
            var woken = false
            if ready > 0 {
                for event in events[0..<Int(ready)] {
                    if event.data.u64 == Self.wakeToken {
                        woken = true
                        continue
                    }
                    handle(Int(event.data.u64), events: event.events)
                }
            }
            if woken {
                // In this order: empty the pipe, then clear the flag, then take the jobs. A
                // submitter that finds the flag set has appended its job before, and the one that
                // set it wrote a byte that is still in the pipe (cleared after the read) or its job
                // is taken below. Clearing first would let the read swallow the byte of a
                // submitter whose job comes after the take: that job would wait forever.
                var buffer = [UInt8](repeating: 0, count: 64)
                while read(wakeRead, &buffer, buffer.count) > 0 {}
                signaled.store(false, ordering: .sequentiallyConsistent)
                guard takeInbox() else { return }
            }
            if ContinuousClock.now - lastSweep >= .milliseconds(50) {
                sweep()
                // A safeguard: jobs are taken on the next sweep even without a wake-up byte.
                guard takeInbox() else { return }
            }
        }
    }

    /// Assigns the submitted jobs; `false` when the loop is to end (then ended).
    private func takeInbox() -> Bool {
        let (jobs, stopping) = inbox.withLock { inbox in
            defer { inbox.jobs.removeAll(keepingCapacity: true) }
            return (inbox.jobs, inbox.stopping)
        }
        if stopping {
            end(jobs)
            return false
        }
        for job in jobs { assign(job) }
        return true
    }

    private func end(_ submitted: [Job]) {
        for job in submitted { job.continuation.resume(returning: .notSent("the node is shutting down")) }
        for (key, peer) in peers {
            for job in peer.waiting { job.continuation.resume(returning: .notSent("the node is shutting down")) }
            peers[key]?.waiting = []
        }
        for id in Array(connections.keys) {
            if let job = connections[id]?.job {
                job.continuation.resume(
                    returning: (connections[id]?.written ?? 0) < job.bytes.count
                        ? .notSent("the node is shutting down") : .broken("the node shut down before the answer came"))
            }
            connections[id]?.job = nil
            closeConnection(id)
        }
    }

    // The descriptors are closed when the last reference goes (after the thread ended), not in
    // `end`: a `stop()` that raced the end may still write its wake-up byte.
    deinit {
        close(epoll)
        close(wakeRead)
        close(wakeWrite)
    }

    /// Gives `job` a connection: an idle one to its peer, a new one, or a place in the queue.
    private func assign(_ job: Job) {
        if peers[job.key] == nil { peers[job.key] = Peer() }
        while let id = peers[job.key]!.idle.popLast() {
            guard let connection = connections[id] else { continue }
            if Self.isOpen(connection.descriptor) { return start(id, job) }
            closeConnection(id)
        }
        if peers[job.key]!.open < maximumConnectionsPerPeer {
            openConnection(for: job)
        } else {
            peers[job.key]!.waiting.append(job)
        }
    }

    /// Whether an idle connection is still open: the peer has not closed it, nor sent anything.
    private static func isOpen(_ descriptor: Int32) -> Bool {
        var byte: UInt8 = 0
        let count = recv(descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    private func openConnection(for job: Job) {
        let descriptor = socket(job.address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            return job.continuation.resume(returning: .notSent("cannot make a socket: \(String(cString: strerror(errno)))"))
        }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let result = job.address.socketAddress.withUnsafeBytes { raw in
            connect(descriptor, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        if result != 0 && errno != EINPROGRESS {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            return job.continuation.resume(returning: .notSent("cannot connect to \(job.address.authority): \(reason)"))
        }
        let id = nextID
        nextID += 1
        let connecting = result != 0
        connections[id] = Connection(key: job.key, descriptor: descriptor, connecting: connecting, watchingWrites: true)
        peers[job.key, default: Peer()].open += 1
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue
        event.data.u64 = UInt64(id)
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, descriptor, &event)
        start(id, job)
    }

    private func start(_ id: Int, _ job: Job) {
        connections[id]!.job = job
        connections[id]!.written = 0
        connections[id]!.input.removeAll(keepingCapacity: true)
        if !connections[id]!.connecting { flush(id) }
    }

    private func flush(_ id: Int) {
        guard let connection = connections[id], let job = connection.job else { return }
        var written = connection.written
        while written < job.bytes.count {
            let count = job.bytes[written...].withUnsafeBytes { Glibc.send(connection.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count > 0 {
                written += count
                continue
            }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            // The peer cannot have a whole request: nothing ran.
            return finish(
                id, .notSent("the connection to \(job.address.authority) failed while sending: \(String(cString: strerror(errno)))"), reusable: false)
        }
        connections[id]!.written = written
        watchWrites(id, written < job.bytes.count)
    }

    private func watchWrites(_ id: Int, _ wanted: Bool) {
        guard let connection = connections[id], connection.watchingWrites != wanted else { return }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (wanted ? EPOLLOUT.rawValue : 0)
        event.data.u64 = UInt64(id)
        _ = epoll_ctl(epoll, EPOLL_CTL_MOD, connection.descriptor, &event)
        connections[id]!.watchingWrites = wanted
    }

    private func handle(_ id: Int, events: UInt32) {
        guard let connection = connections[id] else { return }
        let failed = events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0
        if connection.connecting {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(connection.descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 || failed {
                let reason = error != 0 ? String(cString: strerror(error)) : "connection failed"
                return finish(id, .notSent("cannot connect to \(connection.job?.address.authority ?? connection.key): \(reason)"), reusable: false)
            }
            guard events & EPOLLOUT.rawValue != 0 else { return }
            connections[id]!.connecting = false
            flush(id)
            guard connections[id] != nil else { return }
        } else if events & EPOLLOUT.rawValue != 0 {
            flush(id)
            guard connections[id] != nil else { return }
        }
        if events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { receive(id) }
    }

    private func receive(_ id: Int) {
        guard var connection = connections[id] else { return }
        var closed = false
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = recv(connection.descriptor, &buffer, buffer.count, 0)
            if count > 0 {
                connection.input.append(contentsOf: buffer[0..<count])
                continue
            }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            closed = true
            break
        }
        connections[id]!.input = connection.input
        guard let job = connection.job else {
            // An idle connection the peer closed, or that carries bytes nobody asked for.
            if closed || !connection.input.isEmpty { closeConnection(id) }
            return
        }
        switch PeerResponseParser.parse(connection.input) {
        case .complete(let status, let headers, let body, let used, let keepAlive):
            // Kept only when clean: the whole request went out and nothing follows the answer.
            let clean = keepAlive && !closed && connection.written >= job.bytes.count && used == connection.input.count
            finish(id, .answered(PeerClient.Answer(status: status, headers: headers, body: body)), reusable: clean)
        case .untilClose(let status, let headers, let bodyStart):
            if closed {
                finish(
                    id, .answered(PeerClient.Answer(status: status, headers: headers, body: Array(connection.input[bodyStart...]))), reusable: false)
            }
        case .malformed(let why):
            finish(id, .broken("\(job.address.authority) sent an answer that cannot be read: \(why)"), reusable: false)
        case .incomplete:
            if closed {
                let sentAll = connection.written >= job.bytes.count
                finish(
                    id,
                    sentAll
                        ? .broken("\(job.address.authority) closed the connection before answering")
                        : .notSent("\(job.address.authority) closed the connection before the request was sent"), reusable: false)
            }
        }
    }

    /// Gives the job its outcome; the connection is kept for the next request or closed.
    private func finish(_ id: Int, _ outcome: PeerClient.Outcome, reusable: Bool) {
        guard let connection = connections[id] else { return }
        connections[id]!.job = nil
        connection.job?.continuation.resume(returning: outcome)
        if reusable {
            if let next = nextWaiting(connection.key) { return start(id, next) }
            connections[id]!.idleSince = .now
            connections[id]!.input.removeAll(keepingCapacity: true)
            watchWrites(id, false)
            peers[connection.key, default: Peer()].idle.append(id)
        } else {
            closeConnection(id)
            serveWaiting(connection.key)
        }
    }

    /// Gives waiting requests the room closed connections left (each may fail at once and
    /// leave room for the next).
    private func serveWaiting(_ key: String) {
        while let peer = peers[key], peer.open < maximumConnectionsPerPeer, let next = nextWaiting(key) { assign(next) }
    }

    /// The oldest request waiting for a connection to `key` that still has time; the ones out
    /// of time get `.notSent` (never sent late: a timed-out toggle must not run afterwards).
    private func nextWaiting(_ key: String) -> Job? {
        let now = ContinuousClock.now
        while let job = peers[key]?.waiting.first {
            peers[key]!.waiting.removeFirst()
            if now <= job.deadline { return job }
            job.continuation.resume(returning: .notSent("no connection to \(job.address.authority) was free within \(timeout)"))
        }
        return nil
    }

    private func closeConnection(_ id: Int) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        close(connection.descriptor)
        peers[connection.key]?.open -= 1
        peers[connection.key]?.idle.removeAll { $0 == id }
    }

    /// Times requests out, and closes connections idle too long.
    private func sweep() {
        let now = ContinuousClock.now
        lastSweep = now
        for id in Array(connections.keys) {
            // Read afresh: finishing one request can hand an idle connection a waiting one.
            guard let connection = connections[id] else { continue }
            if let job = connection.job {
                guard now > job.deadline else { continue }
                let sentAll = connection.written >= job.bytes.count
                finish(
                    id,
                    sentAll
                        ? .broken("\(job.address.authority) did not answer within \(timeout)")
                        : .notSent("\(job.address.authority) did not take the request within \(timeout)"), reusable: false)
            } else if now - connection.idleSince > idleLimit {
                closeConnection(id)
            }
        }
        for key in Array(peers.keys) {
            let expired = peers[key]!.waiting.filter { now > $0.deadline }
            guard !expired.isEmpty else { continue }
            peers[key]!.waiting.removeAll { now > $0.deadline }
            for job in expired {
                job.continuation.resume(returning: .notSent("no connection to \(job.address.authority) was free within \(timeout)"))
            }
        }
    }
}
