internal import CLinuxEvents
internal import CNGHTTP2
import Foundation

/// One load-generator thread speaking HTTP/2 (cleartext, prior knowledge): its clients share
/// TCP connections, `streamsPerConnection` clients to a connection, each client one stream at a
/// time — so the correctness check's rule holds as over HTTP/1.1 (a pair is written by one client,
/// one request in flight at most). Framing, HPACK and flow control are libnghttp2's; this loop
/// owns the sockets (one epoll set) and what each answer means, as `EventLoop` does for HTTP/1.1.
final class HTTP2EventLoop {
    /// A client: one request in flight at most, on its group's connection to the request's
    /// endpoint.
    private struct Client {
        /// The workload's connection index.
        let index: Int
        /// Which of this loop's connection groups it sends on.
        let group: Int
        var sequence = 0
        var inFlight = false
        var pair: CorrectnessCheck.Pair?
        /// When the request was due (open loop) or sent (closed loop).
        var startedAt = ContinuousClock.now
        var endpoint = 0
        var streamID: Int32 = 0
        var status = 0
        var body: [UInt8] = []
        /// The request's body, read by nghttp2 through `readBody`.
        var requestBody: ArraySlice<UInt8> = []
    }

    /// One TCP connection: a group's to one endpoint.
    private struct Connection {
        var descriptor: Int32 = -1
        var connecting = false
        var watchingWrites = false
        var session: OpaquePointer?
        var output: [UInt8] = []
        var written = 0
        /// When bytes last arrived (or the connection was opened): a connection silent for the
        /// whole timeout while requests wait on it is given up, as HTTP/1.1 gives up its socket.
        var lastInput = ContinuousClock.now
    }

    private let generator: LoadGenerator
    private let endpoints: [Endpoint]
    private var clients: [Client]
    /// By `group * endpoints.count + endpoint`, which is also the socket's epoll token.
    private var connections: [Connection]
    private let measureFrom: ContinuousClock.Instant
    private let end: ContinuousClock.Instant
    private var schedule: SendSchedule
    private var random = SystemRandomNumberGenerator()
    private let epoll: Int32
    /// Clients that may be idle (nothing in flight); checked again when taken.
    private var idle: [Int] = []
    /// Clients whose connection could not be made: idle again at the next timeout check.
    private var retry: [Int] = []
    /// Connections with requests submitted since the last flush.
    private var submitted: [Int] = []
    private var lastTimeoutCheck = ContinuousClock.now
    private var draining = false
    private var receiveBuffer = [UInt8](repeating: 0, count: 65_536)
    private let callbacks: OpaquePointer?

    /// `groups`: the connection groups this thread drives, each a list of the workload's
    /// connection indexes (its clients).
    init(
        generator: LoadGenerator, groups: [[Int]], measureFrom: ContinuousClock.Instant, end: ContinuousClock.Instant, rateShare: Double?
    ) {
        self.generator = generator
        self.endpoints = generator.options.endpoints
        self.clients = groups.enumerated().flatMap { group, indexes in indexes.map { Client(index: $0, group: group) } }
        self.connections = Array(repeating: Connection(), count: groups.count * max(1, generator.options.endpoints.count))
        self.measureFrom = measureFrom
        self.end = end
        self.schedule = SendSchedule(rateShare: rateShare)
        self.epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        self.callbacks = callbacks
    }

    deinit {
        nghttp2_session_callbacks_del(callbacks)
    }

    func run() {
        guard epoll >= 0, !endpoints.isEmpty, callbacks != nil else {
            generator.recordError(endpoints.isEmpty ? "no endpoint" : "epoll_create1 or nghttp2 failed", measured: true)
            if epoll >= 0 { close(epoll) }
            return
        }
        if endpoints.count == 1 {
            for token in connections.indices where !open(token) {
                retry += clients.indices.filter { clients[$0].group == token }
            }
        }
        let retrying = Set(retry)
        idle = clients.indices.reversed().filter { !retrying.contains($0) }
        var events = [epoll_event](repeating: epoll_event(), count: 512)
        while ContinuousClock.now < end {
            scheduleSends()
            if ContinuousClock.now - lastTimeoutCheck >= .milliseconds(10) { expireTimeouts() }
            waitAndHandle(&events, milliseconds: schedule.waitMilliseconds(now: .now))
        }
        // As over HTTP/1.1: what is in flight may still be answered, for its pair's sake.
        draining = true
        while clients.contains(where: \.inFlight) {
            if ContinuousClock.now - lastTimeoutCheck >= .milliseconds(10) { expireTimeouts() }
            waitAndHandle(&events, milliseconds: 10)
        }
        for token in connections.indices { closeConnection(token) }
        close(epoll)
    }

