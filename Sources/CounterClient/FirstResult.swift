import Foundation

/// Runs two operations and returns whichever result comes first, without waiting for the other:
/// it is cancelled and left to end on its own. (Foundation's lock, not `Mutex`: the library
/// runs on iOS 17.)
// Unchecked Sendable: every stored property is read and written under `lock` only.
final class FirstResult<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Value, Never>?
    private var done = false
    private var tasks: [Task<Void, Never>] = []

    func first(_ one: @escaping @Sendable () async -> Value, _ other: @escaping @Sendable () async -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            lock.withLock { self.continuation = continuation }
            for operation in [one, other] {
                let task = Task { self.finish(await operation()) }
                let finished = lock.withLock {
                    tasks.append(task)
                    return done
                }
                if finished { task.cancel() }
            }
        }
    }

    private func finish(_ value: Value) {
        let (continuation, tasks): (CheckedContinuation<Value, Never>?, [Task<Void, Never>]) = lock.withLock {
            guard !done else { return (nil, []) }
            done = true
            defer { self.continuation = nil }
            return (self.continuation, self.tasks)
        }
        continuation?.resume(returning: value)
        for task in tasks { task.cancel() }
    }
}
