import BlockingIO
internal import CHiredis
import CounterCore
import Glibc

/// One Redis connection (hiredis 0.14), owned by an actor that runs on a thread of its own, so
/// blocking reads and writes never hold up Swift's cooperative pool.
///
/// Pipelining is the normal path: `pipeline(_:)` sends many commands in one write and returns
/// their replies in order. The connection opens lazily, reopens itself at the start of the next
/// call when the server went away while it was idle, and backs off between failed attempts: while
/// Redis is down, calls fail at once with `.connectionFailed` instead of waiting.
public actor RedisConnection {
    /// Where this connection goes and its limits.
    public nonisolated let configuration: RedisConfiguration
    private let executor: BlockingIOExecutor
    private var owned: OwnedRedisContext?
    private var context: UnsafeMutablePointer<redisContext>? {
        get { owned?.pointer }
        set { owned = newValue.map(OwnedRedisContext.init) }
    }
    private var backoff: ReconnectBackoff
    /// Which opening of the connection is current: 1 for the first, one more with each reopening
    /// (0 before any). Commands that speak of what *this connection* sent before them — `WAIT`
    /// counts the writes of its own connection — must run on the opening that carried those
    /// writes (`pipeline(_:onOpening:)`).
    public private(set) var opening: UInt64 = 0
    private var nextAttempt: ContinuousClock.Instant?
    private var lastConnectError = ""

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// A connection that opens on first use (or on `connect()`).
    public init(configuration: RedisConfiguration) {
        self.configuration = configuration
        self.executor = BlockingIOExecutor(name: "redis-conn")
        self.backoff = ReconnectBackoff(
            initial: configuration.reconnectInitialDelay,
            maximum: configuration.reconnectMaximumDelay)
    }

    // Not an isolated deinit: one that named hiredis's types made every module importing this
    // one fail to build in release mode ("circular reference"). The context frees itself.
    deinit {
        executor.shutdown()
    }

    /// Opens the connection now if it is not open.
    public func connect() throws(RedisError) {
        _ = try usableContext()
    }

    /// Closes the connection; the next call opens a new one.
    public func close() {
        context = nil
    }

    /// Sends one command and returns its reply.
    /// - Throws: `RedisError(.server)` with Redis's text for an error reply; connection errors.
    @discardableResult
    public func send(_ command: RedisCommand) throws(RedisError) -> RedisReply {
        try pipeline([command])[0].throwingServerError()
    }

    /// Sends `commands` in one write and returns one reply per command, in order. Error replies
    /// come back as `.error` in their place: one refused command does not hide the others.
    /// - Throws: `.invalidArgument` for an empty or oversized pipeline (nothing is sent);
    ///   `.connectionFailed` when Redis cannot be reached; `.connectionLost` when the connection
    ///   broke or timed out mid-way (then any of the commands may have run).
    public func pipeline(_ commands: [RedisCommand]) throws(RedisError) -> [RedisReply] {
        try validate(commands)
        return try send(commands, on: try usableContext())
    }

    /// `pipeline(_:)`, and the opening (`opening`) that carried it.
    public func pipelineNotingOpening(_ commands: [RedisCommand]) throws(RedisError) -> (replies: [RedisReply], opening: UInt64) {
        try validate(commands)
        let context = try usableContext()
        return (try send(commands, on: context), opening)
    }

    /// `pipeline(_:)` on opening `expected` only: when the connection has been reopened since
    /// (or is broken now), nothing is sent and it throws `.connectionLost` — a `WAIT` on a new
    /// connection would count none of the writes the old one carried, and answer at once as if
    /// every replica had them.
    public func pipeline(_ commands: [RedisCommand], onOpening expected: UInt64) throws(RedisError) -> [RedisReply] {
        try validate(commands)
        guard opening == expected, let context, context.pointee.err == 0, !Self.serverHungUp(context) else {
            throw RedisError(
                code: .connectionLost,
                message:
                    "the connection to Redis at \(configuration.host):\(configuration.port) that carried the earlier commands is gone (opening \(expected), now \(opening)); nothing sent"
            )
        }
        return try send(commands, on: context)
    }

    private func send(_ commands: [RedisCommand], on context: UnsafeMutablePointer<redisContext>) throws(RedisError) -> [RedisReply] {
        var payload: [UInt8] = []
        payload.reserveCapacity(commands.reduce(0) { $0 + $1.encoded.count })
        for command in commands { payload.append(contentsOf: command.encoded) }
        let appended = payload.withUnsafeBytes { bytes in
            redisAppendFormattedCommand(context, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), bytes.count)
        }
        guard appended == REDIS_OK else { throw dropConnection(context, after: 0, of: commands.count) }
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for index in 0..<commands.count {
            var raw: UnsafeMutableRawPointer?
            guard redisGetReply(context, &raw) == REDIS_OK, let raw else {
                throw dropConnection(context, after: index, of: commands.count)
            }
            replies.append(Self.convert(raw.assumingMemoryBound(to: redisReply.self)))
            freeReplyObject(raw)
        }
        return replies
    }

    /// Runs `commands` atomically (`MULTI` … `EXEC` in one pipeline) and returns their replies.
    /// Redis does not roll back: a command that fails while running (`WRONGTYPE`, say) is an
    /// `.error` in the result while the others took effect.
    /// - Throws: `RedisError(.server)` with Redis's text when a command was refused before running
    ///   (`EXECABORT`); then none of them ran.
    public func transaction(_ commands: [RedisCommand]) throws(RedisError) -> [RedisReply] {
        try validate(commands)
        let replies = try pipeline([RedisCommand("MULTI")] + commands + [RedisCommand("EXEC")])
        let exec = replies[replies.count - 1]
        if case .array(let results) = exec { return results }
        let refusal = replies.dropFirst().dropLast().first { if case .error = $0 { return true } else { return false } }
        var text = exec.isNull ? "EXEC returned nil (transaction aborted)" : "\(exec)"
        if case .error(let execText) = exec { text = execText }
        if case .error(let why)? = refusal { text += "; first refused command: \(why)" }
        throw RedisError.server(text)
    }

    // MARK: - Connection upkeep

    private func validate(_ commands: [RedisCommand]) throws(RedisError) {
        guard !commands.isEmpty else {
            throw RedisError(code: .invalidArgument, message: "empty pipeline: give at least one command")
        }
        guard commands.count <= configuration.maximumPipelineCommands else {
            throw RedisError(
                code: .invalidArgument,
                message: "pipeline of \(commands.count) commands exceeds the limit of \(configuration.maximumPipelineCommands); split it")
        }
        let bytes = commands.reduce(0) { $0 + $1.encoded.count }
        guard bytes <= configuration.maximumPipelineBytes else {
            throw RedisError(
                code: .invalidArgument,
                message: "pipeline of \(bytes) bytes exceeds the limit of \(configuration.maximumPipelineBytes) bytes; split it")
        }
    }

    private func usableContext() throws(RedisError) -> UnsafeMutablePointer<redisContext> {
        if let context {
            if context.pointee.err == 0 && !Self.serverHungUp(context) { return context }
            self.context = nil
        }
        let now = ContinuousClock.now
        if let nextAttempt, now < nextAttempt {
            let wait = nextAttempt - now
            throw RedisError(
                code: .connectionFailed,
                message:
                    "Redis at \(configuration.host):\(configuration.port) is unreachable (\(lastConnectError)); next reconnect attempt in \(wait.formatted(.units(allowed: [.milliseconds])))"
            )
        }
        do {
            let opened = try open()
            context = opened
            opening += 1
            backoff.reset()
            nextAttempt = nil
            return opened
        } catch {
            lastConnectError = error.message
            nextAttempt = now + backoff.nextDelay()
            throw error
        }
    }

    private func open() throws(RedisError) -> UnsafeMutablePointer<redisContext> {
        let endpoint = "\(configuration.host):\(configuration.port)"
        guard
            let opened = redisConnectWithTimeout(
                configuration.host, Int32(configuration.port),
                Self.timeval(configuration.connectTimeout))
        else {
            throw RedisError(code: .connectionFailed, message: "cannot connect to Redis at \(endpoint): out of memory")
        }
        guard opened.pointee.err == 0 else {
            let reason = Self.errorText(opened)
            redisFree(opened)
            throw RedisError(code: .connectionFailed, message: "cannot connect to Redis at \(endpoint): \(reason)")
        }
        _ = redisSetTimeout(opened, Self.timeval(configuration.commandTimeout))
        var setup: [RedisCommand] = []
        if let password = configuration.password { setup.append(RedisCommand("AUTH", password)) }
        if configuration.database != 0 { setup.append(RedisCommand("SELECT", configuration.database)) }
        for command in setup {
            let payload = command.encoded
            var raw: UnsafeMutableRawPointer?
            let sent = payload.withUnsafeBytes { bytes in
                redisAppendFormattedCommand(opened, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), bytes.count)
            }
            guard sent == REDIS_OK, redisGetReply(opened, &raw) == REDIS_OK, let raw else {
                let reason = Self.errorText(opened)
                redisFree(opened)
                throw RedisError(code: .connectionFailed, message: "Redis at \(endpoint) failed during \(command.name): \(reason)")
            }
            let reply = Self.convert(raw.assumingMemoryBound(to: redisReply.self))
            freeReplyObject(raw)
            if case .error(let text) = reply {
                redisFree(opened)
                throw RedisError(code: .connectionFailed, message: "Redis at \(endpoint) refused \(command.name): (Redis) \(text)")
            }
        }
        return opened
    }

    private func dropConnection(_ context: UnsafeMutablePointer<redisContext>, after replies: Int, of total: Int) -> RedisError {
        let reason = Self.errorText(context)
        self.context = nil
        return RedisError(
            code: .connectionLost,
            message:
                "connection to Redis lost after \(replies) of \(total) replies (\(reason)); the unanswered commands may or may not have run; the next call reconnects"
        )
    }

    /// An idle connection has nothing to read: readable means the server closed it.
    private static func serverHungUp(_ context: UnsafeMutablePointer<redisContext>) -> Bool {
        var descriptor = pollfd(fd: context.pointee.fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) > 0
    }

    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        let text = withUnsafeBytes(of: context.pointee.errstr) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        return text.isEmpty ? "error \(context.pointee.err)" : text
    }

    private static func timeval(_ duration: Duration) -> Glibc.timeval {
        let (seconds, attoseconds) = duration.components
        return Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }

    static func convert(_ reply: UnsafeMutablePointer<redisReply>) -> RedisReply {
        let value = reply.pointee
        switch value.type {
        case REDIS_REPLY_STATUS:
            return .status(String(decoding: UnsafeRawBufferPointer(start: value.str, count: Int(value.len)), as: UTF8.self))
        case REDIS_REPLY_ERROR:
            return .error(String(decoding: UnsafeRawBufferPointer(start: value.str, count: Int(value.len)), as: UTF8.self))
        case REDIS_REPLY_INTEGER:
            return .integer(Int64(value.integer))
        case REDIS_REPLY_STRING:
            return .bulkString(Array(UnsafeRawBufferPointer(start: value.str, count: Int(value.len))))
        case REDIS_REPLY_ARRAY:
            return .array((0..<Int(value.elements)).map { convert(value.element[$0]!) })
        default:
            return .null
        }
    }
}

/// Owns one hiredis context and frees it when the last reference goes.
private final class OwnedRedisContext {
    let pointer: UnsafeMutablePointer<redisContext>

    init(_ pointer: UnsafeMutablePointer<redisContext>) {
        self.pointer = pointer
    }

    deinit {
        redisFree(pointer)
    }
}