    private func waitAndHandle(_ events: inout [epoll_event], milliseconds: Int32) {
        let ready = epoll_wait(epoll, &events, Int32(events.count), milliseconds)
        guard ready > 0 else { return }
        for event in events[0..<Int(ready)] {
            handle(Int(event.data.u64), events: event.events)
        }
    }

    // MARK: - Sending

    private func scheduleSends() {
        schedule.sendDue(
            now: .now, timeout: generator.options.timeout,
            idleClient: {
                while let slot = idle.popLast() { if !clients[slot].inFlight { return slot } }
                return nil
            },
            send: { send($0, dueAt: $1) },
            dropped: { generator.recordError("not sent within the timeout", measured: $0 >= measureFrom) })
        // Every request submitted this turn goes out in as few writes as nghttp2 packs them.
        for token in submitted where connections[token].session != nil && !connections[token].connecting { flush(token) }
        submitted.removeAll(keepingCapacity: true)
    }

    private func send(_ slot: Int, dueAt: ContinuousClock.Instant) {
        let planned = generator.workload.request(connection: clients[slot].index, sequence: clients[slot].sequence, random: &random)
        let endpoint = planned.endpoint < endpoints.count ? planned.endpoint : 0
        clients[slot].sequence += 1
        clients[slot].endpoint = endpoint
        clients[slot].inFlight = true
        clients[slot].pair = planned.pair
        clients[slot].startedAt = dueAt
        clients[slot].status = 0
        clients[slot].streamID = 0
        clients[slot].body.removeAll(keepingCapacity: true)
        let token = clients[slot].group * endpoints.count + endpoint
        if let session = connections[token].session, nghttp2_session_check_request_allowed(session) == 0 {
            // The node said GOAWAY: no new stream here. Once the streams it still answers are
            // done the connection is replaced; until then the client waits (10 ms).
            if !clients.contains(where: { $0.inFlight && $0.streamID > 0 && $0.group * endpoints.count + $0.endpoint == token }) {
                closeConnection(token)
            } else {
                return fail(slot, "connection going away", retrying: true)
            }
        }
        if connections[token].session == nil {
            guard open(token) else { return fail(slot, "socket failed", retrying: true) }
        }
        // Failures on the spot wait for the next timeout check before the client sends again:
        // taken back at once, a closed loop would spin on them.
        guard let fields = HTTP2RequestFields(http1: planned.bytes) else { return fail(slot, "request not HTTP/1", retrying: true) }
        clients[slot].requestBody = fields.body.isEmpty ? [] : fields.bytes[fields.body]
        let streamID = fields.bytes.withUnsafeBufferPointer { bytes -> Int32 in
            let base = UnsafeMutablePointer(mutating: bytes.baseAddress!)
            let headers = fields.fields.map { field in
                nghttp2_nv(
                    name: base + field.name.lowerBound, value: base + field.value.lowerBound,
                    namelen: field.name.count, valuelen: field.value.count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            }
            let user = UnsafeMutableRawPointer(bitPattern: slot + 1)
            if fields.body.isEmpty {
                return nghttp2_submit_request(connections[token].session, nil, headers, headers.count, nil, user)
            }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBody)
            return nghttp2_submit_request(connections[token].session, nil, headers, headers.count, &provider, user)
        }
        guard streamID > 0 else {
            // The session can take no more streams (out of stream ids, say): a new connection.
            fail(slot, "stream refused by the client library", retrying: true)
            return failConnection(token, "connection closed")
        }
        clients[slot].streamID = streamID
        submitted.append(token)
    }

