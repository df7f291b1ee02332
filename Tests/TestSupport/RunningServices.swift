import CounterCore

/// Services a test keeps running across calls, outside any task tree that could own them:
/// started in order (as a node's group starts them) on a task of their own, and stopped, in
/// reverse, by `stop()`.
public final class RunningServices: Sendable {
    private let stopping: AsyncStream<Void>.Continuation
    private let group: Task<Void, Error>

    private init(stopping: AsyncStream<Void>.Continuation, group: Task<Void, Error>) {
        self.stopping = stopping
        self.group = group
    }

    /// Starts `services` and returns once every one has started.
    /// - Throws: the failure of a service that could not start (those before it are stopped).
    public static func start(_ services: [any Service]) async throws -> RunningServices {
        let (started, reportStarted) = AsyncStream<Void>.makeStream()
        let (stop, stopping) = AsyncStream<Void>.makeStream()
        let group = Task {
            defer { reportStarted.finish() }
            try await ServiceGroup.run(services, whenStarted: { reportStarted.yield() }) {
                for await _ in stop {}
            }
        }
        var iterator = started.makeAsyncIterator()
        guard await iterator.next() != nil else {
            try await group.value
            throw CancellationError()
        }
        return RunningServices(stopping: stopping, group: group)
    }

    /// Stops the services, last first, and returns once all have stopped.
    /// - Throws: a service's failure.
    public func stop() async throws {
        stopping.finish()
        try await group.value
    }
}
