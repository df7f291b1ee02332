import NodeCluster
import ShardRouter
import Testing

@Suite("Membership rounds (pure)")
struct MembershipRoundTests {
    typealias Node = MembershipRound.Node
    typealias Slot = MembershipRound.Slot

    static let unowned = Array(repeating: Slot(owner: nil, incarnation: nil, epoch: 0), count: HashSlot.count)
    static let nothingHeld = [Int64?](repeating: nil, count: HashSlot.count)

    static func owned(by owner: String, incarnation: Int64, epoch: Int64 = 7) -> [Slot] {
        Array(repeating: Slot(owner: owner, incarnation: incarnation, epoch: epoch), count: HashSlot.count)
    }

    @Test("a node alone claims every unowned slot, each at the epoch it saw")
    func aloneClaimsAll() {
        let round = MembershipRound.plan(
            me: "a", incarnation: 1, nodes: [Node(id: "a", incarnation: 1, isLive: true)],
            slots: Self.unowned, held: Self.nothingHeld, maximumMoves: 16)
        #expect(round.claims.count == HashSlot.count)
        #expect(round.claims.allSatisfy { $0.expectedEpoch == 0 })
        #expect(round.handOffs.isEmpty && round.adopt.isEmpty && round.drop.isEmpty)
    }

    @Test(
        "after its own renewals failed (PostgreSQL away for everyone), a node claims no lapsed node's slots and hands none over, but still adopts and drops what PostgreSQL says"
    )
    func noMovesAfterAnOutage() {
        // b's lease ran out during the outage; a is back first. Its own slots (the first half)
        // are held; the second half is b's.
        let nodes = [Node(id: "a", incarnation: 1, isLive: true), Node(id: "b", incarnation: 2, isLive: false)]
        let half = HashSlot.count / 2
        var slots = Self.owned(by: "b", incarnation: 2)
        var held = Self.nothingHeld
        for slot in 0..<half {
            slots[slot] = Slot(owner: "a", incarnation: 1, epoch: 7)
            held[slot] = 7
        }
        // A slot PostgreSQL gives a anew (a hand-off finished before the outage) is adopted; one
        // a holds that PostgreSQL gives b is dropped.
        held[half] = 5
        slots[1] = Slot(owner: "a", incarnation: 1, epoch: 9)
        let waiting = MembershipRound.plan(
            me: "a", incarnation: 1, nodes: nodes, slots: slots, held: held, maximumMoves: 100, mayMoveSlots: false)
        #expect(waiting.claims.isEmpty && waiting.handOffs.isEmpty)
        #expect(waiting.adopt == [1: 9] && waiting.drop == [UInt16(half)])
        // A lease later b has still not renewed: it is gone, and a takes its slots.
        let later = MembershipRound.plan(me: "a", incarnation: 1, nodes: nodes, slots: slots, held: held, maximumMoves: 100)
        #expect(later.claims.count == HashSlot.count - half)
    }

    @Test("a joining node waits while the owner hands it its range, at most maximumMoves at a time; then it adopts them")
    func joinIsHandedOff() {
        let nodes = [Node(id: "a", incarnation: 1, isLive: true), Node(id: "b", incarnation: 2, isLive: true)]
        let slots = Self.owned(by: "a", incarnation: 1)
        let heldByA = [Int64?](repeating: 7, count: HashSlot.count)
        let a = MembershipRound.plan(me: "a", incarnation: 1, nodes: nodes, slots: slots, held: heldByA, maximumMoves: 100)
        #expect(a.handOffs.count == 100)
        #expect(a.handOffs.allSatisfy { $0.to == "b" && $0.toIncarnation == 2 && $0.epoch == 7 })
        #expect(a.handOffs.map(\.slot) == Array(8192..<8292).map { UInt16($0) }, "b's target is the upper half, lowest slots first")
        #expect(a.claims.isEmpty && a.adopt.isEmpty && a.drop.isEmpty)
        let b = MembershipRound.plan(me: "b", incarnation: 2, nodes: nodes, slots: slots, held: Self.nothingHeld, maximumMoves: 100)
        #expect(b == MembershipRound(), "a live owner's slots are its to hand off")

        // After a's hand-off changed the rows: b adopts what PostgreSQL gives it; a drops them.
        var moved = slots
        for slot in 8192..<8292 { moved[slot] = Slot(owner: "b", incarnation: 2, epoch: 100 + Int64(slot)) }
        let adopted = MembershipRound.plan(me: "b", incarnation: 2, nodes: nodes, slots: moved, held: Self.nothingHeld, maximumMoves: 100)
        #expect(adopted.adopt.count == 100)
        #expect(adopted.adopt[8192] == 8292)
        let dropped = MembershipRound.plan(me: "a", incarnation: 1, nodes: nodes, slots: moved, held: heldByA, maximumMoves: 100)
        #expect(dropped.drop == Set((8192..<8292).map { UInt16($0) }))
        #expect(dropped.handOffs.first?.slot == 8292)
    }