    /// Hands nghttp2 what it has to send and writes it; the rest waits for writability.
    private func flush(_ token: Int) {
        guard let session = connections[token].session else { return }
        if connections[token].written == connections[token].output.count {
            connections[token].output.removeAll(keepingCapacity: true)
            connections[token].written = 0
        }
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            if count < 0 { return failConnection(token, "HTTP/2 session error") }
            guard count > 0, let data else { break }
            connections[token].output.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
        }
        let descriptor = connections[token].descriptor
        while connections[token].written < connections[token].output.count {
            let written = connections[token].output[connections[token].written...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                connections[token].written += written
                continue
            }
            if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return watchWrites(token, true) }
            return failConnection(token, "connection closed")
        }
        watchWrites(token, false)
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            failConnection(token, "connection closed")
        }
    }

    private func watchWrites(_ token: Int, _ wanted: Bool) {
        guard connections[token].watchingWrites != wanted, connections[token].descriptor >= 0 else { return }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (wanted ? EPOLLOUT.rawValue : 0)
        event.data.u64 = UInt64(token)
        _ = epoll_ctl(epoll, EPOLL_CTL_MOD, connections[token].descriptor, &event)
        connections[token].watchingWrites = wanted
    }

    // MARK: - Events

    private func handle(_ token: Int, events: UInt32) {
        guard connections[token].descriptor >= 0 else { return }
        if connections[token].connecting {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(connections[token].descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0, events & EPOLLOUT.rawValue != 0 else {
                if error != 0 || events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
                    failConnection(token, "connect failed" + (error != 0 ? " (\(String(cString: strerror(error))))" : ""))
                }
                return
            }
            connections[token].connecting = false
            return flush(token)
        }
        if events & EPOLLOUT.rawValue != 0 { flush(token) }
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue) != 0 { read(token) }
    }

    private func read(_ token: Int) {
        while let session = connections[token].session {
            let count = recv(connections[token].descriptor, &receiveBuffer, receiveBuffer.count, 0)
            if count > 0 {
                connections[token].lastInput = .now
                // The callbacks complete streams as their ends arrive.
                let used = receiveBuffer.withUnsafeBufferPointer { nghttp2_session_mem_recv(session, $0.baseAddress, count) }
                if used < 0 { return failConnection(token, "HTTP/2 session error") }
                continue
            }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            return failConnection(token, "connection closed")
        }
        // Acknowledgements (SETTINGS, PING, window updates) nghttp2 queued while reading.
        flush(token)
    }

    // MARK: - Called by nghttp2 during a read

    fileprivate func header(session: OpaquePointer?, stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let slot = client(of: stream, in: session), name.count == 7, name.elementsEqual(":status".utf8), value.count == 3 else { return }
        clients[slot].status = Int(value[0] &- 48) * 100 + Int(value[1] &- 48) * 10 + Int(value[2] &- 48)
    }

    fileprivate func data(session: OpaquePointer?, stream: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        guard let slot = client(of: stream, in: session) else { return }
        clients[slot].body.append(contentsOf: bytes)
    }

    fileprivate func closed(session: OpaquePointer?, stream: Int32, errorCode: UInt32) {
        guard let slot = client(of: stream, in: session) else { return }
        if errorCode == 0 && clients[slot].status > 0 {
            complete(slot)
        } else {
            // Refused (a GOAWAY from a node that stops) or reset: no answer.
            fail(slot, errorCode == NGHTTP2_REFUSED_STREAM.rawValue ? "stream refused" : "stream reset")
        }
    }

    fileprivate func requestBody(
        session: OpaquePointer?, stream: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>
    )
        -> Int
    {
        guard let slot = client(of: stream, in: session) else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        let count = min(length, clients[slot].requestBody.count)
        let start = clients[slot].requestBody.startIndex
        clients[slot].requestBody.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress!, count: count) }
        clients[slot].requestBody = clients[slot].requestBody[(start + count)...]
        if clients[slot].requestBody.isEmpty { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return count
    }

    /// The client whose request in flight is `stream` of `session`: the stream's user data is
    /// its client's index + 1, and a stream given up on (timed out) no longer matches its client's.
    private func client(of stream: Int32, in session: OpaquePointer?) -> Int? {
        guard let session, let user = nghttp2_session_get_stream_user_data(session, stream) else { return nil }
        let slot = Int(bitPattern: user) - 1
        guard slot >= 0, slot < clients.count, clients[slot].inFlight, clients[slot].streamID == stream,
            connections[clients[slot].group * endpoints.count + clients[slot].endpoint].session == session
        else { return nil }
        return slot
    }

    // MARK: - Outcomes

    private func complete(_ slot: Int) {
        guard clients[slot].inFlight else { return }
        let microseconds = SendSchedule.microseconds(from: clients[slot].startedAt, to: .now)
        let status = clients[slot].status
        generator.recordAnswer(status: status, latency: microseconds, measured: !draining && clients[slot].startedAt >= measureFrom)
        if let pair = clients[slot].pair {
            generator.recordExpectation(pair, EventLoop.expectation(status: status, body: clients[slot].body[...]), status: status)
        }
        clients[slot].inFlight = false
        clients[slot].pair = nil
        idle.append(slot)
    }

    /// The client's request failed without an answer: either state is allowed for its pair.
    private func fail(_ slot: Int, _ kind: String, retrying: Bool = false) {
        guard clients[slot].inFlight else { return }
        generator.recordError(kind, measured: !draining && clients[slot].startedAt >= measureFrom)
        if let pair = clients[slot].pair { generator.recordExpectation(pair, .either, status: nil) }
        clients[slot].inFlight = false
        clients[slot].pair = nil
        if retrying || kind.hasPrefix("connect failed") { retry.append(slot) } else { idle.append(slot) }
    }

    private func expireTimeouts() {
        let now = ContinuousClock.now
        lastTimeoutCheck = now
        idle += retry
        retry.removeAll()
        // A connection that has sent nothing for the whole timeout while a request waited on it
        // (a node whose host vanished without a reset, a connect that hangs) is replaced, as
        // HTTP/1.1 replaces its socket; its requests fail as timeouts.
        for token in connections.indices
        where connections[token].session != nil && now - connections[token].lastInput > generator.options.timeout
            && clients.contains(where: {
                $0.inFlight && $0.group * endpoints.count + $0.endpoint == token && now - $0.startedAt > generator.options.timeout
            })
        {
            failConnection(token, "timeout")
        }
        for slot in clients.indices where clients[slot].inFlight && now - clients[slot].startedAt > generator.options.timeout {
            // The stream is cancelled, the connection kept for the other clients on it.
            let token = clients[slot].group * endpoints.count + clients[slot].endpoint
            if let session = connections[token].session, clients[slot].streamID > 0 {
                nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), clients[slot].streamID, NGHTTP2_CANCEL.rawValue)
            }
            fail(slot, "timeout")
            if connections[token].session != nil && !connections[token].connecting { flush(token) }
        }
    }

    /// The connection failed: every request in flight on it failed, and it is closed (opened
    /// again by the next request to its endpoint).
    private func failConnection(_ token: Int, _ kind: String) {
        for slot in clients.indices
        where clients[slot].inFlight && clients[slot].group * endpoints.count + clients[slot].endpoint == token {
            fail(slot, kind)
        }
        closeConnection(token)
    }

    private func closeConnection(_ token: Int) {
        if let session = connections[token].session { nghttp2_session_del(session) }
        let descriptor = connections[token].descriptor
        if descriptor >= 0 { LoadSocket.abandon(descriptor) }
        connections[token] = Connection()
    }

    /// Opens connection `token` (connecting in the background) with its HTTP/2 session, the
    /// client's preface and SETTINGS queued; `false` when no socket or session could be made.
    private func open(_ token: Int) -> Bool {
        var session: OpaquePointer?
        guard nghttp2_session_client_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque()) == 0, let session else { return false }
        guard let (descriptor, connecting) = LoadSocket.connect(to: endpoints[token % endpoints.count]) else {
            nghttp2_session_del(session)
            return false
        }
        // Room for the node's answers on every stream at once without waiting for a window update.
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, 1 << 24)
        connections[token] = Connection(descriptor: descriptor, connecting: connecting, watchingWrites: connecting, session: session)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (connecting ? EPOLLOUT.rawValue : 0)
        event.data.u64 = UInt64(token)
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, descriptor, &event)
        return true
    }
}

// nghttp2's callbacks: `user_data` is the loop (alive for as long as its sessions).

private func loop(_ user: UnsafeMutableRawPointer?) -> HTTP2EventLoop {
    Unmanaged<HTTP2EventLoop>.fromOpaque(user!).takeUnretainedValue()
}

private let onHeader: nghttp2_on_header_callback = { session, frame, name, nameLength, value, valueLength, _, user in
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), let name, let value else { return 0 }
    loop(user).header(
        session: session, stream: frame.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: nameLength),
        value: UnsafeBufferPointer(start: value, count: valueLength))
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { session, _, stream, data, length, user in
    if let data { loop(user).data(session: session, stream: stream, UnsafeBufferPointer(start: data, count: length)) }
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { session, stream, errorCode, user in
    loop(user).closed(session: session, stream: stream, errorCode: errorCode)
    return 0
}

private let readBody: nghttp2_data_source_read_callback = { session, stream, buffer, length, flags, _, user in
    guard let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    return loop(user).requestBody(session: session, stream: stream, into: buffer, length: length, flags: flags)
}
