import Synchronization

/// A long-running part of the node (the write path, the HTTP server, the cluster membership),
/// in the manner of swift-service-lifecycle: `run(_:)` starts, says so (`lifecycle.started()`),
/// works until asked to stop (`await lifecycle.stopRequested()`), then stops gracefully —
/// finishing what it accepted — and returns. Stopping is a request, not a cancellation, so a
/// service may still wait and sleep while it stops; cancelling the task stops it at once.
public protocol Service: Sendable {
    /// Starts, calls `lifecycle.started()` once the services after it may start, works until
    /// `lifecycle.stopRequested()` returns, then stops gracefully and returns.
    /// - Throws: when the service cannot start, or fails for good while running.
    func run(_ lifecycle: ServiceLifecycle) async throws
}

/// One service's side of its group: it says when it has started, and hears when to stop.
public final class ServiceLifecycle: Sendable {
    private struct State {
        var started = false
        var stopRequested = false
        var onStarted: (@Sendable () -> Void)?
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// A lifecycle nobody has started or asked to stop; `onStarted` runs once `started()` is called.
    public init(onStarted: (@Sendable () -> Void)? = nil) {
        state.withLock { $0.onStarted = onStarted }
    }

    /// The service has started: the next service of the group may start.
    public func started() {
        let notify = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.started else { return nil }
            state.started = true
            defer { state.onStarted = nil }
            return state.onStarted
        }
        notify?()
    }

    /// Whether `started()` was called.
    public var hasStarted: Bool { state.withLock { $0.started } }

    /// Whether the service was asked to stop.
    public var isStopRequested: Bool { state.withLock { $0.stopRequested } }

    /// Returns once the service is asked to stop (or its task is cancelled).
    public func stopRequested() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.stopRequested || Task.isCancelled { return true }
                    state.stopWaiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiters = state.withLock { state in
                defer { state.stopWaiters = [] }
                return state.stopWaiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Asks the service to stop.
    public func requestStop() {
        let waiters = state.withLock { state in
            state.stopRequested = true
            defer { state.stopWaiters = [] }
            return state.stopWaiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Runs services in order and stops them in reverse: each starts only once the one before it has
/// started (`ServiceLifecycle.started()`), so a service may rely on those before it from its
/// first step to its last (the HTTP server starts once the write path has recovered, and stops
/// before the write path drains). The group runs until `until` returns (a shutdown signal) or a
/// service ends or fails; then every started service is asked to stop, last first, each awaited
/// before the one before it. A service that fails at start therefore stops, in reverse, what
/// already started.
public enum ServiceGroup {
    /// - Parameter whenStarted: called once every service has started.
    /// - Throws: the first failure of a service, after every started one has stopped.
    public static func run(
        _ services: [any Service], whenStarted: @escaping @Sendable () -> Void = {},
        until: @escaping @Sendable () async -> Void
    ) async throws {
        enum Report: Sendable {
            case started(Int)
            case ended(Int, (any Error)?)
            case signalled
        }
        let (reports, report) = AsyncStream<Report>.makeStream()
        let lifecycles = services.indices.map { index in ServiceLifecycle { report.yield(.started(index)) } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            var iterator = reports.makeAsyncIterator()
            var running: Set<Int> = []
            var failure: (any Error)?
            var ended = false

            /// Takes reports until `done` says so; a service that ends is no longer running.
            func receive(until done: (Report) -> Bool) async {
                while let next = await iterator.next() {
                    if case .ended(let index, let error) = next {
                        running.remove(index)
                        if let error, failure == nil, !(error is CancellationError) { failure = error }
                        ended = true
                    }
                    if done(next) { return }
                }
            }

            // Start in order: each once the one before has started; a failure stops the rest.
            for (index, service) in services.enumerated() {
                let lifecycle = lifecycles[index]
                running.insert(index)
                group.addTask {
                    do {
                        try await service.run(lifecycle)
                        report.yield(.ended(index, nil))
                    } catch {
                        report.yield(.ended(index, error))
                    }
                }
                await receive { next in
                    switch next {
                    case .started(let started): return started == index
                    case .ended: return true
                    case .signalled: return false
                    }
                }
                if ended { break }
            }
            // Run until the signal, or until a service ends or fails.
            if !ended {
                whenStarted()
                group.addTask {
                    await until()
                    report.yield(.signalled)
                }
                await receive { next in
                    switch next {
                    case .signalled, .ended: return true
                    case .started: return false
                    }
                }
            }
            // Stop what still runs, last first, each finished before the one before it.
            while let index = running.max() {
                lifecycles[index].requestStop()
                await receive { next in
                    if case .ended(let ended, _) = next { return ended == index }
                    return false
                }
            }
            group.cancelAll()
            report.finish()
            if let failure { throw failure }
        }
    }
}

extension ServiceGroup {
    /// Runs `services` (started in order, as `run` does) while `body` runs, then stops them in
    /// reverse and returns what `body` returned: for a caller that uses services for a while
    /// (a tool, a bench, a crash test's driver) rather than until a signal.
    /// - Throws: a service's failure at start (`body` does not run then), `body`'s error, or
    ///   a service's failure while running.
    public static func withRunning<Value: Sendable>(_ services: [any Service], _ body: () async throws -> Value) async throws -> Value {
        let (started, reportStarted) = AsyncStream<Void>.makeStream()
        let (done, finishBody) = AsyncStream<Void>.makeStream()
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { reportStarted.finish() }
                try await ServiceGroup.run(services, whenStarted: { reportStarted.yield() }) {
                    for await _ in done {}
                }
            }
            var iterator = started.makeAsyncIterator()
            guard await iterator.next() != nil else {
                // The group ended before everything started: its failure comes out here.
                try await group.waitForAll()
                throw CancellationError()
            }
            do {
                let value = try await body()
                finishBody.finish()
                try await group.waitForAll()
                return value
            } catch {
                finishBody.finish()
                try? await group.waitForAll()
                throw error
            }
        }
    }
}

/// Waits until the task is cancelled.
public func waitUntilCancelled() async {
    let stream = AsyncStream<Never> { _ in }
    for await _ in stream {}
}
