import CounterCore

/// The API's requests that wait for more than the write path's answer (reads of PostgreSQL,
/// forwarding, admin work): each runs as a child task of the API's service, so the node's
/// lifecycle owns every one. The service starts first and stops last — after the write path,
/// which by then has answered whatever these requests still waited for.
final class RequestTasks: Sendable {
    private let work: AsyncStream<@Sendable () async -> Void>
    private let queue: AsyncStream<@Sendable () async -> Void>.Continuation

    init() {
        (work, queue) = AsyncStream<@Sendable () async -> Void>.makeStream()
    }

    /// Runs `request` as a child task of `run`; `false` once the service has stopped (nothing
    /// runs then).
    func start(_ request: @escaping @Sendable () async -> Void) -> Bool {
        if case .terminated = queue.yield(request) { return false }
        return true
    }

    /// Runs the requests until asked to stop, then waits for those under way.
    func run(_ lifecycle: ServiceLifecycle) async {
        lifecycle.started()
        let queue = self.queue
        await withDiscardingTaskGroup { group in
            group.addTask {
                await lifecycle.stopRequested()
                queue.finish()
            }
            for await request in work { group.addTask { await request() } }
        }
    }
}
