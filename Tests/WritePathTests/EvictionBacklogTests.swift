import Testing

@testable import WritePath

/// The pace of eviction when many posts go idle at once, on the shard's machine alone (no I/O):
/// a round that evicts its whole quota is followed by the next one soon, not after the usual
/// interval, so a million idle posts do not take hours to leave Redis.
@Suite("Eviction of a backlog of idle posts (pure)")
struct EvictionBacklogTests {
    @Test("a round that evicts a full quota is followed by the next one within 50 ms; a partial round waits the usual interval")
    func fullRoundsFollowEachOther() throws {
        var configuration = WritePathConfiguration()
        configuration.hotIdle = .seconds(2) // rounds every 500 ms
        configuration.flushInterval = .seconds(3_600)
        configuration.flushMaxAge = .seconds(3_600)
        var now = ContinuousClock.now
        var machine = ShardStateMachine(index: 0, slotRange: 0..<16_384, configuration: configuration, isFenced: false, now: now)
        var actions: [ShardStateMachine.Action] = []
        machine.handle(.deadLettersRead([], startedAt: now), now: now, into: &actions)
        let posts = (1...Int64(2_500)).map { 7_000_000 + $0 }
        machine.handle(.discovered(posts), now: now, into: &actions)
        now += .seconds(3)
        // Any event may start a round (between batches): each one's actions are looked at. One
        // post touched just now stays, so the rounds go on after the backlog.
        func unloading(_ actions: [ShardStateMachine.Action]) -> [Int64] {
            actions.flatMap { action -> [Int64] in
                if case .unloadPosts(let posts, _, .evicted(.idle)) = action { return posts }
                return []
            }
        }
        var timers = ModelTimers()
        actions = []
        machine.handle(.discovered([9_000_000]), now: now, into: &actions)
        for action in actions { timers.take(action) }
        var round = unloading(actions)
        var rounds: [(evicted: Int, nextIn: Duration)] = []
        var evicted: Set<Int64> = []
        for _ in 0..<20 where evicted.count < posts.count {
            if round.isEmpty {
                let next = try #require(timers.next, "the next round is timed")
                now = max(now, next.at)
                actions = []
                for timer in timers.fire(at: now) { machine.handle(.timerFired(timer), now: now, into: &actions) }
                for action in actions { timers.take(action) }
                round = unloading(actions)
                continue
            }
            evicted.formUnion(round)
            actions = []
            machine.handle(.postsUnloaded(.evicted(.idle), failed: [], fenced: []), now: now, into: &actions)
            for action in actions { timers.take(action) }
            guard let next = timers.deadlines[.eviction] else {
                Issue.record("no next round")
                return
            }
            rounds.append((round.count, next - now))
            round = unloading(actions)
        }
        #expect(evicted == Set(posts))
        #expect(rounds.map(\.evicted) == [1_000, 1_000, 500])
        #expect(rounds.prefix(2).allSatisfy { $0.nextIn <= .milliseconds(50) }, "\(rounds)")
        #expect(rounds.last.map { $0.nextIn == .milliseconds(500) } == true, "\(rounds)")
    }
}
