import CounterCore
import Persistence

/// The requests of `GET /v1/events?wait=S` waiting for an event after their cursor. While any
/// waits, one loop per node reads the outbox's clock every `interval` (one primary-key read,
/// however many consumers wait) — and at once when this node's flush commits (`wake`) — and
/// wakes those it has an event for, and those whose time is up. Other nodes' commits are seen
/// at the next interval.
actor EventWatch {
    private struct Waiter {
        let after: Int64
        let deadline: ContinuousClock.Instant
        let continuation: CheckedContinuation<Void, Never>
    }

    private let events: LikeEvents
    private var interval: Duration
    /// Rung by this node's flush commits; the polling loop sleeps on it.
    private let wake: LoopAlarm
    /// Starts the polling loop on the API's request tasks; `false` once those have stopped.
    private let start: @Sendable (@escaping @Sendable () async -> Void) -> Bool
    private var waiters: [Int: Waiter] = [:]
    private var nextWaiter = 0
    private var polling = false
    private var released = false

    init(
        events: LikeEvents, interval: Duration = .milliseconds(20), wake: LoopAlarm = LoopAlarm(),
        start: @escaping @Sendable (@escaping @Sendable () async -> Void) -> Bool
    ) {
        self.events = events
        self.interval = interval
        self.wake = wake
        self.start = start
    }

    /// Reads the outbox's clock every `interval` from the next turn of the loop on. Only tests
    /// call it: they set an interval longer than their long polls, so that only a ring of `wake`
    /// can answer one early — at 20 ms the clock's poll answers as fast, and hides a flush
    /// commit that never rings.
    func setInterval(_ interval: Duration) {
        self.interval = interval
    }

    /// Returns once an event after `after` was committed, at `deadline`, or when the node starts
    /// shutting down — whichever comes first. The caller reads the outbox again after it.
    func wait(after: Int64, until deadline: ContinuousClock.Instant) async {
        guard !released else { return }
        await withCheckedContinuation { continuation in
            waiters[nextWaiter] = Waiter(after: after, deadline: deadline, continuation: continuation)
            nextWaiter += 1
            if !polling {
                polling = start { await self.poll() }
                if !polling { releaseAll() }
            }
        }
    }

    /// Wakes every waiter and lets none wait from now on: the node is shutting down, and a long
    /// poll must not hold its exit.
    func releaseAll() {
        released = true
        for waiter in waiters.values { waiter.continuation.resume() }
        waiters = [:]
    }

    private func poll() async {
        while !waiters.isEmpty {
            // A failed read wakes no one early; the deadlines still hold.
            let newest = try? await events.clock().lastID
            let now = ContinuousClock.now
            for (key, waiter) in waiters where waiter.deadline <= now || (newest ?? Int64.min) > waiter.after {
                waiters.removeValue(forKey: key)
                waiter.continuation.resume()
            }
            if waiters.isEmpty { break }
            await wake.sleep(until: .now + interval)
            // The API's tasks are cancelled: answer everyone now rather than spin until their deadlines.
            if Task.isCancelled { releaseAll() }
        }
        polling = false
    }
}
