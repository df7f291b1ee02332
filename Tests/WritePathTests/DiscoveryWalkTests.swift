import Testing

@testable import WritePath

/// The sweeper's walk of Redis's hydration markers against evictions that run meanwhile, on the
/// shard's machine alone (no I/O): a page the walk read before a post's deletion arrives after
/// it, and must not bring the evicted post back as hot.
@Suite("The hot-set walk and evictions meanwhile (pure)")
struct DiscoveryWalkTests {
    @Test("a post evicted after the walk began is not tracked again from the walk's page; after the walk, discoveries count again")
    func evictedDuringWalkStaysCold() throws {
        var configuration = WritePathConfiguration()
        configuration.hotIdle = .seconds(2)
        configuration.flushInterval = .seconds(3_600)
        configuration.flushMaxAge = .seconds(3_600)
        var now = ContinuousClock.now
        var machine = ShardStateMachine(index: 0, slotRange: 0..<16_384, configuration: configuration, isFenced: false, now: now)
        var actions: [ShardStateMachine.Action] = []
        machine.handle(.deadLettersRead([], startedAt: now), now: now, into: &actions)
        let posts: [Int64] = [7_000_001, 7_000_002, 7_000_003]
        machine.handle(.discovered(posts), now: now, into: &actions)
        #expect(machine.currentStats(now: now).hotPosts == 3)

        // The posts go idle; a round starts their eviction.
        now += .seconds(3)
        actions = []
        machine.handle(.timerFired(.eviction), now: now, into: &actions)
        let unloading = actions.flatMap { action -> [Int64] in
            if case .unloadPosts(let posts, _, .evicted(.idle)) = action { return posts }
            return []
        }
        #expect(Set(unloading) == Set(posts))

        // A walk begins and reads the markers before the deletion; the deletion ends; then the
        // walk's page arrives.
        machine.handle(.discoveryBegan, now: now, into: &actions)
        machine.handle(.postsUnloaded(.evicted(.idle), failed: [], fenced: []), now: now, into: &actions)
        #expect(machine.currentStats(now: now).hotPosts == 0)
        machine.handle(.discovered(posts), now: now, into: &actions)
        #expect(machine.currentStats(now: now).hotPosts == 0, "the walk's stale page brought evicted posts back")
        // A post the walk finds that was not evicted meanwhile is tracked.
        machine.handle(.discovered([7_000_009]), now: now, into: &actions)
        #expect(machine.currentStats(now: now).hotPosts == 1)
        machine.handle(.discoveryEnded, now: now, into: &actions)

        // The next walk finds the first post in Redis again (loaded since): tracked.
        machine.handle(.discoveryBegan, now: now, into: &actions)
        machine.handle(.discovered([posts[0]]), now: now, into: &actions)
        machine.handle(.discoveryEnded, now: now, into: &actions)
        #expect(machine.currentStats(now: now).hotPosts == 2)
    }
}
