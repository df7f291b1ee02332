import Synchronization

/// Events in the order they happened, from several tasks.
final class OrderLog: Sendable {
    private let list = Mutex<[String]>([])
    func append(_ entry: String) { list.withLock { $0.append(entry) } }
    var entries: [String] { list.withLock { $0 } }
}
