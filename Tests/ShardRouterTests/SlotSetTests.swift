import ShardRouter
import Testing

@Suite("A set of slots: what answers covered, and what they left out")
struct SlotSetTests {
    @Test("ranges in, ranges out; the first slot missing; a union")
    func rangesAndMissing() {
        var set = SlotSet(ranges: [0...5460, 10_923...16_383])
        #expect(set.ranges == [0...5460, 10_923...16_383])
        #expect(set.firstMissing == 5461)
        #expect(set.contains(0) && set.contains(16_383) && !set.contains(5461) && !set.contains(-1) && !set.contains(16_384))
        set.formUnion(SlotSet(ranges: [5461...10_922]))
        #expect(set.firstMissing == nil && set.ranges == [0...16_383])
        #expect(SlotSet().firstMissing == 0 && SlotSet().ranges.isEmpty)
    }

    @Test("single slots, edges of the words, and numbers outside the slots ignored")
    func edges() {
        var set = SlotSet()
        for slot in [63, 64, 127, 16_383] { set.insert(slot) }
        set.insert(16_384)
        set.insert(-3)
        set.insert(-5 ... -1)
        set.insert(16_380...20_000)
        #expect(set.ranges == [63...64, 127...127, 16_380...16_383])
        var all = SlotSet(ranges: [0...16_383])
        #expect(all.firstMissing == nil)
        all = SlotSet(ranges: [0...62, 64...16_383])
        #expect(all.firstMissing == 63)
    }
}
