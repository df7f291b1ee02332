internal import CLinuxEvents
import Foundation

/// One load-generator thread: non-blocking sockets in one epoll set, so a wake-up costs what is
/// ready, not what is open (a `poll` over 1,000 sockets per wake-up cost the bench a core in open
/// loop, taken from the server it measures).
final class EventLoop {
    private struct Connection {
        let index: Int
        var descriptor: Int32 = -1
        var connecting = false
        var sequence = 0
        var output: [UInt8] = []
        var written = 0
        var input: [UInt8] = []
        var inFlight = false
        var pair: CorrectnessCheck.Pair?
        /// When the request was due (open loop) or sent (closed loop).
        var startedAt = ContinuousClock.now
    }

    private let generator: LoadGenerator
    private var connections: [Connection]
    private let measureFrom: ContinuousClock.Instant
    private let end: ContinuousClock.Instant
    private let interval: Duration?
    private var nextDue: ContinuousClock.Instant
    private var backlog: [ContinuousClock.Instant] = []
    private var random = SystemRandomNumberGenerator()
    private let epoll: Int32
    /// Whether each slot's socket is watched for writability (connecting, or output pending).
    private var watchingWrites: [Bool]
    /// Slots that may be idle (connected, nothing in flight); checked again when taken.
    private var idle: [Int] = []
    private var lastTimeoutCheck = ContinuousClock.now
    /// Slots whose socket could not be made; tried again at the next timeout check.
    private var reopen: [Int] = []

    init(generator: LoadGenerator, connections: [Int], measureFrom: ContinuousClock.Instant, end: ContinuousClock.Instant, rateShare: Double?) {
        self.generator = generator
        self.connections = connections.map { Connection(index: $0) }
        self.measureFrom = measureFrom
        self.end = end
        self.interval = rateShare.map { .nanoseconds(Int64(1e9 / max($0, 0.001))) }
        self.nextDue = .now
        self.epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        self.watchingWrites = Array(repeating: false, count: connections.count)
    }

