import CounterCore
import Synchronization
import Testing

/// A service that records when it starts and stops, and can be told to fail at start.
private struct Recorder: Service {
    let name: String
    let events: Events
    var failsAtStart = false

    struct Failure: Error, Equatable { let name: String }

    func run() async throws {
        events.add("start \(name)")
        if failsAtStart { throw Failure(name: name) }
        await waitUntilCancelled()
        // Graceful work after the cancellation: the next layer out must still be running.
        events.add("stop \(name)")
    }
}

private final class Events: Sendable {
    private let list = Mutex<[String]>([])
    func add(_ event: String) { list.withLock { $0.append(event) } }
    var all: [String] { list.withLock { $0 } }
}

@Suite("Service group (no servers)")
struct ServiceGroupTests {
    @Test("the signal stops the services last-started first, each finished before the next")
    func gracefulOrder() async throws {
        let events = Events()
        let (signal, fire) = AsyncStream<Void>.makeStream()
        let group = Task {
            try await ServiceGroup.run([Recorder(name: "write path", events: events), Recorder(name: "http", events: events)]) {
                for await _ in signal { return }
            }
        }
        while events.all.count < 2 { try await Task.sleep(for: .milliseconds(1)) }
        fire.yield()
        try await group.value
        #expect(Set(events.all.prefix(2)) == ["start write path", "start http"])
        #expect(Array(events.all.dropFirst(2)) == ["stop http", "stop write path"])
    }

    @Test("a service that fails at start stops what already started, and the failure comes out")
    func failureAtStart() async throws {
        let events = Events()
        await #expect(throws: Recorder.Failure(name: "http")) {
            try await ServiceGroup.run([Recorder(name: "write path", events: events),
                                        Recorder(name: "http", events: events, failsAtStart: true)]) {
                await waitUntilCancelled()
            }
        }
        #expect(events.all.contains("stop write path"))
        #expect(!events.all.contains("stop http"))
    }

    @Test("an outer service that fails stops the inner ones")
    func outerFailure() async throws {
        let events = Events()
        await #expect(throws: Recorder.Failure(name: "write path")) {
            try await ServiceGroup.run([Recorder(name: "write path", events: events, failsAtStart: true),
                                        Recorder(name: "http", events: events)]) {
                await waitUntilCancelled()
            }
        }
        if events.all.contains("start http") { #expect(events.all.contains("stop http")) }
    }
}
