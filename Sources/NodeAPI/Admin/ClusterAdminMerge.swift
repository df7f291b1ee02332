import CounterWire
import Persistence

/// The nodes' answers to a cluster-wide operator call, merged into one (`ClusterAdmin`). An
/// answer is `complete` only when every node asked answered and no slot was without a live
/// owner; what a missing node or slot leaves out is named, never dropped silently. Pure.
enum ClusterAdminMerge {
    static func flush(wait: Bool, _ nodes: [ClusterNodeAnswer<FlushResult>], unserved: [ClosedRange<Int>]) -> ClusterFlushResult {
        let complete = nodes.allSatisfy { $0.answer != nil } && unserved.isEmpty
        return ClusterFlushResult(
            flushed: wait && complete && nodes.allSatisfy { $0.answer?.flushed == true },
            pendingChanges: nodes.reduce(0) { $0 + ($1.answer?.pendingChanges ?? 0) },
            complete: complete, unservedSlots: wire(unserved), nodes: nodes)
    }

    static func statistics(_ nodes: [ClusterNodeAnswer<ServiceStatistics>], unserved: [ClosedRange<Int>]) -> ClusterStatistics {
        ClusterStatistics(
            total: StatisticsAnswer.total(nodes.compactMap { $0.answer?.total }),
            complete: nodes.allSatisfy { $0.answer != nil } && unserved.isEmpty,
            unservedSlots: wire(unserved), nodes: nodes)
    }

    /// - Parameters:
    ///   - asked: the posts each node was asked to check (by node id).
    ///   - unowned: posts whose slot had no live owner.
    ///   - nextAfter: where the next page of all posts starts, when this was a full page.
    static func reconcile(
        _ nodes: [ClusterNodeAnswer<ReconcileReport>], asked: [String: [Int64]], unowned: [Int64],
        nextAfter: Int64?, unserved: [ClosedRange<Int>]
    ) -> ClusterReconcileReport {
        var report = ReconcileReport()
        var unchecked = unowned
        for node in nodes {
            guard let answer = node.answer else {
                unchecked += asked[node.nodeID] ?? []
                continue
            }
            report.checked += answer.checked
            report.drifted += answer.drifted
            report.redisDrifted += answer.redisDrifted
            report.redisPending += answer.redisPending
            report.repaired += answer.repaired
            report.redisRepaired += answer.redisRepaired
            if let drifted = answer.kindsDrifted { report.kindsDrifted = (report.kindsDrifted ?? []) + drifted }
            if let drifted = answer.redisKindsDrifted { report.redisKindsDrifted = (report.redisKindsDrifted ?? []) + drifted }
            if let repaired = answer.kindsRepaired { report.kindsRepaired = (report.kindsRepaired ?? 0) + repaired }
        }
        report.drifted.sort { $0.postID < $1.postID }
        report.redisDrifted.sort { $0.postID < $1.postID }
        report.kindsDrifted?.sort { ($0.postID, $0.kind) < ($1.postID, $1.kind) }
        report.redisKindsDrifted?.sort { ($0.postID, $0.kind) < ($1.postID, $1.kind) }
        report.nextAfter = nextAfter
        return ClusterReconcileReport(
            report: report, uncheckedPosts: unchecked.sorted(),
            complete: unchecked.isEmpty && nodes.allSatisfy { $0.answer != nil } && unserved.isEmpty,
            unservedSlots: wire(unserved), nodes: nodes)
    }

    /// - Parameters:
    ///   - asked: the letters each node was asked to replay (by node id).
    ///   - unowned: letters whose post's slot had no live owner.
    static func replay(
        _ nodes: [ClusterNodeAnswer<ReplayResult>], asked: [String: [String]], unowned: [String],
        unserved: [ClosedRange<Int>]
    ) -> ClusterReplayResult {
        var result = ReplayResult(replayed: [], superseded: [], failed: [])
        for node in nodes {
            guard let answer = node.answer else {
                result.failed += (asked[node.nodeID] ?? []).map {
                    ReplayResult.Failure(
                        id: $0, reason: "node \(node.nodeID), which owns its post's slot, did not answer (\(node.error ?? "")); the letter stays")
                }
                continue
            }
            result.replayed += answer.replayed
            result.superseded += answer.superseded
            result.failed += answer.failed
        }
        result.failed += unowned.map {
            ReplayResult.Failure(id: $0, reason: "no live node owns its post's slot now (a takeover is under way); the letter stays: replay it again")
        }
        let first = LetterID(milliseconds: 0, sequence: 0)
        let order: (String, String) -> Bool = { (LetterID($0) ?? first) < (LetterID($1) ?? first) }
        result.replayed.sort(by: order)
        result.superseded.sort(by: order)
        result.failed.sort { order($0.id, $1.id) }
        return ClusterReplayResult(
            result: result, complete: nodes.allSatisfy { $0.answer != nil } && unowned.isEmpty && unserved.isEmpty,
            unservedSlots: wire(unserved), nodes: nodes)
    }

    private static func wire(_ ranges: [ClosedRange<Int>]) -> [[Int]] {
        ranges.map { [$0.lowerBound, $0.upperBound] }
    }
}
