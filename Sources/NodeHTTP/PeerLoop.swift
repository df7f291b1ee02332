internal import CLinuxEvents
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
        /// The request as a part of a batch (`PeerBatch`); `nil`: it always goes alone.
        var part: [UInt8]? = nil
        let continuation: CheckedContinuation<PeerClient.Outcome, Never>
        var deadline = ContinuousClock.now
    }

    /// What one connection carries at a time: one request, or a batch of several.
    struct Flight {
        var jobs: [Job]
        let bytes: [UInt8]
        /// Several requests in one (`PeerBatch`), answered by one batch answer.
        let batched: Bool
        /// Sent from the requests waiting to be batched: it counts as a batch in flight.
        let fromParts: Bool
        /// The earliest deadline of its requests.
        var deadline: ContinuousClock.Instant { jobs.map(\.deadline).min() ?? .now }
        var authority: String { jobs.first?.address.authority ?? "the peer" }

        init(single job: Job, fromParts: Bool = false) {
            jobs = [job]
            bytes = job.bytes
            batched = false
            self.fromParts = fromParts
        }

        init(batch jobs: [Job], bytes: [UInt8]) {
            self.jobs = jobs
            self.bytes = bytes
            batched = true
            fromParts = true
        }
    }

    private struct Connection {
        let key: String
        let descriptor: Int32
        var connecting: Bool
        var watchingWrites: Bool
        var flight: Flight?
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
        /// Requests waiting to go in the next batch, oldest first (`batching`).
        var parts: [Job] = []
        /// The peer answered a batch as a route it does not have (a node of an older version):
        /// its requests go one by one.
        var refusesBatches = false
    }

    /// How requests to one peer travel together (`PeerClient.Batching`).
    private let batching: PeerClient.Batching?

    private let maximumConnectionsPerPeer: Int
    private let timeout: Duration
    private let idleLimit: Duration
    private let inbox = Mutex<(jobs: [Job], stopping: Bool)>(([], false))
    /// Requests waiting to go in a batch, over all peers, as of the loop's last turn.
    let partsWaiting = Atomic<Int>(0)
    /// Callers waiting for `partsWaiting` to reach a count (`PeerClient.waitUntilRequestsWaitingToBatch`).
    private let partsWatchers = Mutex<[(count: Int, continuation: CheckedContinuation<Void, Never>)]>([])
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
    /// What `recv` reads into, reused: a fresh 16 KiB array per read (zeroed) was a tenth of the
    /// loop's time on a spread load.
    private var receiveBuffer = [UInt8](repeating: 0, count: 16_384)

    init(maximumConnectionsPerPeer: Int, timeout: Duration, idleLimit: Duration, batching: PeerClient.Batching? = nil) throws {
        self.batching = batching
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
        var batched: Set<String> = []
        for job in jobs {
            if job.part != nil, batching != nil, peers[job.key]?.refusesBatches != true {
                peers[job.key, default: Peer()].parts.append(job)
                batched.insert(job.key)
            } else {
                assign(job)
            }
        }
        // After the whole turn's jobs are in: what arrived together goes together.
        for key in batched { sendParts(key) }
        countParts()
        return true
    }

    private func end(_ submitted: [Job]) {
        for job in submitted { job.continuation.resume(returning: .notSent("the node is shutting down")) }
        for (key, peer) in peers {
            for job in peer.waiting + peer.parts { job.continuation.resume(returning: .notSent("the node is shutting down")) }
            peers[key]?.waiting = []
            peers[key]?.parts = []
        }
        for id in Array(connections.keys) {
            if let flight = connections[id]?.flight {
                let sentAll = (connections[id]?.written ?? 0) >= flight.bytes.count
                for job in flight.jobs {
                    job.continuation.resume(
                        returning: sentAll ? .broken("the node shut down before the answer came") : .notSent("the node is shutting down"))
                }
            }
            connections[id]?.flight = nil
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
        if let id = idleConnection(job.key) { return start(id, Flight(single: job)) }
        if peers[job.key]!.open < maximumConnectionsPerPeer {
            openConnection(for: Flight(single: job), key: job.key, address: job.address)
        } else {
            peers[job.key]!.waiting.append(job)
        }
    }

    /// An idle connection to `key` that is still open, taken out of the idle list.
    private func idleConnection(_ key: String) -> Int? {
        while let id = peers[key]?.idle.popLast() {
            guard let connection = connections[id] else { continue }
            if Self.isOpen(connection.descriptor) { return id }
            closeConnection(id)
        }
        return nil
    }

    /// Sends the requests waiting to be batched for `key`, as many batches as may be in flight:
    /// up to `PeerBatch.maximumCount` requests and `Batching.maximumBytes` each, oldest first; a
    /// batch of one goes as a plain request. What does not fit waits for a batch to come back —
    /// which is what makes requests that arrive while others are in flight travel together.
    private func sendParts(_ key: String) {
        guard let batching else { return }
        let now = ContinuousClock.now
        for job in peers[key]?.parts ?? [] where now > job.deadline {
            job.continuation.resume(returning: .notSent("no connection to \(job.address.authority) was free within \(timeout)"))
        }
        peers[key]?.parts.removeAll { now > $0.deadline }
        while let peer = peers[key], let first = peer.parts.first, batchesInFlight(key) < batching.maximumInFlight {
            // A connection first: without one, the parts wait for one to finish.
            let idle = idleConnection(key)
            guard idle != nil || peer.open < maximumConnectionsPerPeer else { return }
            var count = 1
            var size = first.part?.count ?? first.bytes.count
            while count < min(peer.parts.count, PeerBatch.maximumCount) {
                let next = peer.parts[count].part?.count ?? peer.parts[count].bytes.count
                if size + next > batching.maximumBytes { break }
                size += next
                count += 1
            }
            let taken = Array(peer.parts[..<count])
            peers[key]!.parts.removeFirst(count)
            let flight: Flight
            if count == 1 {
                flight = Flight(single: first, fromParts: true)
            } else {
                let request = PeerClient.Request(
                    method: "POST", target: batching.target,
                    headers: batching.headers + [("Content-Type", PeerBatch.contentType)],
                    body: PeerBatch.body(ofParts: taken.map { $0.part ?? [] }))
                flight = Flight(batch: taken, bytes: PeerClient.encode(request, authority: first.address.authority))
            }
            if let idle {
                start(idle, flight)
            } else {
                openConnection(for: flight, key: key, address: first.address)
            }
        }
    }

    /// Flights from the requests waiting to be batched that are under way to `key`.
    private func batchesInFlight(_ key: String) -> Int {
        connections.values.reduce(0) { $0 + ($1.key == key && $1.flight?.fromParts == true ? 1 : 0) }
    }

    /// Whether an idle connection is still open: the peer has not closed it, nor sent anything.
    private static func isOpen(_ descriptor: Int32) -> Bool {
        var byte: UInt8 = 0
        let count = recv(descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    private func openConnection(for flight: Flight, key: String, address: PeerAddress) {
        let descriptor = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            return refuse(flight, .notSent("cannot make a socket: \(String(cString: strerror(errno)))"))
        }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let result = address.socketAddress.withUnsafeBytes { raw in
            connect(descriptor, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        if result != 0 && errno != EINPROGRESS {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            return refuse(flight, .notSent("cannot connect to \(address.authority): \(reason)"))
        }
        let id = nextID
        nextID += 1
        let connecting = result != 0
        connections[id] = Connection(key: key, descriptor: descriptor, connecting: connecting, watchingWrites: true)
        peers[key, default: Peer()].open += 1
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue
        event.data.u64 = UInt64(id)
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, descriptor, &event)
        start(id, flight)
    }

    /// Gives every request of `flight`, which got no connection, `outcome`.
    private func refuse(_ flight: Flight, _ outcome: PeerClient.Outcome) {
        for job in flight.jobs { job.continuation.resume(returning: outcome) }
    }

    private func start(_ id: Int, _ flight: Flight) {
        connections[id]!.flight = flight
        connections[id]!.written = 0
        connections[id]!.input.removeAll(keepingCapacity: true)
        if !connections[id]!.connecting { flush(id) }
    }

    private func flush(_ id: Int) {
        guard let connection = connections[id], let flight = connection.flight else { return }
        var written = connection.written
        while written < flight.bytes.count {
            let count = flight.bytes[written...].withUnsafeBytes { Glibc.send(connection.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count > 0 {
                written += count
                continue
            }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            // The peer cannot have a whole request: nothing ran.
            return finish(
                id, .notSent("the connection to \(flight.authority) failed while sending: \(String(cString: strerror(errno)))"), reusable: false)
        }
        connections[id]!.written = written
        watchWrites(id, written < flight.bytes.count)
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
                return finish(id, .notSent("cannot connect to \(connection.flight?.authority ?? connection.key): \(reason)"), reusable: false)
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
        guard let descriptor = connections[id]?.descriptor else { return }
        var closed = false
        while true {
            let count = receiveBuffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                receiveBuffer.withUnsafeBufferPointer { connections[id]!.input.append(contentsOf: $0[0..<count]) }
                continue
            }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            closed = true
            break
        }
        let connection = connections[id]!
        guard let flight = connection.flight else {
            // An idle connection the peer closed, or that carries bytes nobody asked for.
            if closed || !connection.input.isEmpty { closeConnection(id) }
            return
        }
        switch PeerResponseParser.parse(connection.input) {
        case .complete(let status, let headers, let body, let used, let keepAlive):
            // Kept only when clean: the whole request went out and nothing follows the answer.
            let clean = keepAlive && !closed && connection.written >= flight.bytes.count && used == connection.input.count
            let answer = PeerClient.Answer(status: status, headers: headers, body: body)
            if flight.batched { return finishBatch(id, answer, reusable: clean) }
            finish(id, .answered(answer), reusable: clean)
        case .untilClose(let status, let headers, let bodyStart):
            if closed {
                let answer = PeerClient.Answer(status: status, headers: headers, body: Array(connection.input[bodyStart...]))
                if flight.batched { return finishBatch(id, answer, reusable: false) }
                finish(id, .answered(answer), reusable: false)
            }
        case .malformed(let why):
            finish(id, .broken("\(flight.authority) sent an answer that cannot be read: \(why)"), reusable: false)
        case .incomplete:
            if closed {
                let sentAll = connection.written >= flight.bytes.count
                finish(
                    id,
                    sentAll
                        ? .broken("\(flight.authority) closed the connection before answering")
                        : .notSent("\(flight.authority) closed the connection before the request was sent"), reusable: false)
            }
        }
    }

    /// Hands a batch's answer out: one answer per request, in order. A peer without the batch
    /// route (`404`, `405`, `415`: a node of an older version) ran none of them: they are sent
    /// again one by one, and so is everything for that peer from now on. Any other answer that is
    /// not a batch's (the peer shutting down, say) is every request's answer.
    private func finishBatch(_ id: Int, _ answer: PeerClient.Answer, reusable: Bool) {
        guard let flight = connections[id]?.flight else { return }
        let isBatch = answer.status == 200 && answer.headers["content-type"] == PeerBatch.contentType
        if !isBatch && [404, 405, 415].contains(answer.status) {
            let key = connections[id]!.key
            peers[key, default: Peer()].refusesBatches = true
            connections[id]!.flight = nil
            release(id, key: key, reusable: reusable)
            for var job in flight.jobs {
                job.part = nil
                assign(job)
            }
            return
        }
        guard isBatch else { return finish(id, .answered(answer), reusable: reusable) }
        switch PeerBatch.answers(from: answer.body, expected: flight.jobs.count) {
        case .success(let answers):
            let outcomes = answers.map { part in
                var headers: [String: String] = [:]
                for (name, value) in part.headers { headers[name.lowercased()] = value }
                return PeerClient.Outcome.answered(PeerClient.Answer(status: part.status, headers: headers, body: part.body))
            }
            finish(id, outcomes, reusable: reusable)
        case .failure(let malformed):
            finish(id, .broken("\(flight.authority) sent a batch answer that cannot be read: \(malformed.reason)"), reusable: false)
        }
    }

    /// Gives every request of the connection's flight `outcome`; the connection is kept for the
    /// next request or closed.
    private func finish(_ id: Int, _ outcome: PeerClient.Outcome, reusable: Bool) {
        guard let count = connections[id]?.flight?.jobs.count else { return }
        finish(id, Array(repeating: outcome, count: count), reusable: reusable)
    }

    /// Gives the flight's requests their outcomes, in order; the connection is kept for the next
    /// request or closed.
    private func finish(_ id: Int, _ outcomes: [PeerClient.Outcome], reusable: Bool) {
        guard let connection = connections[id], let flight = connection.flight else { return }
        connections[id]!.flight = nil
        for (job, outcome) in zip(flight.jobs, outcomes) { job.continuation.resume(returning: outcome) }
        release(id, key: connection.key, reusable: reusable)
    }

    /// A connection whose flight ended: it takes the next waiting request, or the next batch, or
    /// goes idle — or it is closed and its room given to what waits.
    private func release(_ id: Int, key: String, reusable: Bool) {
        if reusable {
            if let next = nextWaiting(key) {
                start(id, Flight(single: next))
                sendParts(key)
                return countParts()
            }
            connections[id]!.idleSince = .now
            connections[id]!.input.removeAll(keepingCapacity: true)
            watchWrites(id, false)
            peers[key, default: Peer()].idle.append(id)
        } else {
            closeConnection(id)
            serveWaiting(key)
        }
        sendParts(key)
        countParts()
    }

    private func countParts() {
        guard batching != nil else { return }
        let count = peers.values.reduce(0) { $0 + $1.parts.count }
        guard partsWaiting.exchange(count, ordering: .relaxed) != count else { return }
        let reached = partsWatchers.withLock { watchers in
            defer { watchers.removeAll { count >= $0.count } }
            return watchers.filter { count >= $0.count }
        }
        for watcher in reached { watcher.continuation.resume() }
    }

    /// Returns once at least `count` requests wait to go in a batch.
    func waitUntilPartsWaiting(atLeast count: Int) async {
        await withCheckedContinuation { continuation in
            let reached = partsWatchers.withLock { watchers in
                // Under the lock: a count stored before it is seen here, one stored after it
                // finds this watcher.
                if partsWaiting.load(ordering: .relaxed) >= count { return true }
                watchers.append((count, continuation))
                return false
            }
            if reached { continuation.resume() }
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
            if let flight = connection.flight {
                guard now > flight.deadline else { continue }
                let sentAll = connection.written >= flight.bytes.count
                finish(
                    id,
                    sentAll
                        ? .broken("\(flight.authority) did not answer within \(timeout)")
                        : .notSent("\(flight.authority) did not take the request within \(timeout)"), reusable: false)
            } else if now - connection.idleSince > idleLimit {
                closeConnection(id)
            }
        }
        for key in Array(peers.keys) {
            let expired = (peers[key]!.waiting + peers[key]!.parts).filter { now > $0.deadline }
            guard !expired.isEmpty else { continue }
            peers[key]!.waiting.removeAll { now > $0.deadline }
            peers[key]!.parts.removeAll { now > $0.deadline }
            for job in expired {
                job.continuation.resume(returning: .notSent("no connection to \(job.address.authority) was free within \(timeout)"))
            }
        }
        countParts()
    }
}