    func run() {
        guard epoll >= 0 else {
            generator.recordError("epoll_create1 failed", measured: true)
            return
        }
        for slot in connections.indices { open(slot) }
        var events = [epoll_event](repeating: epoll_event(), count: 512)
        while ContinuousClock.now < end {
            scheduleSends()
            if ContinuousClock.now - lastTimeoutCheck >= .milliseconds(10) { expireTimeouts() }
            // Open loop: wake for the next scheduled send; closed loop: answers wake us. A wait
            // shorter than epoll's millisecond is rounded up, not down to 0: that would spin a core
            // and steal it from the server being measured. A send is then at most 1 ms late, and
            // its latency still counts from its scheduled time, so nothing is hidden.
            var waitMilliseconds: Int32 = 50
            if interval != nil && backlog.isEmpty {
                let untilDue = nextDue - .now
                let nanoseconds = untilDue.components.seconds * 1_000_000_000 + untilDue.components.attoseconds / 1_000_000_000
                waitMilliseconds = Int32(max(0, min(50, (nanoseconds + 999_999) / 1_000_000)))
            }
            let ready = epoll_wait(epoll, &events, Int32(events.count), waitMilliseconds)
            guard ready > 0 else { continue }
            for event in events[0..<Int(ready)] {
                let slot = Int(event.data.u64)
                var flags: Int16 = 0
                if event.events & EPOLLIN.rawValue != 0 { flags |= Int16(POLLIN) }
                if event.events & EPOLLOUT.rawValue != 0 { flags |= Int16(POLLOUT) }
                if event.events & (EPOLLERR.rawValue | EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 { flags |= Int16(POLLHUP) }
                handle(slot, events: flags)
            }
        }
        for slot in connections.indices {
            if connections[slot].inFlight, let pair = connections[slot].pair { generator.recordExpectation(pair, .either) }
            if connections[slot].descriptor >= 0 { close(connections[slot].descriptor) }
        }
        close(epoll)
    }

    /// Registers `slot`'s new socket: readable always, writable while `connecting`.
    private func watch(_ slot: Int) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (connections[slot].connecting ? EPOLLOUT.rawValue : 0)
        event.data.u64 = UInt64(slot)
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, connections[slot].descriptor, &event)
        watchingWrites[slot] = connections[slot].connecting
    }

    /// Watches `slot` for writability, or stops, when that changes.
    private func watchWrites(_ slot: Int, _ wanted: Bool) {
        guard watchingWrites[slot] != wanted, connections[slot].descriptor >= 0 else { return }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (wanted ? EPOLLOUT.rawValue : 0)
        event.data.u64 = UInt64(slot)
        _ = epoll_ctl(epoll, EPOLL_CTL_MOD, connections[slot].descriptor, &event)
        watchingWrites[slot] = wanted
    }

    // MARK: - Sending

    private func scheduleSends() {
        let now = ContinuousClock.now
        if let interval {
            while nextDue <= now {
                backlog.append(nextDue)
                nextDue += interval
            }
            var taken = 0
            while taken < backlog.count, let slot = idle.popLast() {
                guard isIdle(slot) else { continue }
                send(slot, dueAt: backlog[taken])
                taken += 1
            }
            backlog.removeFirst(taken)
        } else {
            while let slot = idle.popLast() {
                if isIdle(slot) { send(slot, dueAt: now) }
            }
        }
    }

    private func isIdle(_ slot: Int) -> Bool {
        let connection = connections[slot]
        return connection.descriptor >= 0 && !connection.connecting && !connection.inFlight
    }

    private func send(_ slot: Int, dueAt: ContinuousClock.Instant) {
        let planned = generator.workload.request(connection: connections[slot].index, sequence: connections[slot].sequence, random: &random)
        connections[slot].sequence += 1
        connections[slot].output = planned.bytes
        connections[slot].written = 0
        connections[slot].inFlight = true
        connections[slot].pair = planned.pair
        connections[slot].startedAt = dueAt
        flush(slot)
    }

    private func flush(_ slot: Int) {
        while connections[slot].written < connections[slot].output.count {
            let descriptor = connections[slot].descriptor
            let written = connections[slot].output[connections[slot].written...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written > 0 { connections[slot].written += written; continue }
            if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                watchWrites(slot, true)
                return
            }
            fail(slot, "connection closed")
            return
        }
        watchWrites(slot, false)
    }

    // MARK: - Events

    private func handle(_ slot: Int, events: Int16) {
        if connections[slot].connecting {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(connections[slot].descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0, events & Int16(POLLOUT) != 0 else {
                if error != 0 || events & Int16(POLLERR | POLLHUP) != 0 { fail(slot, "connect failed") }
                return
            }
            connections[slot].connecting = false
            watchWrites(slot, false)
            idle.append(slot)
            return
        }
        if events & Int16(POLLOUT) != 0 { flush(slot) }
        if events & Int16(POLLIN | POLLHUP | POLLERR) != 0 { read(slot) }
    }

    private func read(_ slot: Int) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var closed = false
        while true {
            let count = recv(connections[slot].descriptor, &buffer, buffer.count, 0)
            if count > 0 {
                connections[slot].input.append(contentsOf: buffer[0..<count])
                continue
            }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            closed = true
            break
        }
        // Answers that arrived before a close count as answers (an error answer followed by the
        // server closing the connection, say).
        while let (status, body, used) = Self.parseResponse(connections[slot].input) {
            connections[slot].input.removeFirst(used)
            complete(slot, status: status, body: body)
        }
        if closed { fail(slot, "connection closed") }
    }

    private func complete(_ slot: Int, status: Int, body: ArraySlice<UInt8>) {
        guard connections[slot].inFlight else { return }
        let now = ContinuousClock.now
        let latency = now - connections[slot].startedAt
        let microseconds = UInt64(max(0, latency.components.seconds * 1_000_000 + latency.components.attoseconds / 1_000_000_000_000))
        generator.recordAnswer(status: status, latency: microseconds, measured: connections[slot].startedAt >= measureFrom)
        if let pair = connections[slot].pair {
            generator.recordExpectation(pair, Self.expectation(status: status, body: body))
        }
        connections[slot].inFlight = false
        connections[slot].pair = nil
        idle.append(slot)
    }

    private func expireTimeouts() {
        let now = ContinuousClock.now
        lastTimeoutCheck = now
        let retry = reopen
        reopen.removeAll()
        for slot in retry { open(slot) }
        for slot in connections.indices where connections[slot].inFlight && now - connections[slot].startedAt > generator.options.timeout {
            fail(slot, "timeout")
        }
    }

    /// The request in flight (if any) failed without an answer: either state is allowed for its
    /// pair. The connection is reopened.
    private func fail(_ slot: Int, _ kind: String) {
        if connections[slot].inFlight {
            generator.recordError(kind, measured: connections[slot].startedAt >= measureFrom)
            if let pair = connections[slot].pair { generator.recordExpectation(pair, .either) }
        } else if kind == "connect failed" {
            generator.recordError(kind, measured: ContinuousClock.now >= measureFrom)
        }
        connections[slot].inFlight = false
        connections[slot].pair = nil
        if connections[slot].descriptor >= 0 { close(connections[slot].descriptor) }
        open(slot)
    }

    private func open(_ slot: Int) {
        connections[slot].input.removeAll(keepingCapacity: true)
        connections[slot].output = []
        connections[slot].written = 0
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        connections[slot].descriptor = descriptor
        guard descriptor >= 0 else {
            // Out of descriptors, say: count it and try again at the next timeout check.
            generator.recordError("socket failed", measured: ContinuousClock.now >= measureFrom)
            connections[slot].connecting = false
            reopen.append(slot)
            return
        }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(generator.options.port).bigEndian)
        inet_pton(AF_INET, generator.options.host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        connections[slot].connecting = result != 0
        watch(slot)
        if !connections[slot].connecting { idle.append(slot) }
    }

    // MARK: - Parsing

    /// Status, body and length of one complete response at the start of `bytes`.
    static func parseResponse(_ bytes: [UInt8]) -> (Int, ArraySlice<UInt8>, Int)? {
        guard bytes.count >= 16 else { return nil }
        var headerEnd: Int?
        var index = 3
        while index < bytes.count {
            if bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 { headerEnd = index + 1; break }
            index += 1
        }
        guard let headerEnd else { return nil }
        // "HTTP/1.1 200 …"
        let status = Int(bytes[9] - 48) * 100 + Int(bytes[10] - 48) * 10 + Int(bytes[11] - 48)
        let head = String(decoding: bytes[0..<headerEnd], as: UTF8.self).lowercased()
        var length = 0
        if let range = head.range(of: "content-length:") {
            let digits = head[range.upperBound...].drop { $0 == " " }.prefix { $0.isNumber }
            length = Int(digits) ?? 0
        }
        guard bytes.count >= headerEnd + length else { return nil }
        return (status, bytes[headerEnd..<headerEnd + length], headerEnd + length)
    }

    /// What an answer says about its pair: the state in a 2xx body, otherwise unknown.
    static func expectation(status: Int, body: ArraySlice<UInt8>) -> CorrectnessCheck.Expectation {
        guard (200..<300).contains(status) else { return .either }
        let text = String(decoding: body, as: UTF8.self)
        if text.contains(#""is_liked":true"#) { return .liked(true) }
        if text.contains(#""is_liked":false"#) { return .liked(false) }
        return .either
    }
}
