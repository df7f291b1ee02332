import ShardRouter
import TestSupport
import Testing

@Suite("Slot ownership across nodes (pure)")
struct SlotOwnershipTests {
    @Test("the target is contiguous ranges in id order, sizes within one of each other, every slot owned")
    func target() {
        for nodes in [["a"], ["b", "a"], ["n1", "n2", "n3"], (1...7).map { "node-\($0)" }] {
            let target = SlotOwnership.target(liveNodes: Set(nodes))
            #expect(target.owners.allSatisfy { $0 != nil })
            let sizes = nodes.sorted().map { node in target.ranges(of: node).reduce(0) { $0 + $1.count } }
            #expect(sizes.reduce(0, +) == HashSlot.count)
            #expect(sizes.max()! - sizes.min()! <= 1, "\(sizes)")
            #expect(nodes.allSatisfy { target.ranges(of: $0).count == 1 }, "one contiguous range each")
            // In id order: each node's range starts after the previous node's ends.
            let starts = nodes.sorted().map { target.ranges(of: $0)[0].lowerBound }
            #expect(starts == starts.sorted() && starts.first == 0)
        }
        #expect(SlotOwnership.target(liveNodes: []).owners.allSatisfy { $0 == nil })
    }

    @Test("a dead node's slots are taken over at once; hand-offs between live nodes at most the limit at a time")
    func takeoverAndLimit() {
        let three = SlotOwnership.target(liveNodes: ["a", "b", "c"])
        // b dies: its slots go at once, whatever the limit.
        let live: Set<String> = ["a", "c"]
        let moves = three.nextMoves(toward: .target(liveNodes: live), liveNodes: live, maximumMoves: 10)
        let takeovers = moves.filter { !$0.isHandOff(liveNodes: live) }
        #expect(takeovers.count == three.ranges(of: "b").reduce(0) { $0 + $1.count })
        #expect(takeovers.allSatisfy { $0.from == "b" })
        #expect(moves.count - takeovers.count <= 10)
        // A node joins: only hand-offs, never more than the limit.
        let joined: Set<String> = ["a", "b", "c", "d"]
        let joinMoves = three.nextMoves(toward: .target(liveNodes: joined), liveNodes: joined, maximumMoves: 64)
        #expect(joinMoves.count == 64 && joinMoves.allSatisfy { $0.isHandOff(liveNodes: joined) })
        #expect(joinMoves.map(\.slot) == joinMoves.map(\.slot).sorted(), "lowest slots first")
    }

    @Test("from nothing, every slot is claimed at once")
    func firstStart() {
        let moves = SlotOwnership().nextMoves(toward: .target(liveNodes: ["a"]), liveNodes: ["a"], maximumMoves: 1)
        #expect(moves.count == HashSlot.count && moves.allSatisfy { $0.from == nil && $0.to == "a" })
    }

    @Test("random joins, leaves and deaths: stepping converges on the target, no step exceeds the limit, no live-to-live move skips the limit")
    func converges() {
        var generator = SeededGenerator(seed: 7)
        var ownership = SlotOwnership()
        var live: Set<String> = []
        let names = (1...6).map { "node-\($0)" }
        for _ in 0..<40 {
            // Change membership: a join or a departure.
            let name = names[Int.random(in: 0..<names.count, using: &generator)]
            if live.contains(name) && live.count > 1 { live.remove(name) } else { live.insert(name) }
            let target = SlotOwnership.target(liveNodes: live)
            let limit = Int.random(in: 1...2_000, using: &generator)
            var steps = 0
            while ownership != target {
                let moves = ownership.nextMoves(toward: target, liveNodes: live, maximumMoves: limit)
                #expect(!moves.isEmpty, "no progress")
                #expect(moves.filter { $0.isHandOff(liveNodes: live) }.count <= limit)
                #expect(Set(moves.map(\.slot)).count == moves.count, "a slot moves once per step")
                ownership = ownership.applying(moves)
                // After the first step nobody owns a slot but live nodes.
                #expect(ownership.owners.allSatisfy { $0.map(live.contains) ?? false })
                steps += 1
                if steps > HashSlot.count { break }
            }
            #expect(ownership == target)
        }
    }
}