    @Test("a dead node's slots are claimed at once by the live nodes the target gives them to")
    func deadOwnerTakenOver() {
        let nodes = [
            Node(id: "a", incarnation: 1, isLive: true), Node(id: "b", incarnation: 2, isLive: false),
            Node(id: "c", incarnation: 3, isLive: true),
        ]
        var slots = Self.owned(by: "b", incarnation: 2)
        for slot in 0..<8192 { slots[slot] = Slot(owner: "a", incarnation: 1, epoch: 5) }
        let held: [Int64?] = (0..<HashSlot.count).map { $0 < 8192 ? 5 : nil }
        let a = MembershipRound.plan(me: "a", incarnation: 1, nodes: nodes, slots: slots, held: held, maximumMoves: 1)
        let c = MembershipRound.plan(me: "c", incarnation: 3, nodes: nodes, slots: slots, held: Self.nothingHeld, maximumMoves: 1)
        #expect(a.claims.isEmpty, "a's target is the lower half, which it has")
        #expect(c.claims.count == 8192, "takeovers are not rate-limited")
        #expect(c.claims.allSatisfy { $0.expectedEpoch == 7 })
        #expect(a.handOffs.isEmpty)
    }

    @Test("a restart under the same id claims what its previous incarnation held, as a takeover")
    func restartFencesOldIncarnation() {
        let nodes = [Node(id: "a", incarnation: 9, isLive: true)]
        let round = MembershipRound.plan(
            me: "a", incarnation: 9, nodes: nodes, slots: Self.owned(by: "a", incarnation: 4),
            held: Self.nothingHeld, maximumMoves: 1)
        #expect(round.claims.count == HashSlot.count)
        #expect(round.adopt.isEmpty, "rows of an older incarnation are not this process's to serve")
    }

    @Test("what a node holds that PostgreSQL gives another owner or epoch is dropped; what it holds at the same epoch is kept")
    func dropsLostSlots() {
        let nodes = [Node(id: "a", incarnation: 1, isLive: true), Node(id: "b", incarnation: 2, isLive: true)]
        var slots = Self.owned(by: "a", incarnation: 1, epoch: 3)
        for slot in 8192..<HashSlot.count { slots[slot] = Slot(owner: "b", incarnation: 2, epoch: 4) }
        var held = [Int64?](repeating: 3, count: HashSlot.count)
        held[5] = 2 // a stale epoch of a slot it still owns: adopted again at the current one
        let round = MembershipRound.plan(me: "a", incarnation: 1, nodes: nodes, slots: slots, held: held, maximumMoves: 10)
        #expect(round.drop == Set((8192..<HashSlot.count).map { UInt16($0) }))
        #expect(round.adopt == [5: 3])
        #expect(round.handOffs.isEmpty && round.claims.isEmpty)

        // Held at the right epoch but still being acquired (a round before failed to drain it):
        // adopted again.
        var ready = [Bool](repeating: true, count: HashSlot.count)
        ready[6] = false
        let retried = MembershipRound.plan(me: "a", incarnation: 1, nodes: nodes, slots: slots, held: held, ready: ready, maximumMoves: 10)
        #expect(retried.adopt == [5: 3, 6: 3])
    }

    @Test("a leaving or draining node hands everything to the others, without the rate limit; alone, it hands nothing")
    func leavingAndDraining() {
        let nodes = [Node(id: "a", incarnation: 1, isLive: true), Node(id: "b", incarnation: 2, isLive: true)]
        let held = [Int64?](repeating: 7, count: HashSlot.count)
        let leaving = MembershipRound.plan(
            me: "a", incarnation: 1, nodes: nodes, slots: Self.owned(by: "a", incarnation: 1),
            held: held, maximumMoves: 10, leaving: true)
        #expect(leaving.handOffs.count == HashSlot.count)
        #expect(leaving.handOffs.allSatisfy { $0.to == "b" })

        let drained = [Node(id: "a", incarnation: 1, isLive: true, isDraining: true), Node(id: "b", incarnation: 2, isLive: true)]
        let draining = MembershipRound.plan(
            me: "a", incarnation: 1, nodes: drained, slots: Self.owned(by: "a", incarnation: 1),
            held: held, maximumMoves: 10)
        #expect(draining.handOffs.count == 10, "an operator's drain moves at the configured pace")

        let alone = MembershipRound.plan(
            me: "a", incarnation: 1, nodes: [nodes[0]], slots: Self.owned(by: "a", incarnation: 1),
            held: held, maximumMoves: 10, leaving: true)
        #expect(alone == MembershipRound())
    }
}
