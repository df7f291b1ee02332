internal import CMicroHTTPD
import CounterCore
import Foundation
import Synchronization

/// Limits and address of the HTTP server.
public struct HTTPServerConfiguration: Sendable, Equatable {
    /// Address to listen on. Defaults to `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// Port; `0` picks a free one (see `HTTPServer.port`). Defaults to `8080`.
    public var port: Int = 8080
    /// Open connections at most; more are refused. Defaults to `10_000`.
    public var maximumConnections: Int = 10_000
    /// How long a connection may sit idle (or a slow client take to send a request) before it is
    /// closed, in whole seconds (the HTTP library's unit). Defaults to 30 s.
    public var idleTimeout: Duration = .seconds(30)
    /// Bytes of request line + headers a request may take, counting the HTTP library's record of
    /// each header field and query argument (56 bytes each): larger heads are refused with
    /// `HTTPRefusal.headersTooLarge` before the handler sees them. Each connection's buffer is
    /// this plus 2 KiB, so that every request the handler answers leaves room for its answer's
    /// head; heads beyond the buffer are refused by the library itself (414 or 431, its own HTML),
    /// or, within a few hundred bytes of it, their connection closed without an answer — nothing
    /// is done for them either. Defaults to 8 KiB, as common servers allow: the library clears a
    /// connection's whole buffer before every request, so a larger one costs every request time.
    public var maximumHeaderBytes: Int = 8 << 10
    /// Bytes of request body accepted (larger ones get 413). Defaults to 64 KiB: enough for a
    /// feed query of 1,000 ids.
    public var maximumBodyBytes: Int = 64 << 10

    public init() {}
}

/// An HTTP/1.1 server on libmicrohttpd in external epoll mode, driven by one thread of ours
/// (`EventLoopThread`), with suspend/resume so answers that need waiting never block that thread.
/// Keep-alive and pipelining are the library's.
public final class HTTPServer: Service {
    public let configuration: HTTPServerConfiguration
    let handler: any HTTPHandler
    /// The request headers the handler reads, with their lower-case keys, read once.
    private let wantedHeaders: [(name: String, key: String)]
    private let state = Mutex(State())
    private let loop: EventLoopThread
    /// Requests suspended until their answer comes. The lock also orders every suspend and
    /// resume against `stop()`: once it has answered what is left, no late answer can reach a
    /// connection or daemon that is gone, and libmicrohttpd never sees a suspended connection
    /// at `MHD_stop_daemon` (it aborts the process then).
    private let suspended = Mutex(SuspendedRequests())
    /// Answers handed to the library on resumed connections and not yet sent (their request
    /// has not completed): `stop()` lets them go out before the daemon goes.
    private let sending = Atomic<Int>(0)
    /// Set when `stop()` begins (what `SuspendedRequests.closed` says, without its lock).
    private let stopping = Atomic<Bool>(false)
    /// Rung when the last suspended request is answered, or the last answer sent, while
    /// `stop()` waits for it.
    private let settled = LoopAlarm()

    private struct SuspendedRequests {
        var entries: [ObjectIdentifier: (connection: ConnectionHandle, state: RequestState)] = [:]
        /// Set when `stop()` begins: requests that still arrive on open connections are answered
        /// at once with 503 instead of being suspended.
        var closed = false
    }

    private struct State {
        var daemon: DaemonHandle?
        var port: Int = 0
    }

    /// The port the server listens on (useful with port `0`).
    public var port: Int { state.withLock { $0.port } }

    /// - Throws: `HTTPServerError` when the event loop's wake-up pipe cannot be made (no file
    ///   descriptors left).
    public init(configuration: HTTPServerConfiguration, handler: any HTTPHandler) throws {
        self.configuration = configuration
        self.handler = handler
        self.wantedHeaders = handler.requestHeaders.map { ($0, $0.lowercased()) }
        self.loop = try EventLoopThread()
    }

