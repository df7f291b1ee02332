/// A long-running part of the node (the write path, the HTTP server), in the manner of
/// swift-service-lifecycle: `run()` works until the task running it is cancelled, then shuts
/// down gracefully — finishing what it accepted — and returns.
public protocol Service: Sendable {
    /// Works until cancelled, then stops gracefully and returns.
    /// - Throws: when the service cannot start, or fails for good while running.
    func run() async throws
}

/// Runs services together, in layers: all start at once, and they stop last first, so a service
/// may rely on the ones before it while it stops (the HTTP server finishes its requests before
/// the write path drains). What must be ready before another service starts is prepared before
/// the group (the node recovers its write path first). The group ends when `until` returns (a shutdown
/// signal) or any service fails; then every service is cancelled, last first, each awaited
/// before the one before it. A service that fails at start thereby stops what already started.
public enum ServiceGroup {
    /// - Throws: the first failure of a service, after all have stopped.
    public static func run(_ services: [any Service], until: @escaping @Sendable () async -> Void) async throws {
        try await runLayers(services[...], until: until)
    }

    private struct InnerLayersEnded: Error {}

    private static func runLayers(_ services: ArraySlice<any Service>, until: @escaping @Sendable () async -> Void) async throws {
        guard let outer = services.first else {
            await until()
            return
        }
        let inner = services.dropFirst()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await outer.run() }
            group.addTask {
                try await runLayers(inner, until: until)
                throw InnerLayersEnded()
            }
            var failure: (any Error)?
            do {
                // Whichever ends first: the inner layers (after the signal, or a failure there),
                // or the outer service (it failed, or ended by itself).
                try await group.next()
            } catch is InnerLayersEnded {
            } catch {
                failure = error
            }
            // The inner layers stop first (cancelling their task cancels their groups, each of
            // which stops its own inner layers before its service), then the outer service.
            group.cancelAll()
            while true {
                do {
                    guard try await group.next() != nil else { break }
                } catch is InnerLayersEnded {
                } catch is CancellationError {
                } catch {
                    failure = failure ?? error
                }
            }
            if let failure { throw failure }
        }
    }
}

/// Waits until the task is cancelled.
public func waitUntilCancelled() async {
    let stream = AsyncStream<Never> { _ in }
    for await _ in stream {}
}
