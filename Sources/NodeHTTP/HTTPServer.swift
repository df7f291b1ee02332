internal import CH2O
import CounterCore
import Foundation
import Synchronization

/// Limits and address of the HTTP server.
public struct HTTPServerConfiguration: Sendable, Equatable {
    /// Address to listen on. Defaults to `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// Port; `0` picks a free one (see `HTTPServer.port`). Defaults to `8080`.
    public var port: Int = 8080
    /// Open connections at most; more are closed as soon as they are accepted. Defaults to
    /// `10_000`.
    public var maximumConnections: Int = 10_000
    /// How long a connection may sit idle (or a slow client take to send a request) before it is
    /// closed. Defaults to 30 s.
    public var idleTimeout: Duration = .seconds(30)
    /// Bytes of request head a request may take — its request line (or HTTP/2's pseudo-headers)
    /// and header fields, each counted as `name: value` and a line end: larger heads are refused
    /// with `HTTPRefusal.headersTooLarge` before the handler sees them. Defaults to 8 KiB, as
    /// common servers allow. (The engine itself reads heads up to about 400 KiB and 100 header
    /// fields; beyond that it answers 400 and closes the connection.)
    public var maximumHeaderBytes: Int = 8 << 10
    /// Bytes of request body accepted (larger ones get 413). Defaults to 64 KiB: enough for a
    /// feed query of 1,000 ids.
    public var maximumBodyBytes: Int = 64 << 10
    /// Requests of one HTTP/2 connection handled at once; more wait for one of them to end.
    /// (The engine advertises, and holds clients to, 100 open streams per connection.)
    /// Defaults to 100.
    public var maximumStreamsPerConnection: Int = 100
    /// A second address that serves TLS — HTTP/2 or HTTP/1.1, chosen by ALPN — besides the
    /// cleartext one (HTTP/1.1, and HTTP/2 to clients that open with its preface: prior
    /// knowledge, as gateways do). Defaults to none.
    public var tls: HTTPTLSListener?

    public init() {}
}

/// Where TLS is served, and its certificate chain and private key (PEM files).
public struct HTTPTLSListener: Sendable, Equatable {
    public var host: String
    /// `0` picks a free port (see `HTTPServer.tlsPort`).
    public var port: Int
    public var certificateFile: String
    public var keyFile: String

    public init(host: String, port: Int, certificateFile: String, keyFile: String) {
        self.host = host
        self.port = port
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }
}

/// An HTTP/1.1 and HTTP/2 server on h2o (`CH2O`), its event loop on one thread of ours. A request
/// whose answer needs waiting is suspended, and its answer handed back to the loop from any
/// thread: the answers that arrive between two turns of the loop go out in one turn, and over
/// HTTP/2 in as few writes as the connection allows. Keep-alive, pipelining and HTTP/2's streams
/// are the engine's.
public final class HTTPServer: Service {
    public let configuration: HTTPServerConfiguration
    let handler: any HTTPHandler
    /// The request headers the handler reads, with their lower-case names as UTF-8, read once.
    private let wantedHeaders: [(key: String, name: [UInt8])]
    private let state = Mutex(State())
    /// Requests suspended until their answer comes, by their engine handle. The lock also orders
    /// every answer against `stop()`: once it has answered what is left, no late answer reaches
    /// the engine.
    private let suspended = Mutex(SuspendedRequests())
    /// Answers handed to the engine and not yet done with (sent, or their client gone): `stop()`
    /// lets them go out before the connections are closed.
    private let sending = Atomic<Int>(0)
    /// Set when `stop()` begins (what `SuspendedRequests.closed` says, without its lock).
    private let stopping = Atomic<Bool>(false)
    /// Rung when the last suspended request is answered, or the last answer sent, while
    /// `stop()` waits for it.
    private let settled = LoopAlarm()
    /// Continuations `stop()` waits on: the listening socket closed, the loop ended.
    private let waits = Mutex(LoopWaits())
    /// Signalled once the engine is set up on its thread.
    private let loopStarted = DispatchSemaphore(value: 0)

    private struct SuspendedRequests {
        var entries: [UInt: PendingHandle] = [:]
        /// Set when `stop()` begins: requests that still arrive on open connections are answered
        /// at once with 503 instead of being suspended.
        var closed = false
    }

