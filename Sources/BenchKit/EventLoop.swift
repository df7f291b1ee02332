internal import CLinuxEvents
import Foundation

/// One load-generator thread: non-blocking sockets in one epoll set, so a wake-up costs what is
/// ready, not what is open (a `poll` over 1,000 sockets per wake-up cost the bench a core in open
/// loop, taken from the server it measures).
final class EventLoop {
    /// One socket of a connection, to one endpoint.
    private struct Socket {
        var descriptor: Int32 = -1
        var connecting = false
        /// Whether it is watched for writability (connecting, or output pending).
        var watchingWrites = false
    }

    /// A client connection: one request in flight at most, over a socket per endpoint it has
    /// sent to (one socket when there is one endpoint).
    private struct Connection {
        let index: Int
        var sockets: [Socket]
        /// The endpoint of the request in flight.
        var endpoint = 0
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
    private let endpoints: [Endpoint]
    private let measureFrom: ContinuousClock.Instant
    private let end: ContinuousClock.Instant
    private var schedule: SendSchedule
    private var random = SystemRandomNumberGenerator()
    private let epoll: Int32
    /// Connections that may be idle (nothing in flight); checked again when taken.
    private var idle: [Int] = []
    private var lastTimeoutCheck = ContinuousClock.now
    /// Connections whose socket could not be made or connected: idle again at the next timeout
    /// check (10 ms), so a server that is down is not hammered in a tight loop.
    private var retry: [Int] = []
    /// The run is over: answers still arriving settle their pairs but are not counted.
    private var draining = false

    init(generator: LoadGenerator, connections: [Int], measureFrom: ContinuousClock.Instant, end: ContinuousClock.Instant, rateShare: Double?) {
        self.generator = generator
        self.endpoints = generator.options.endpoints
        self.connections = connections.map { Connection(index: $0, sockets: Array(repeating: Socket(), count: generator.options.endpoints.count)) }
        self.measureFrom = measureFrom
        self.end = end
        self.schedule = SendSchedule(rateShare: rateShare)
        self.epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
    }

    func run() {
        guard epoll >= 0, !endpoints.isEmpty else {
            generator.recordError(endpoints.isEmpty ? "no endpoint" : "epoll_create1 failed", measured: true)
            return
        }
        // Sockets open when a connection first sends to an endpoint; with one endpoint, open
        // them all now, as connections of a client pool would be.
        if endpoints.count == 1 {
            for slot in connections.indices where !open(slot, endpoint: 0) { retry.append(slot) }
        }
        idle = Array(connections.indices.reversed())
        var events = [epoll_event](repeating: epoll_event(), count: 512)
        while ContinuousClock.now < end {
            scheduleSends()
            if ContinuousClock.now - lastTimeoutCheck >= .milliseconds(10) { expireTimeouts() }
            waitAndHandle(&events, milliseconds: schedule.waitMilliseconds(now: .now))
        }
        drain()
        for slot in connections.indices {
            if connections[slot].inFlight, let pair = connections[slot].pair { generator.recordExpectation(pair, .either, status: nil) }
            for socket in connections[slot].sockets where socket.descriptor >= 0 { close(socket.descriptor) }
        }
        close(epoll)
    }

    /// After the run: no more sends; the requests still in flight get until their timeout to be
    /// answered. Their answers count for their pairs' final states (a pair toggled from several
    /// connections is then known rather than undetermined, and no write lands after the check
    /// has read PostgreSQL), not for the run's figures.
    private func drain() {
        draining = true
        var events = [epoll_event](repeating: epoll_event(), count: 512)
        while connections.contains(where: \.inFlight) {
            if ContinuousClock.now - lastTimeoutCheck >= .milliseconds(10) { expireTimeouts() }
            waitAndHandle(&events, milliseconds: 10)
        }
    }