    /// Binds and starts serving. `run()` calls it unless it was called before (to learn the
    /// bound port first).
    /// - Throws: `HTTPServerError` when the address cannot be bound or the library refuses to start.
    public func start() throws {
        let socket = try Self.listeningSocket(host: configuration.host, port: configuration.port)
        let boundPort = Self.boundPort(socket)
        // External epoll mode: our own thread waits on the library's epoll descriptor and calls
        // MHD_run, which never blocks (see `EventLoopThread`).
        let flags =
            MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
            | MHD_USE_SUPPRESS_DATE_NO_CLOCK.rawValue
        let context = Unmanaged.passUnretained(self).toOpaque()
        let completed: MHD_RequestCompletedCallback = requestCompleted
        let handler: MHD_AccessHandlerCallback = accessHandler
        let targetReceived: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? =
            requestTargetReceived
        let keepEscaped: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafeMutablePointer<CChar>?) -> Int = counter_mhd_keep_escaped
        let options: [CVarArg] = [
            MHD_OPTION.LISTEN_SOCKET.rawValue, socket,
            MHD_OPTION.CONNECTION_LIMIT.rawValue, UInt32(configuration.maximumConnections),
            MHD_OPTION.CONNECTION_TIMEOUT.rawValue, UInt32(clamping: max(1, configuration.idleTimeout.components.seconds)),
            MHD_OPTION.CONNECTION_MEMORY_LIMIT.rawValue, UInt(configuration.maximumHeaderBytes + 2_048),
            MHD_OPTION.NOTIFY_COMPLETED.rawValue, OpaquePointer(unsafeBitCast(completed, to: UnsafeMutableRawPointer.self)), OpaquePointer(context),
            // The raw target, before the library splits and decodes it: it starts each request's state.
            MHD_OPTION.URI_LOG_CALLBACK.rawValue, OpaquePointer(unsafeBitCast(targetReceived, to: UnsafeMutableRawPointer.self)),
            OpaquePointer(context),
            // Nothing is percent-decoded (the library's own copies of path and arguments included).
            MHD_OPTION.UNESCAPE_CALLBACK.rawValue, OpaquePointer(unsafeBitCast(keepEscaped, to: UnsafeMutableRawPointer.self)),
            OpaquePointer(context),
            MHD_OPTION.END.rawValue,
        ]
        let daemon: OpaquePointer? = withVaList(options) { arguments in
            MHD_start_daemon_va(flags, 0, nil, nil, handler, context, arguments)
        }
        guard let daemon else {
            close(socket)
            throw HTTPServerError(message: "libmicrohttpd refused to start on \(configuration.host):\(configuration.port)")
        }
        let epollDescriptor = counter_mhd_epoll_fd(daemon)
        guard epollDescriptor >= 0 else {
            MHD_stop_daemon(daemon) // closes the listening socket too
            throw HTTPServerError(message: "libmicrohttpd started without an epoll descriptor")
        }
        let handle = DaemonHandle(pointer: daemon)
        state.withLock {
            $0.daemon = handle
            $0.port = boundPort
        }
        loop.start(daemon: handle, epollDescriptor: epollDescriptor)
    }

    /// As a `Service`: listens (it has started once it is bound: `port` is the real port), until
    /// asked to stop, then stops gracefully (`stop()`).
    /// - Throws: `HTTPServerError` when it cannot listen.
    public func run(_ lifecycle: ServiceLifecycle) async throws {
        if state.withLock({ $0.daemon == nil }) { try start() }
        lifecycle.started()
        await lifecycle.stopRequested()
        await stop()
    }

    /// Stops accepting connections, waits (up to `timeout`) for requests being handled to be
    /// answered, answers whatever is still waiting with 503, then stops the server. Safe to call
    /// more than once; later calls return at once.
    public func stop(timeout: Duration = .seconds(10)) async {
        guard
            let daemon = state.withLock({ state in
                defer { state.daemon = nil }
                return state.daemon
            })
        else { return }
        suspended.withLock { $0.closed = true }
        stopping.store(true, ordering: .releasing)
        let socket = await loop.quiesce()
        if socket >= 0 { close(socket) }
        let deadline = ContinuousClock.now + timeout
        while suspended.withLock({ !$0.entries.isEmpty }) && ContinuousClock.now < deadline {
            await settled.sleep(until: deadline)
        }
        let late = suspended.withLock { table in
            for (_, entry) in table.entries {
                entry.state.response.withLock { $0 = handler.response(for: .shuttingDown) }
                resume(entry)
            }
            defer { table.entries.removeAll() }
            return table.entries.count
        }
        if late > 0 { loop.connectionResumed() }
        // The resumed connections send their answers before the daemon goes (at most a second:
        // a client that does not read keeps its answer unsent).
        let sent = ContinuousClock.now + .seconds(1)
        while sending.load(ordering: .acquiring) > 0 && ContinuousClock.now < sent {
            await settled.sleep(until: sent)
        }
        await loop.stop()
        MHD_stop_daemon(daemon.pointer)
    }

    // MARK: - Called from the library's thread

    fileprivate func dispatch(_ request: HTTPRequest, state requestState: RequestState, connection: OpaquePointer) -> MHD_Result {
        let start: @Sendable (@escaping @Sendable (HTTPResponse) -> Void) -> Void
        switch handler.dispatch(request) {
        case .respond(let response):
            return Self.queue(response, on: connection)
        case .later(let begin):
            start = begin
        }
        let key = ObjectIdentifier(requestState)
        let admitted = suspended.withLock { table in
            guard !table.closed else { return false }
            MHD_suspend_connection(connection)
            table.entries[key] = (ConnectionHandle(pointer: connection), requestState)
            return true
        }
        guard admitted else {
            return Self.queue(handler.response(for: .shuttingDown), on: connection)
        }
        start { response in self.answer(key, with: response) }
        return .YES
    }

    /// Stores the answer of a suspended request and resumes its connection — unless `stop()`
    /// has already answered it.
    private func answer(_ key: ObjectIdentifier, with response: HTTPResponse) {
        let (resumed, lastOne) = suspended.withLock { table -> (Bool, Bool) in
            guard let entry = table.entries.removeValue(forKey: key) else { return (false, false) }
            entry.state.response.withLock { $0 = response }
            resume(entry)
            return (true, table.closed && table.entries.isEmpty)
        }
        if resumed { loop.connectionResumed() }
        if lastOne { settled.ring() }
    }

    /// Resumes a suspended connection whose answer is stored (under the `suspended` lock); its
    /// answer is being sent until its request completes.
    private func resume(_ entry: (connection: ConnectionHandle, state: RequestState)) {
        entry.state.sending.store(true, ordering: .relaxed)
        sending.add(1, ordering: .relaxed)
        MHD_resume_connection(entry.connection.pointer)
    }

    /// The library is done with a request whose connection was resumed (its answer sent, or
    /// the connection gone).
    fileprivate func answerSent() {
        let left = sending.subtract(1, ordering: .acquiringAndReleasing).newValue
        if left == 0 && stopping.load(ordering: .acquiring) { settled.ring() }
    }

    /// The headers the handler asked for, of the request on `connection`.
    fileprivate func requestHeaders(_ connection: OpaquePointer) -> [String: String] {
        var headers: [String: String] = [:]
        for (name, key) in wantedHeaders {
            if let value = MHD_lookup_connection_value(connection, .HEADER_KIND, name) { headers[key] = String(cString: value) }
        }
        return headers
    }

    /// What makes a request's framing or target ambiguous (see `HTTPRefusal.malformed`), or
    /// `nil` when nothing does.
    fileprivate static func framingProblem(_ connection: OpaquePointer, state: RequestState, version: UnsafePointer<CChar>?) -> String? {
        if state.targetHeldNUL(version: version) { return "the request target holds a NUL byte" }
        switch counter_mhd_framing_problem(connection) {
        case Int32(COUNTER_FRAMING_OK.rawValue): return nil
        case Int32(COUNTER_FRAMING_SPACE_IN_NAME.rawValue): return "a header field name holds whitespace"
        case Int32(COUNTER_FRAMING_BOTH_LENGTHS.rawValue): return "both Content-Length and Transfer-Encoding: send one"
        case Int32(COUNTER_FRAMING_TRANSFER_CODING.rawValue): return "Transfer-Encoding other than one \"chunked\""
        default: return "Content-Length given more than once"
        }
    }

    fileprivate static func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
        let mhdResponse = response.body.withUnsafeBytes { body in
            MHD_create_response_from_buffer(body.count, UnsafeMutableRawPointer(mutating: body.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let mhdResponse else { return .NO }
        defer { MHD_destroy_response(mhdResponse) }
        _ = MHD_add_response_header(mhdResponse, "Content-Type", response.contentType)
        for (name, value) in response.headers { _ = MHD_add_response_header(mhdResponse, name, value) }
        return MHD_queue_response(connection, UInt32(response.status), mhdResponse)
    }

    // MARK: - Sockets

    private static func listeningSocket(host: String, port: Int) throws -> Int32 {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw HTTPServerError(message: "listen address \"\(host)\" is not an IPv4 address")
        }
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw HTTPServerError(message: "socket() failed: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 4_096) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw HTTPServerError(message: "cannot listen on \(host):\(port): \(reason)")
        }
        return descriptor
    }

    private static func boundPort(_ descriptor: Int32) -> Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// The HTTP server could not start.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

// Unchecked Sendable: the daemon pointer is only used by the event loop thread, and by
// MHD_stop_daemon once that thread has ended.
struct DaemonHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

// Unchecked Sendable: a suspended connection is resumed once, under the server's `suspended`
// lock, by whoever removes it from the table (its answer, or `stop()`); MHD_resume_connection is
// safe from any thread with MHD_ALLOW_SUSPEND_RESUME.
private struct ConnectionHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// What one request accumulates across the library's calls: its target, its body, then its answer.
private final class RequestState: Sendable {
    /// The request target as sent, up to a NUL byte if it holds one.
    let target: String
    /// Where the target lies in the library's read buffer, and how long it is up to its first
    /// NUL byte: the version string that follows it tells whether a NUL cut it short.
    let targetAddress: UInt
    let targetLength: Int
    /// Whether the first call (headers complete) has been seen and the framing checked.
    let headersChecked = Atomic<Bool>(false)
    let body = Mutex<[UInt8]>([])
    let tooLarge = Atomic<Bool>(false)
    let dispatched = Atomic<Bool>(false)
    let response = Mutex<HTTPResponse?>(nil)
    /// The request was suspended and its connection resumed with its answer: the server counts
    /// it as being sent until it completes.
    let sending = Atomic<Bool>(false)

    init(target: UnsafePointer<CChar>?) {
        let length = target.map { strlen($0) } ?? 0
        self.target = target.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: length), as: UTF8.self) } ?? "/"
        targetAddress = target.map { UInt(bitPattern: $0) } ?? 0
        targetLength = length
    }

    /// Whether the target held a NUL byte (which would cut it short, `1%00` sent raw): the
    /// version string follows the target and the one space after it in the same buffer.
    func targetHeldNUL(version: UnsafePointer<CChar>?) -> Bool {
        guard let version, targetAddress != 0 else { return false }
        let distance = Int(bitPattern: UInt(bitPattern: version)) - Int(bitPattern: targetAddress)
        // A version elsewhere (the library's empty string for a request line without one) says nothing.
        guard distance > 0 && distance <= 1 << 20 else { return false }
        return distance - 1 != targetLength
    }
}