    private struct State {
        var engine: EngineHandle?
        var port: Int = 0
        var tlsPort: Int?
    }

    private struct LoopWaits {
        var stoppedListening: CheckedContinuation<Void, Never>?
        var listeningStopped = false
        var loopEnded: CheckedContinuation<Void, Never>?
        var ended = false
    }

    /// The port the server listens on (useful with port `0`).
    public var port: Int { state.withLock { $0.port } }

    /// The port TLS is served on, if it is.
    public var tlsPort: Int? { state.withLock { $0.tlsPort } }

    /// Connections open now.
    public var connectionCount: Int {
        state.withLock { $0.engine.map { Int(counter_h2o_connection_count($0.pointer)) } ?? 0 }
    }

    public init(configuration: HTTPServerConfiguration, handler: any HTTPHandler) throws {
        self.configuration = configuration
        self.handler = handler
        self.wantedHeaders = handler.requestHeaders.map { ($0.lowercased(), Array($0.lowercased().utf8)) }
    }

    /// Binds and starts serving. `run()` calls it unless it was called before (to learn the
    /// bound port first).
    /// - Throws: `HTTPServerError` when the address cannot be bound or TLS cannot be set up.
    public func start() throws {
        let socket = try ListeningSocket.open(host: configuration.host, port: configuration.port)
        let boundPort = ListeningSocket.boundPort(socket)
        var tlsSocket: Int32 = -1
        if let tls = configuration.tls {
            do { tlsSocket = try ListeningSocket.open(host: tls.host, port: tls.port) } catch {
                close(socket)
                throw error
            }
        }
        let boundTLSPort = tlsSocket >= 0 ? ListeningSocket.boundPort(tlsSocket) : nil
        let callbacks = counter_h2o_callbacks(
            request: { context, request in
                guard let context, let request else { return }
                Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue().handle(request)
            },
            refusal: { context, refusal in
                guard let context, let refusal else { return }
                Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue().answerRefusal(refusal)
            },
            answer_done: { context in
                guard let context else { return }
                Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue().answerDone()
            },
            stopped_listening: { context in
                guard let context else { return }
                Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue().listeningStopped()
            },
            started: { context in
                guard let context else { return }
                Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue().loopStarted.signal()
            })
        var error: UnsafePointer<CChar>?
        // Callbacks come only while the loop runs, and the loop's thread holds the server.
        let context = Unmanaged.passUnretained(self).toOpaque()
        let engine: OpaquePointer? = Self.withCString(configuration.tls?.certificateFile) { certificate in
            Self.withCString(configuration.tls?.keyFile) { key in
                var engineConfiguration = counter_h2o_configuration(
                    listening_socket: socket,
                    tls_listening_socket: tlsSocket,
                    maximum_connections: configuration.maximumConnections,
                    idle_timeout_milliseconds: UInt64(max(1, configuration.idleTimeout.milliseconds)),
                    maximum_body_bytes: configuration.maximumBodyBytes,
                    maximum_streams_per_connection: configuration.maximumStreamsPerConnection,
                    tls_certificate_file: certificate,
                    tls_key_file: key)
                return counter_h2o_create(&engineConfiguration, callbacks, context, &error)
            }
        }
        guard let engine else {
            close(socket)
            if tlsSocket >= 0 { close(tlsSocket) }
            let reason = error.map { String(cString: $0) } ?? "the HTTP engine could not start"
            throw HTTPServerError(message: "\(reason) (\(configuration.tls?.certificateFile ?? "no TLS"))")
        }
        let handle = EngineHandle(pointer: engine)
        state.withLock {
            $0.engine = handle
            $0.port = boundPort
            $0.tlsPort = boundTLSPort
        }
        let thread = Thread { [self] in
            counter_h2o_run(handle.pointer)
            let waiting = waits.withLock { waits in
                waits.ended = true
                defer { waits.loopEnded = nil }
                return waits.loopEnded
            }
            waiting?.resume()
        }
        thread.stackSize = 1 << 20
        thread.start()
        // The engine sets itself up on its thread (h2o keeps per-thread state): a moment.
        loopStarted.wait()
    }