    /// Waits up to `milliseconds` for socket events and handles those that came.
    private func waitAndHandle(_ events: inout [epoll_event], milliseconds: Int32) {
        let ready = epoll_wait(epoll, &events, Int32(events.count), milliseconds)
        guard ready > 0 else { return }
        for event in events[0..<Int(ready)] {
            let token = Int(event.data.u64)
            var flags: Int16 = 0
            if event.events & EPOLLIN.rawValue != 0 { flags |= Int16(POLLIN) }
            if event.events & EPOLLOUT.rawValue != 0 { flags |= Int16(POLLOUT) }
            if event.events & (EPOLLERR.rawValue | EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 { flags |= Int16(POLLHUP) }
            handle(token / endpoints.count, endpoint: token % endpoints.count, events: flags)
        }
    }

    /// Watches `slot`'s socket to `endpoint` for writability, or stops, when that changes.
    private func watchWrites(_ slot: Int, endpoint: Int, _ wanted: Bool) {
        let socket = connections[slot].sockets[endpoint]
        guard socket.watchingWrites != wanted, socket.descriptor >= 0 else { return }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (wanted ? EPOLLOUT.rawValue : 0)
        event.data.u64 = UInt64(slot * endpoints.count + endpoint)
        _ = epoll_ctl(epoll, EPOLL_CTL_MOD, socket.descriptor, &event)
        connections[slot].sockets[endpoint].watchingWrites = wanted
    }

    // MARK: - Sending

    private func scheduleSends() {
        schedule.sendDue(
            now: .now, timeout: generator.options.timeout,
            idleClient: {
                while let slot = idle.popLast() { if !connections[slot].inFlight { return slot } }
                return nil
            },
            send: { send($0, dueAt: $1) },
            dropped: { generator.recordError("not sent within the timeout", measured: $0 >= measureFrom) })
    }

    private func send(_ slot: Int, dueAt: ContinuousClock.Instant) {
        let planned = generator.workload.request(connection: connections[slot].index, sequence: connections[slot].sequence, random: &random)
        let endpoint = planned.endpoint < endpoints.count ? planned.endpoint : 0
        connections[slot].sequence += 1
        connections[slot].endpoint = endpoint
        connections[slot].output = planned.bytes
        connections[slot].written = 0
        connections[slot].input.removeAll(keepingCapacity: true)
        connections[slot].inFlight = true
        connections[slot].pair = planned.pair
        connections[slot].startedAt = dueAt
        if connections[slot].sockets[endpoint].descriptor < 0 {
            guard open(slot, endpoint: endpoint) else { return fail(slot, "socket failed") }
        }
        // A socket still connecting sends once it is writable.
        if !connections[slot].sockets[endpoint].connecting { flush(slot) }
    }

    private func flush(_ slot: Int) {
        let endpoint = connections[slot].endpoint
        let descriptor = connections[slot].sockets[endpoint].descriptor
        while connections[slot].written < connections[slot].output.count {
            let written = connections[slot].output[connections[slot].written...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                connections[slot].written += written
                continue
            }
            if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                watchWrites(slot, endpoint: endpoint, true)
                return
            }
            fail(slot, "connection closed")
            return
        }
        watchWrites(slot, endpoint: endpoint, false)
    }

    // MARK: - Events

