import CounterCore

/// The readiness checks' own schedule, a service of the node: the last verdict, which `/metrics`
/// reports, is at most `interval` old even when nothing asks `/readyz`.
public struct ReadinessSchedule: Service {
    /// How often the checks run: the most `counter_ready` may lag behind the node's state.
    public static let interval: Duration = .seconds(5)

    let probe: ReadinessProbe

    public func run(_ lifecycle: ServiceLifecycle) async throws {
        lifecycle.started()
        let probe = probe
        await withDiscardingTaskGroup { group in
            group.addTask { await probe.keepChecking(every: Self.interval) }
            await lifecycle.stopRequested()
            group.cancelAll()
        }
    }
}
