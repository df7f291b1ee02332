/// Lets at most `limit` callers through at once; the rest wait in arrival order. Tests that
/// start servers of their own (an `initdb` is seconds of CPU) pass through one, so that the
/// suites starting together do not starve a 2-core machine all at the same moment.
public actor StartupGate {
    private let limit: Int
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init(limit: Int) {
        precondition(limit > 0)
        self.limit = limit
    }

    /// Runs `body` once fewer than `limit` others are inside.
    public func pass<T: Sendable>(_ body: @Sendable () async throws -> T) async rethrows -> T {
        if running < limit {
            running += 1
        } else {
            // The one leaving hands its place over directly.
            await withCheckedContinuation { waiting.append($0) }
        }
        defer { leave() }
        return try await body()
    }

    private func leave() {
        if waiting.isEmpty {
            running -= 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