    private func handle(_ slot: Int, endpoint: Int, events: Int16) {
        guard connections[slot].sockets[endpoint].descriptor >= 0 else { return }
        guard connections[slot].inFlight && connections[slot].endpoint == endpoint else {
            // A socket kept open for later requests: a close (or stray bytes) is taken now; it is
            // opened again when a request goes there.
            var discarded: [UInt8] = []
            if events & Int16(POLLIN | POLLHUP | POLLERR) != 0, !connections[slot].sockets[endpoint].connecting,
                Self.drain(connections[slot].sockets[endpoint].descriptor, into: &discarded)
            {
                closeSocket(slot, endpoint: endpoint)
            }
            return
        }
        if connections[slot].sockets[endpoint].connecting {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(connections[slot].sockets[endpoint].descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0, events & Int16(POLLOUT) != 0 else {
                if error != 0 || events & Int16(POLLERR | POLLHUP) != 0 {
                    fail(slot, "connect failed" + (error != 0 ? " (\(String(cString: strerror(error))))" : ""))
                }
                return
            }
            connections[slot].sockets[endpoint].connecting = false
            flush(slot)
            return
        }
        if events & Int16(POLLOUT) != 0 { flush(slot) }
        if connections[slot].inFlight, events & Int16(POLLIN | POLLHUP | POLLERR) != 0 { read(slot) }
    }

    /// Reads what `descriptor` has into `input` (or discards it); returns whether the peer
    /// closed.
    private static func drain(_ descriptor: Int32, into input: inout [UInt8]) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count > 0 {
                input.append(contentsOf: buffer[0..<count])
                continue
            }
            return !(count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        }
    }

    private func read(_ slot: Int) {
        let descriptor = connections[slot].sockets[connections[slot].endpoint].descriptor
        let closed = Self.drain(descriptor, into: &connections[slot].input)
        // An answer that arrived before a close counts as an answer (an error answer followed by
        // the server closing the connection, say).
        switch generator.options.wire {
        case .http, .http2:
            if let (status, body, used) = Self.parseResponse(connections[slot].input) {
                connections[slot].input.removeFirst(used)
                complete(slot, status: status, body: body)
            }
        case .resp:
            if let (used, isError) = RESPFraming.reply(connections[slot].input) {
                connections[slot].input.removeFirst(used)
                complete(slot, status: isError ? 500 : 200, body: [])
            }
        }
        if closed {
            if connections[slot].inFlight {
                fail(slot, "connection closed")
            } else {
                closeSocket(slot, endpoint: connections[slot].endpoint)
            }
        }
    }

    private func complete(_ slot: Int, status: Int, body: ArraySlice<UInt8>) {
        guard connections[slot].inFlight else { return }
        let microseconds = SendSchedule.microseconds(from: connections[slot].startedAt, to: .now)
        generator.recordAnswer(status: status, latency: microseconds, measured: !draining && connections[slot].startedAt >= measureFrom)
        if let pair = connections[slot].pair {
            generator.recordExpectation(pair, Self.expectation(status: status, body: body), status: status)
        }
        connections[slot].inFlight = false
        connections[slot].pair = nil
        idle.append(slot)
    }

    private func expireTimeouts() {
        let now = ContinuousClock.now
        lastTimeoutCheck = now
        idle += retry
        retry.removeAll()
        for slot in connections.indices where connections[slot].inFlight && now - connections[slot].startedAt > generator.options.timeout {
            fail(slot, "timeout")
        }
    }

    /// The request in flight failed without an answer: either state is allowed for its pair. Its
    /// socket is closed (opened again by the next request there).
    private func fail(_ slot: Int, _ kind: String) {
        guard connections[slot].inFlight else { return }
        generator.recordError(kind, measured: !draining && connections[slot].startedAt >= measureFrom)
        if let pair = connections[slot].pair { generator.recordExpectation(pair, .either, status: nil) }
        connections[slot].inFlight = false
        connections[slot].pair = nil
        closeSocket(slot, endpoint: connections[slot].endpoint)
        if kind.hasPrefix("connect failed") || kind == "socket failed" {
            retry.append(slot)
        } else {
            idle.append(slot)
        }
    }

    private func closeSocket(_ slot: Int, endpoint: Int) {
        let descriptor = connections[slot].sockets[endpoint].descriptor
        if descriptor >= 0 { LoadSocket.abandon(descriptor) }
        connections[slot].sockets[endpoint] = Socket()
        if endpoint == connections[slot].endpoint { connections[slot].input.removeAll(keepingCapacity: true) }
    }

