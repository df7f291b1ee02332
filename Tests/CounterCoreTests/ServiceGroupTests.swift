import CounterCore
import Synchronization
import Testing

/// A service that records when it starts, has started and stops, and can be told to fail at
/// start or while running.
private struct Recorder: Service {
    let name: String
    let events: Events
    var failsAtStart = false
    var failsWhileRunning = false
    /// Sleeps while stopping: a stop is a request, not a cancellation, so it can.
    var sleepsWhileStopping = false

    struct Failure: Error, Equatable { let name: String }

    func run(_ lifecycle: ServiceLifecycle) async throws {
        events.add("start \(name)")
        if failsAtStart { throw Failure(name: name) }
        // Starting takes a moment: the next service must not start before this one has.
        try await Task.sleep(for: .milliseconds(20))
        events.add("started \(name)")
        lifecycle.started()
        if failsWhileRunning {
            try await Task.sleep(for: .milliseconds(20))
            throw Failure(name: name)
        }
        await lifecycle.stopRequested()
        if sleepsWhileStopping { try await Task.sleep(for: .milliseconds(20)) }
        // Graceful work after the request: the next service out must still be running.
        events.add("stop \(name)")
    }
}

private final class Events: Sendable {
    private let list = Mutex<[String]>([])
    func add(_ event: String) { list.withLock { $0.append(event) } }
    var all: [String] { list.withLock { $0 } }
}

// The limit guards against a hang, not a slow machine: beside the other suites of the first
// test invocation, whose threads were once all busy for over a minute, these 20 ms steps took 87 s.
@Suite("Service group (no servers)", .timeLimit(.minutes(3)))
struct ServiceGroupTests {
    @Test("services start in order, each once the one before has started; the signal stops them last-started first, each finished before the next")
    func gracefulOrder() async throws {
        let events = Events()
        let (signal, fire) = AsyncStream<Void>.makeStream()
        let group = Task {
            try await ServiceGroup.run([
                Recorder(name: "write path", events: events, sleepsWhileStopping: true),
                Recorder(name: "http", events: events, sleepsWhileStopping: true),
                Recorder(name: "membership", events: events),
            ]) {
                for await _ in signal { return }
            }
        }
        while events.all.count < 6 { try await Task.sleep(for: .milliseconds(1)) }
        fire.yield()
        try await group.value
        #expect(
            events.all == [
                "start write path", "started write path", "start http", "started http", "start membership",
                "started membership", "stop membership", "stop http", "stop write path",
            ])
    }

    @Test("a service that fails at start stops, in reverse, what already started, starts nothing after it, and the failure comes out")
    func failureAtStart() async throws {
        let events = Events()
        await #expect(throws: Recorder.Failure(name: "http")) {
            try await ServiceGroup.run([
                Recorder(name: "write path", events: events), Recorder(name: "schema", events: events),
                Recorder(name: "http", events: events, failsAtStart: true),
                Recorder(name: "membership", events: events),
            ]) {
                await waitUntilCancelled()
            }
        }
        #expect(
            events.all == [
                "start write path", "started write path", "start schema", "started schema", "start http",
                "stop schema", "stop write path",
            ])
    }

    @Test("a service that fails while running stops the others, last first, and the failure comes out")
    func failureWhileRunning() async throws {
        let events = Events()
        await #expect(throws: Recorder.Failure(name: "write path")) {
            try await ServiceGroup.run([
                Recorder(name: "write path", events: events, failsWhileRunning: true),
                Recorder(name: "http", events: events),
            ]) {
                await waitUntilCancelled()
            }
        }
        #expect(events.all.suffix(1) == ["stop http"])
        #expect(!events.all.contains("stop write path"))
    }

    @Test("withRunning runs the body once every service has started, then stops them in reverse")
    func withRunning() async throws {
        let events = Events()
        let value = try await ServiceGroup.withRunning([Recorder(name: "a", events: events), Recorder(name: "b", events: events)]) {
            events.add("body")
            return 42
        }
        #expect(value == 42)
        #expect(events.all == ["start a", "started a", "start b", "started b", "body", "stop b", "stop a"])
    }

    @Test("withRunning does not run the body when a service cannot start, and throws its failure")
    func withRunningFailure() async throws {
        let events = Events()
        await #expect(throws: Recorder.Failure(name: "b")) {
            try await ServiceGroup.withRunning([Recorder(name: "a", events: events), Recorder(name: "b", events: events, failsAtStart: true)]) {
                events.add("body")
            }
        }
        #expect(events.all == ["start a", "started a", "start b", "stop a"])
    }
}
