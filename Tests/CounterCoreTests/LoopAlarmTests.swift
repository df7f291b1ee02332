import Testing
import CounterCore

@Suite("Loop alarm", .timeLimit(.minutes(1)))
struct LoopAlarmTests {
    @Test("a ring wakes a sleep with no deadline, whether it comes before or during the sleep")
    func ringWakes() async {
        let early = LoopAlarm()
        early.ring()
        await early.sleep(until: nil)

        let alarm = LoopAlarm()
        let sleeper = Task { await alarm.sleep(until: nil) }
        alarm.ring()
        await sleeper.value
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
    func cancellation() async {
        let alarm = LoopAlarm()
        let sleeper = Task { await alarm.sleep(until: nil) }
        sleeper.cancel()
        await sleeper.value
        let timed = Task { await alarm.sleep(until: ContinuousClock.now + .seconds(3_600)) }
        timed.cancel()
        await timed.value
        // Neither left a ring behind.
        let start = ContinuousClock.now
        await alarm.sleep(until: start + .milliseconds(10))
        #expect(ContinuousClock.now - start >= .milliseconds(10))
    }
}
