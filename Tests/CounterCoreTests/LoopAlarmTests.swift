import CounterCore
import Testing

@Suite("Loop alarm", .timeLimit(.minutes(1)))
struct LoopAlarmTests {
    /// Waits (up to 30 s, however busy the machine) until a loop sleeps on `alarm`.
    static func waitUntilAsleep(_ alarm: LoopAlarm) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !alarm.hasSleeper && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        try #require(alarm.hasSleeper, "the loop never went to sleep")
    }

    /// Sleeps on `alarm` with no deadline in a task of its own, does `act` once it sleeps, and
    /// says whether the sleep ended before the test gave up on it (after 30 s, by cancelling it).
    static func sleepEndsBeforeGivingUp(_ alarm: LoopAlarm, act: () -> Void) async throws -> Bool {
        let sleeper = Task { () -> Bool in
            await alarm.sleep(until: nil)
            return !Task.isCancelled
        }
        try await waitUntilAsleep(alarm)
        act()
        let givingUp = Task {
            try await Task.sleep(for: .seconds(30))
            sleeper.cancel()
        }
        let ended = await sleeper.value
        givingUp.cancel()
        return ended
    }

    @Test("a ring wakes a sleep with no deadline, whether it comes before or during the sleep")
    func ringWakes() async throws {
        // Before: the ring is kept, and the sleep returns at once.
        let early = LoopAlarm()
        early.ring()
        await early.sleep(until: nil)
        #expect(!early.hasSleeper)

        // During: rung only once the loop sleeps (a ring before that would be kept, the case
        // above); the ring, not the test giving up, must end the sleep.
        let alarm = LoopAlarm()
        let woken = try await Self.sleepEndsBeforeGivingUp(alarm) { alarm.ring() }
        #expect(woken, "the ring did not wake the sleeping loop")
        #expect(!alarm.hasSleeper)
    }

    @Test("a ring is kept once: the sleep after the one it ended lasts until its deadline")
    func ringKeptOnce() async {
        let alarm = LoopAlarm()
        alarm.ring()
        alarm.ring()
        await alarm.sleep(until: nil)
        let start = ContinuousClock.now
        await alarm.sleep(until: start + .milliseconds(20))
        #expect(ContinuousClock.now - start >= .milliseconds(20))
    }

    @Test("a sleep ends at its deadline, at once when it is past")
    func deadline() async {
        let alarm = LoopAlarm()
        await alarm.sleep(until: ContinuousClock.now - .seconds(1))
        let start = ContinuousClock.now
        await alarm.sleep(until: start + .milliseconds(20))
        #expect(ContinuousClock.now - start >= .milliseconds(20))
    }

    @Test("cancelling the sleeping task ends its sleep, and a cancelled task does not sleep")
    func cancellation() async throws {
        let alarm = LoopAlarm()
        // Cancelled while it sleeps, with no deadline and with a far one.
        let sleeper = Task { await alarm.sleep(until: nil) }
        try await Self.waitUntilAsleep(alarm)
        sleeper.cancel()
        await sleeper.value
        let timed = Task { await alarm.sleep(until: ContinuousClock.now + .seconds(3_600)) }
        try await Self.waitUntilAsleep(alarm)
        timed.cancel()
        await timed.value
        // Cancelled before it sleeps: the sleep returns at once.
        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await alarm.sleep(until: nil)
        }
        await cancelledFirst.value
        // None left a ring behind.
        let start = ContinuousClock.now
        await alarm.sleep(until: start + .milliseconds(10))
        #expect(ContinuousClock.now - start >= .milliseconds(10))
    }
}