    /// As a `Service`: listens (it has started once it is bound: `port` is the real port), until
    /// asked to stop, then stops gracefully (`stop()`).
    /// - Throws: `HTTPServerError` when it cannot listen.
    public func run(_ lifecycle: ServiceLifecycle) async throws {
        if state.withLock({ $0.engine == nil }) { try start() }
        lifecycle.started()
        await lifecycle.stopRequested()
        await stop()
    }

    /// Stops accepting connections (HTTP/1 connections close after their next answer, HTTP/2
    /// ones are told to open no more streams), waits (up to `timeout`) for requests being
    /// handled to be answered, answers whatever is still waiting with 503, lets the answers go
    /// out (at most a second more), then closes every connection. Safe to call more than once;
    /// later calls return at once.
    public func stop(timeout: Duration = .seconds(10)) async {
        guard
            let engine = state.withLock({ state in
                defer { state.engine = nil }
                return state.engine
            })
        else { return }
        suspended.withLock { $0.closed = true }
        stopping.store(true, ordering: .releasing)
        await withCheckedContinuation { continuation in
            waits.withLock { $0.stoppedListening = continuation }
            counter_h2o_stop_listening(engine.pointer)
        }
        let deadline = ContinuousClock.now + timeout
        while suspended.withLock({ !$0.entries.isEmpty }) && ContinuousClock.now < deadline {
            await settled.sleep(until: deadline)
        }
        suspended.withLock { table in
            for (_, pending) in table.entries {
                sending.add(1, ordering: .relaxed)
                handler.response(for: .shuttingDown).withEngineView { counter_h2o_answer(engine.pointer, pending.pointer, $0) }
            }
            table.entries.removeAll()
        }
        // The answers go out before the connections close (at most a second: a client that does
        // not read keeps its answer unsent).
        let sent = ContinuousClock.now + .seconds(1)
        while sending.load(ordering: .acquiring) > 0 && ContinuousClock.now < sent {
            await settled.sleep(until: sent)
        }
        await withCheckedContinuation { continuation in
            let ended = waits.withLock { waits in
                if waits.ended { return true }
                waits.loopEnded = continuation
                return false
            }
            if ended { continuation.resume() } else { counter_h2o_shut_down(engine.pointer) }
        }
        counter_h2o_destroy(engine.pointer)
    }

    // MARK: - Called on the loop thread

    private func handle(_ request: UnsafeMutablePointer<counter_h2o_request>) {
        let read = request.pointee
        let limit = configuration.maximumHeaderBytes
        if read.head_bytes > limit {
            var response = handler.response(for: .headersTooLarge(limit: limit))
            response.headers["Connection"] = "close"
            return response.withEngineView { counter_h2o_respond(request, $0) }
        }
        if let problem = Self.framingProblem(read.framing_problem) {
            // The connection closes after the answer: the bytes that follow may be another
            // request only to an intermediary.
            var response = handler.response(for: .malformed(problem))
            response.headers["Connection"] = "close"
            return response.withEngineView { counter_h2o_respond(request, $0) }
        }
        if read.body_length > configuration.maximumBodyBytes {
            let response = handler.response(for: .bodyTooLarge(limit: configuration.maximumBodyBytes))
            return response.withEngineView { counter_h2o_respond(request, $0) }
        }
        let target = RequestTarget(Self.text(read.target, read.target_length))
        var headers: [String: String] = [:]
        for (key, name) in wantedHeaders {
            if let value = header(name, of: request) { headers[key] = value }
        }
        let httpRequest = HTTPRequest(
            method: Self.text(read.method, read.method_length),
            path: target.path,
            query: target.arguments,
            rawQuery: target.rawQuery,
            authorization: header(Self.authorization, of: request),
            headers: headers,
            body: read.body_length == 0 ? [] : Array(UnsafeBufferPointer(start: read.body, count: read.body_length)),
            httpProtocol: read.version >= 0x200 ? .http2 : .http1)
        let begin: @Sendable (@escaping @Sendable (HTTPResponse) -> Void) -> Void
        switch handler.dispatch(httpRequest) {
        case .respond(let response):
            return response.withEngineView { counter_h2o_respond(request, $0) }
        case .later(let start):
            begin = start
        }
        guard let engine = state.withLock({ $0.engine }) else {
            return handler.response(for: .shuttingDown).withEngineView { counter_h2o_respond(request, $0) }
        }
        let key: UInt? = suspended.withLock { table in
            guard !table.closed else { return nil }
            let pending = PendingHandle(pointer: counter_h2o_suspend(engine.pointer, request))
            let key = UInt(bitPattern: pending.pointer)
            table.entries[key] = pending
            return key
        }
        guard let key else {
            return handler.response(for: .shuttingDown).withEngineView { counter_h2o_respond(request, $0) }
        }
        begin { response in self.answer(key, engine: engine, with: response) }
    }