/// The library calls this once per request with the request target as sent, before it splits
/// and decodes it; what it returns is the request's context in the calls that follow.
private func requestTargetReceived(
    _ context: UnsafeMutableRawPointer?, _ target: UnsafePointer<CChar>?,
    _ connection: OpaquePointer?
) -> UnsafeMutableRawPointer? {
    Unmanaged.passRetained(RequestState(target: target)).toOpaque()
}

/// The library calls this for every request, several times: first with headers only (we check
/// the framing and the target), then with body chunks, then with no more data (we dispatch and
/// suspend), and after a resume once more (we queue the answer).
private func accessHandler(
    _ context: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ url: UnsafePointer<CChar>?,
    _ method: UnsafePointer<CChar>?, _ version: UnsafePointer<CChar>?, _ uploadData: UnsafePointer<CChar>?,
    _ uploadDataSize: UnsafeMutablePointer<Int>?, _ requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let context, let connection, let requestContext, let uploadDataSize else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    // The state was made when the target arrived (`requestTargetReceived`).
    guard let stored = requestContext.pointee else { return .NO }
    let state = Unmanaged<RequestState>.fromOpaque(stored).takeUnretainedValue()
    if !state.headersChecked.exchange(true, ordering: .relaxed) {
        let limit = server.configuration.maximumHeaderBytes
        if counter_mhd_head_footprint(connection) > limit {
            // Before any of the body is read: the buffer's rest is kept for this answer.
            var response = server.handler.response(for: .headersTooLarge(limit: limit))
            response.headers["Connection"] = "close"
            return HTTPServer.queue(response, on: connection)
        }
        guard let problem = HTTPServer.framingProblem(connection, state: state, version: version) else { return .YES }
        // Answered before any of the body is read, and the connection closes after it: the bytes
        // that follow may be another request only to an intermediary.
        var response = server.handler.response(for: .malformed(problem))
        response.headers["Connection"] = "close"
        return HTTPServer.queue(response, on: connection)
    }
    if let response = state.response.withLock({ $0 }) {
        return HTTPServer.queue(response, on: connection)
    }
    if uploadDataSize.pointee > 0 {
        let size = uploadDataSize.pointee
        let limit = server.configuration.maximumBodyBytes
        state.body.withLock { body in
            if body.count + size > limit {
                state.tooLarge.store(true, ordering: .relaxed)
            } else if let uploadData {
                body.append(contentsOf: UnsafeRawBufferPointer(start: uploadData, count: size))
            }
        }
        uploadDataSize.pointee = 0
        return .YES
    }
    guard !state.dispatched.exchange(true, ordering: .relaxed) else { return .YES }
    if state.tooLarge.load(ordering: .relaxed) {
        return HTTPServer.queue(server.handler.response(for: .bodyTooLarge(limit: server.configuration.maximumBodyBytes)), on: connection)
    }
    let target = RequestTarget(state.target)
    let request = HTTPRequest(
        method: method.map { String(cString: $0) } ?? "",
        path: target.path,
        query: target.arguments,
        rawQuery: target.rawQuery,
        authorization: MHD_lookup_connection_value(connection, .HEADER_KIND, "Authorization").map { String(cString: $0) },
        headers: server.requestHeaders(connection),
        body: state.body.withLock { $0 })
    return server.dispatch(request, state: state, connection: connection)
}

/// Releases a request's state when the library is done with the request.
private func requestCompleted(
    _ context: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
    _ requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ code: MHD_RequestTerminationCode
) {
    guard let requestContext, let stored = requestContext.pointee else { return }
    let state = Unmanaged<RequestState>.fromOpaque(stored)
    if let context, state.takeUnretainedValue().sending.load(ordering: .relaxed) {
        Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue().answerSent()
    }
    state.release()
    requestContext.pointee = nil
}