    /// Opens `slot`'s socket to `endpoint` (connecting in the background) and watches it;
    /// `false` when no socket could be made (out of descriptors, say).
    private func open(_ slot: Int, endpoint: Int) -> Bool {
        guard let (descriptor, connecting) = LoadSocket.connect(to: endpoints[endpoint]) else { return false }
        connections[slot].sockets[endpoint] = Socket(descriptor: descriptor, connecting: connecting, watchingWrites: connecting)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (connecting ? EPOLLOUT.rawValue : 0)
        event.data.u64 = UInt64(slot * endpoints.count + endpoint)
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, descriptor, &event)
        return true
    }

    // MARK: - Parsing

    /// Status, body and length of one complete response at the start of `bytes`. Byte-level:
    /// the bench shares the machine with the node it measures, so its own cost per answer counts.
    static func parseResponse(_ bytes: [UInt8]) -> (Int, ArraySlice<UInt8>, Int)? {
        guard bytes.count >= 16 else { return nil }
        var headerEnd: Int?
        var index = 3
        while index < bytes.count {
            if bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 {
                headerEnd = index + 1
                break
            }
            index += 1
        }
        guard let headerEnd else { return nil }
        // "HTTP/1.1 200 …"
        let status = Int(bytes[9] &- 48) * 100 + Int(bytes[10] &- 48) * 10 + Int(bytes[11] &- 48)
        if let length = contentLength(bytes[0..<headerEnd]) {
            guard bytes.count >= headerEnd + length else { return nil }
            return (status, bytes[headerEnd..<headerEnd + length], headerEnd + length)
        }
        if isChunked(bytes[0..<headerEnd]) {
            guard let (body, used) = dechunk(bytes[headerEnd...]) else { return nil }
            return (status, body, used)
        }
        return (status, bytes[headerEnd..<headerEnd], headerEnd)
    }

