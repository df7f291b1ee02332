import CounterWire
import Testing

@testable import NodeAPI

@Suite("A cluster-wide operator call's answers merged: whole only when every node answered and every slot had an owner (pure)")
struct ClusterAdminMergeTests {
    static func node<Answer>(_ id: String, _ answer: Answer?) -> ClusterNodeAnswer<Answer> {
        ClusterNodeAnswer(nodeID: id, url: "http://\(id)", answer: answer, error: answer == nil ? "not reached: connection refused" : nil)
    }

    @Test("flush: flushed only when every node flushed, none was missing and every slot was served")
    func flush() {
        let both = [Self.node("a", FlushResult(flushed: true, pendingChanges: 2)), Self.node("b", FlushResult(flushed: true, pendingChanges: 3))]
        let whole = ClusterAdminMerge.flush(wait: true, both, unserved: [])
        #expect(whole.flushed && whole.complete && whole.pendingChanges == 5 && whole.unservedSlots.isEmpty)
        #expect(!ClusterAdminMerge.flush(wait: false, both, unserved: []).flushed, "a flush that did not wait flushed nothing yet")
        let missing = ClusterAdminMerge.flush(wait: true, [both[0], Self.node("c", nil as FlushResult?)], unserved: [])
        #expect(!missing.flushed && !missing.complete && missing.pendingChanges == 2)
        let unserved = ClusterAdminMerge.flush(wait: true, both, unserved: [100...199, 500...500])
        #expect(!unserved.flushed && !unserved.complete && unserved.unservedSlots == [[100, 199], [500, 500]])
    }

    @Test("stats: the total adds the nodes' totals up (ages are maxima); a node without an answer leaves it incomplete")
    func statistics() {
        func stats(_ pending: Int, _ age: Double) -> ServiceStatistics {
            var total = ShardStatistics()
            total.pendingChanges = pending
            total.oldestPendingAgeSeconds = age
            return ServiceStatistics(
                shards: [], total: total,
                redis: RedisStatistics(
                    mode: "single", mapRefreshes: 0, secondsSinceMapRefresh: nil,
                    lastMapError: nil, nodes: []), residentMemoryBytes: nil)
        }
        let merged = ClusterAdminMerge.statistics(
            [Self.node("a", stats(4, 1.5)), Self.node("b", stats(6, 0.5)), Self.node("c", nil as ServiceStatistics?)],
            unserved: [])
        #expect(merged.total.pendingChanges == 10 && merged.total.oldestPendingAgeSeconds == 1.5 && merged.total.shard == nil)
        #expect(!merged.complete && merged.nodes.map(\.nodeID) == ["a", "b", "c"])
    }

    @Test("reconcile: reports added up, drift in post order; the posts of a node that did not answer and of unowned slots are unchecked")
    func reconcile() {
        var a = ReconcileReport()
        a.checked = 2
        a.drifted = [.init(postID: 9, likesCount: 1, likesRows: 2)]
        var b = ReconcileReport()
        b.checked = 1
        b.drifted = [.init(postID: 3, likesCount: 5, likesRows: 4)]
        b.repaired = 1
        let merged = ClusterAdminMerge.reconcile(
            [Self.node("a", a), Self.node("b", b), Self.node("c", nil as ReconcileReport?)],
            asked: ["a": [9, 10], "b": [3], "c": [7, 8]], unowned: [42], nextAfter: 10, unserved: [])
        #expect(merged.report.checked == 3 && merged.report.repaired == 1 && merged.report.nextAfter == 10)
        #expect(merged.report.drifted.map(\.postID) == [3, 9])
        #expect(merged.uncheckedPosts == [7, 8, 42] && !merged.complete)
        let whole = ClusterAdminMerge.reconcile([Self.node("a", a)], asked: ["a": [9, 10]], unowned: [], nextAfter: nil, unserved: [])
        #expect(whole.complete && whole.uncheckedPosts.isEmpty)
    }

    @Test("reconcile with reactions: each kind's drift merged in post and kind order, repairs added up; with likes only the kinds stay absent")
    func reconcileKinds() {
        var a = ReconcileReport()
        a.kindsDrifted = [.init(postID: 9, kind: "love", count: 3, rows: 2)]
        a.redisKindsDrifted = [.init(postID: 9, kind: "wow", redisCount: 1, rows: 0)]
        a.kindsRepaired = 1
        var b = ReconcileReport()
        b.kindsDrifted = [.init(postID: 9, kind: "haha", count: 0, rows: 1), .init(postID: 2, kind: "sad", count: 1, rows: 0)]
        b.redisKindsDrifted = []
        b.kindsRepaired = 2
        let merged = ClusterAdminMerge.reconcile([Self.node("a", a), Self.node("b", b)], asked: [:], unowned: [], nextAfter: nil, unserved: [])
        #expect(merged.report.kindsDrifted?.map { "\($0.postID) \($0.kind)" } == ["2 sad", "9 haha", "9 love"])
        #expect(merged.report.redisKindsDrifted?.map(\.kind) == ["wow"] && merged.report.kindsRepaired == 3)
        let likesOnly = ClusterAdminMerge.reconcile(
            [Self.node("a", ReconcileReport())], asked: [:], unowned: [], nextAfter: nil, unserved: [])
        #expect(likesOnly.report.kindsDrifted == nil && likesOnly.report.redisKindsDrifted == nil && likesOnly.report.kindsRepaired == nil)
    }

    @Test("replay: outcomes merged in id order; a silent owner's letters and unowned ones fail (and stay), named")
    func replay() {
        let a = ReplayResult(replayed: ["20-0", "3-0"], superseded: ["5-0"], failed: [])
        let merged = ClusterAdminMerge.replay(
            [Self.node("a", a), Self.node("b", nil as ReplayResult?)],
            asked: ["a": ["3-0", "5-0", "20-0"], "b": ["4-0"]], unowned: ["1-0"], unserved: [7...7])
        #expect(merged.result.replayed == ["3-0", "20-0"] && merged.result.superseded == ["5-0"])
        #expect(merged.result.failed.map(\.id) == ["1-0", "4-0"])
        #expect(merged.result.failed[0].reason.contains("no live node owns") && merged.result.failed[1].reason.contains("node b"))
        #expect(!merged.complete && merged.unservedSlots == [[7, 7]])
    }
}