    /// The engine answers a request itself (a body over the limit, framing it cannot read):
    /// the handler's format instead.
    private func answerRefusal(_ refusal: UnsafeMutablePointer<counter_h2o_refusal>) {
        let status = Int(refusal.pointee.status)
        let reason = Self.text(refusal.pointee.message, refusal.pointee.message_length)
        let response: HTTPResponse
        switch status {
        case 413: response = handler.response(for: .bodyTooLarge(limit: configuration.maximumBodyBytes))
        case 400, 417: response = handler.response(for: .malformed("the HTTP engine could not read the request (\(reason))"))
        default: return
        }
        response.withEngineView { counter_h2o_refuse(refusal, $0) }
    }

    private func answerDone() {
        let left = sending.subtract(1, ordering: .acquiringAndReleasing).newValue
        if left == 0 && stopping.load(ordering: .acquiring) { settled.ring() }
    }

    private func listeningStopped() {
        let waiting = waits.withLock { waits in
            defer { waits.stoppedListening = nil }
            return waits.stoppedListening
        }
        waiting?.resume()
    }

    // MARK: - Called on any thread

    /// Hands the answer of a suspended request to the engine — unless `stop()` has already
    /// answered it.
    private func answer(_ key: UInt, engine: EngineHandle, with response: HTTPResponse) {
        let lastOne = suspended.withLock { table -> Bool in
            guard let pending = table.entries.removeValue(forKey: key) else { return false }
            sending.add(1, ordering: .relaxed)
            response.withEngineView { counter_h2o_answer(engine.pointer, pending.pointer, $0) }
            return table.closed && table.entries.isEmpty
        }
        if lastOne { settled.ring() }
    }

    // MARK: - Pieces

    private static let authorization = Array("authorization".utf8)

    private func header(_ name: [UInt8], of request: UnsafeMutablePointer<counter_h2o_request>) -> String? {
        var length = 0
        let value = name.withUnsafeBufferPointer { name in
            name.withMemoryRebound(to: CChar.self) { counter_h2o_header(request, $0.baseAddress, $0.count, &length) }
        }
        return value.map { Self.text($0, length) }
    }

    private static func text(_ bytes: UnsafePointer<CChar>?, _ count: Int) -> String {
        guard let bytes, count > 0 else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// What makes a request's framing or target ambiguous (see `HTTPRefusal.malformed`), or
    /// `nil` when nothing does.
    private static func framingProblem(_ problem: Int32) -> String? {
        switch UInt32(problem) {
        case COUNTER_FRAMING_OK.rawValue: return nil
        case COUNTER_FRAMING_BOTH_LENGTHS.rawValue: return "both Content-Length and Transfer-Encoding: send one"
        case COUNTER_FRAMING_TRANSFER_CODING.rawValue: return "Transfer-Encoding other than one \"chunked\""
        case COUNTER_FRAMING_REPEATED_LENGTH.rawValue: return "Content-Length given more than once"
        default: return "the request target holds a NUL byte"
        }
    }

    private static func withCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
        guard let text else { return body(nil) }
        return text.withCString { body($0) }
    }
}

/// The HTTP server could not start.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

// Unchecked Sendable: the engine is driven by its loop thread; other threads only hand it
// messages (answers, stop) through its thread-safe queue, and free it once the loop has ended.
private struct EngineHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

// Unchecked Sendable: a suspended request's handle is answered once, under the server's
// `suspended` lock, by whoever removes it from the table (its answer, or `stop()`).
private struct PendingHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

extension Duration {
    fileprivate var milliseconds: Int64 {
        components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000
    }
}
