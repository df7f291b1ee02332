import CounterClient
import CounterCore

/// `flush`, `stats`, `reconcile` and `dead-letters replay` on the whole cluster (the default;
/// `--this-node` for the node at `--node` alone): the node asked makes the call on every live
/// node and merges the answers. An answer that leaves something out — a node that did not
/// answer, slots no live node owned — is reported on standard error, naming what, and the
/// command exits with status 7 (`incomplete`).
extension OperatorCommand {
    func clusterFlush(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        guard wait else {
            let answer = try await client.call("POST /admin/cluster/flush?wait=false") { client throws(CounterClientError) in
                try await client.clusterFlush(wait: false)
            }
            output.standard(
                json
                    ? Self.json(answer)
                    : "flush started on \(answer.nodes.count) node(s); \(answer.pendingChanges) change(s) were waiting for PostgreSQL (use --wait to wait for them)"
            )
            return reportIncomplete(answer)
        }
        let started = ContinuousClock.now
        let answer = try await waitingForFlush(
            client, "POST /admin/cluster/flush", { client throws(CounterClientError) in try await client.clusterFlush() },
            backlog: { client throws(CounterClientError) in try await client.clusterStatistics().total.pendingChanges })
        guard let answer else { return .timedOut }
        let elapsed = ContinuousClock.now - started
        if json {
            output.standard(Self.json(answer))
        } else {
            var text =
                answer.flushed
                ? "flushed: PostgreSQL has every change the cluster's \(answer.nodes.count) node(s) acknowledged before the flush"
                : "NOT flushed everywhere: PostgreSQL may lack changes acknowledged before the flush (see below)"
            text += " (\(String(format: "%.1f", elapsed.inSeconds)) s); \(answer.pendingChanges) newer change(s) waiting"
            for node in answer.nodes {
                if let flushed = node.answer {
                    text += "\n  \(node.nodeID): flushed, \(flushed.pendingChanges) newer change(s) waiting"
                }
            }
            output.standard(text)
        }
        return reportIncomplete(answer)
    }

    func clusterStats(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        let answer = try await client.call("GET /admin/cluster/stats") { client throws(CounterClientError) in try await client.clusterStatistics() }
        output.standard(json ? Self.json(answer) : OperatorReport.clusterStats(answer))
        return reportIncomplete(answer)
    }

    func clusterReconcile(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        let repair = self.repair
        let (totals, answers) = try await reconcilePages(client, "POST /admin/cluster/reconcile", report: { $0.report }) {
            client, posts, after throws(CounterClientError) in
            try await client.clusterReconcile(posts: posts, after: after, limit: 1_000, repair: repair)
        }
        let unchecked = answers.flatMap(\.uncheckedPosts)
        var text = OperatorReport.reconcile(totals, repair: repair)
        if !unchecked.isEmpty {
            text +=
                "\nNOT checked: \(unchecked.count) post(s) whose owner did not answer or whose slot had no live owner: "
                + unchecked.prefix(50).map(String.init).joined(separator: ", ") + (unchecked.count > 50 ? ", …" : "")
        }
        output.standard(json ? Self.json(answers) : text)
        let incomplete = answers.map { reportIncomplete($0) }.contains(.incomplete)
        return totals.hasUnrepairedDrift(repair: repair) ? .driftFound : incomplete ? .incomplete : .success
    }

    func clusterReplay(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        let ids = self.ids
        let answer = try await client.call("POST /admin/cluster/dead-letters/replay") { client throws(CounterClientError) in
            try await client.clusterReplayDeadLetters(ids: ids.isEmpty ? nil : ids)
        }
        output.standard(json ? Self.json(answer) : OperatorReport.replay(answer.result))
        let incomplete = reportIncomplete(answer) == .incomplete
        return !answer.result.failed.isEmpty ? .failure : incomplete ? .incomplete : .success
    }

    /// Says on standard error what `answer` leaves out; `.incomplete` when it leaves anything.
    func reportIncomplete<Answer: ClusterAnswer>(_ answer: Answer) -> ExitStatus {
        guard !answer.complete else { return .success }
        var lines: [String] = ["incomplete: this answer leaves part of the cluster out"]
        for node in answer.nodes where node.answer == nil {
            lines.append("  node \(node.nodeID) (\(node.url)) did not answer: \(node.error ?? "no reason given")")
        }
        if !answer.unservedSlots.isEmpty {
            let ranges = answer.unservedSlots.map { $0.count == 2 && $0[0] != $0[1] ? "\($0[0])-\($0[1])" : "\($0.first ?? 0)" }
            lines.append("  slots with no live owner (a takeover is under way; their changes wait in Redis): " + ranges.joined(separator: ", "))
        }
        output.error(lines.joined(separator: "\n"))
        return .incomplete
    }
}