    /// A chunked body at the start of `bytes` (hex size, CRLF, data, CRLF … `0` CRLF, trailers,
    /// CRLF), as nginx sends PHP's answers: its data and the index just past it, or `nil` until
    /// it is complete. One chunk's data is returned in place.
    static func dechunk(_ bytes: ArraySlice<UInt8>) -> (ArraySlice<UInt8>, Int)? {
        var index = bytes.startIndex
        var chunks: [ArraySlice<UInt8>] = []
        while true {
            var size = 0
            var digits = 0
            while index < bytes.endIndex, let digit = hexValue(bytes[index]) {
                size = size * 16 + digit
                digits += 1
                index += 1
                if digits > 12 { return nil }
            }
            // Chunk extensions (`;name=value`) up to the line's end are ignored.
            while index < bytes.endIndex && bytes[index] != 10 { index += 1 }
            guard index < bytes.endIndex, digits > 0 else { return nil }
            index += 1
            if size == 0 {
                // Trailers, if any, then the empty line.
                while true {
                    var lineEnd = index
                    while lineEnd < bytes.endIndex && bytes[lineEnd] != 10 { lineEnd += 1 }
                    guard lineEnd < bytes.endIndex else { return nil }
                    let empty = lineEnd == index || (lineEnd == index + 1 && bytes[index] == 13)
                    index = lineEnd + 1
                    if empty { break }
                }
                let body = chunks.count == 1 ? chunks[0] : ArraySlice(chunks.flatMap { $0 })
                return (body, index)
            }
            guard bytes.endIndex - index >= size + 2 else { return nil }
            chunks.append(bytes[index..<index + size])
            index += size + 2
        }
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 48...57: return Int(byte - 48)
        case 97...102: return Int(byte - 87)
        case 65...70: return Int(byte - 55)
        default: return nil
        }
    }

    private static let transferEncodingChunked = Array("transfer-encoding: chunked".utf8)

    /// Whether `head` has `Transfer-Encoding: chunked` (any case, one space after the colon).
    static func isChunked(_ head: ArraySlice<UInt8>) -> Bool {
        let name = transferEncodingChunked
        var index = head.startIndex
        while index + name.count <= head.endIndex {
            if index == head.startIndex || head[index - 1] == 10 {
                var matches = true
                for offset in 0..<name.count where head[index + offset] | 0x20 != name[offset] | 0x20 {
                    matches = false
                    break
                }
                if matches { return true }
            }
            index += 1
        }
        return false
    }

    private static let contentLengthName = Array("content-length:".utf8)

    /// The value of the `Content-Length` header (any case) in `head`, if any.
    static func contentLength(_ head: ArraySlice<UInt8>) -> Int? {
        let name = contentLengthName
        var index = head.startIndex
        while index + name.count <= head.endIndex {
            // At the start of a line.
            if index == head.startIndex || head[index - 1] == 10 {
                var matches = true
                for offset in 0..<name.count where head[index + offset] | 0x20 != name[offset] | 0x20 {
                    matches = false
                    break
                }
                if matches {
                    var position = index + name.count
                    while position < head.endIndex && head[position] == 32 { position += 1 }
                    var value = 0
                    var digits = 0
                    while position < head.endIndex && head[position] >= 48 && head[position] <= 57 {
                        value = value * 10 + Int(head[position] - 48)
                        digits += 1
                        position += 1
                    }
                    return digits > 0 ? value : nil
                }
            }
            index += 1
        }
        return nil
    }

    private static let likedTrue = Array(#""is_liked":true"#.utf8)
    private static let likedFalse = Array(#""is_liked":false"#.utf8)

    private static let mine = Array(#""mine":["#.utf8)

    /// What an answer says about its pair: the state in a 2xx body (a like's, or the kinds a
    /// reaction's lists as `mine`), otherwise unknown.
    static func expectation(status: Int, body: ArraySlice<UInt8>) -> CorrectnessCheck.Expectation {
        guard (200..<300).contains(status) else { return .either }
        if let kinds = kinds(in: body) { return .holds(kinds) }
        if contains(body, likedTrue) { return .liked(true) }
        if contains(body, likedFalse) { return .liked(false) }
        return .either
    }

    /// The names of a reaction answer's `"mine":[…]`, sorted; `nil` when the body has none.
    /// Read with as little work as it takes (the bench shares the machine with the node it
    /// measures): `mine` is looked for from the end, where the answer puts it, and each name is
    /// made from the body's bytes directly (a kind's name fits a small string, which needs no
    /// allocation), so a user's one kind costs one array.
    static func kinds(in body: ArraySlice<UInt8>) -> [String]? {
        guard let start = lastIndex(of: mine, in: body) else { return nil }
        var kinds: [String] = []
        var index = start + mine.count
        var nameStart: Int?
        while index < body.endIndex {
            let byte = body[index]
            if byte == UInt8(ascii: "\"") {
                if let first = nameStart {
                    kinds.append(String(decoding: body[first..<index], as: UTF8.self))
                    nameStart = nil
                } else {
                    nameStart = index + 1
                }
            } else if nameStart == nil && byte == UInt8(ascii: "]") {
                if kinds.count > 1 { kinds.sort() }
                return kinds
            }
            index += 1
        }
        return nil
    }

    private static func lastIndex(of needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = haystack.endIndex - needle.count
        while index >= haystack.startIndex {
            var offset = 0
            while offset < needle.count && haystack[index + offset] == needle[offset] { offset += 1 }
            if offset == needle.count { return index }
            index -= 1
        }
        return nil
    }

    private static func firstIndex(of needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard haystack.count >= needle.count, let first = needle.first else { return nil }
        var index = haystack.startIndex
        let last = haystack.endIndex - needle.count
        while index <= last {
            if haystack[index] == first {
                var offset = 1
                while offset < needle.count && haystack[index + offset] == needle[offset] { offset += 1 }
                if offset == needle.count { return index }
            }
            index += 1
        }
        return nil
    }

    private static func contains(_ haystack: ArraySlice<UInt8>, _ needle: [UInt8]) -> Bool {
        firstIndex(of: needle, in: haystack) != nil
    }
}
