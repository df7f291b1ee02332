import Synchronization

/// A one-way gate for tests: `wait()` suspends until `open()` is called (at once after it), and
/// `passed` counts the callers that reached it.
public final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>], arrived: Int)>((false, [], 0))

    public init() {}

    /// Callers that called `wait()` so far.
    public var arrived: Int { state.withLock { $0.arrived } }

    /// Whether `open()` was called: a gate also serves as a flag one task raises and others read.
    public var isOpen: Bool { state.withLock { $0.open } }

    public func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state in
                state.arrived += 1
                if state.open { return true }
                state.waiting.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    public func open() {
        let waiting = state.withLock { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}
