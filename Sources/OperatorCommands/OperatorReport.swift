import CounterWire
import Foundation

/// Human-readable renderings of the admin API's answers, for the operator subcommands. Pure:
/// answers in, text out.
enum OperatorReport {
    /// `stats`: one row per shard and a total row; the Redis nodes; the node's memory.
    static func stats(_ statistics: ServiceStatistics) -> String {
        let columns = [
            "shard", "pending", "oldest s", "since flush s", "commits", "avg commit", "max commit",
            "flushes", "flushed", "max flush", "retries", "dead",
        ]
        func row(_ name: String, _ value: ShardStatistics) -> [String] {
            [
                name, String(value.pendingChanges), decimal(value.oldestPendingAgeSeconds),
                decimal(value.secondsSinceFlush), String(value.groupCommits),
                decimal(value.averageGroupCommit), String(value.largestGroupCommit), String(value.flushTransactions),
                String(value.flushedEntries), String(value.largestFlush), String(value.flushRetries),
                String(value.deadLetters),
            ]
        }
        var rows = statistics.shards.map { row($0.shard.map(String.init) ?? "-", $0) }
        rows.append(row("total", statistics.total))
        var text = table(columns, rows)
        if let error = statistics.total.lastFlushError {
            text += "\nlast flush error: \(error)"
        }
        let redis = statistics.redis
        if !redis.nodes.isEmpty {
            let rows = redis.nodes.map { node -> [String] in
                [
                    node.endpoint, String(node.slots), node.connected ? "yes" : "no", String(node.pipelines), String(node.errors),
                    String(node.moved), String(node.ask), String(node.tryAgain), String(node.clusterDown),
                ]
            }
            text += "\n\nredis (\(redis.mode))\n"
            text += table(["node", "slots", "connected", "pipelines", "errors", "moved", "ask", "tryagain", "clusterdown"], rows)
            for node in redis.nodes {
                if let error = node.lastError { text += "\n\(node.endpoint) last error: \(error)" }
            }
            if let error = redis.lastMapError { text += "\nlast slot map refresh failed: \(error)" }
        }
        if let bytes = statistics.residentMemoryBytes {
            text += "\nmemory in use (resident): \(String(format: "%.1f", Double(bytes) / 1_048_576)) MiB"
        }
        return text
    }

    /// `stats` of a cluster: a row per node (its shards' total) and the cluster's total; the
    /// nodes' last flush errors; the nodes that did not answer.
    static func clusterStats(_ statistics: ClusterStatistics) -> String {
        let columns = [
            "node", "pending", "oldest s", "since flush s", "commits", "avg commit", "flushes", "flushed",
            "retries", "dead", "redis errors", "pg errors", "memory MiB",
        ]
        func row(_ name: String, _ value: ShardStatistics, memory: Int64?) -> [String] {
            [
                name, String(value.pendingChanges), decimal(value.oldestPendingAgeSeconds), decimal(value.secondsSinceFlush),
                String(value.groupCommits), decimal(value.averageGroupCommit), String(value.flushTransactions),
                String(value.flushedEntries), String(value.flushRetries), String(value.deadLetters), String(value.redisErrors),
                String(value.postgresErrors), memory.map { decimal(Double($0) / 1_048_576) } ?? "-",
            ]
        }
        var rows: [[String]] = []
        var notes: [String] = []
        for node in statistics.nodes {
            if let answer = node.answer {
                rows.append(row(node.nodeID, answer.total, memory: answer.residentMemoryBytes))
                if let error = answer.total.lastFlushError { notes.append("\(node.nodeID) last flush error: \(error)") }
            } else {
                rows.append([node.nodeID, "no answer"] + Array(repeating: "-", count: columns.count - 2))
                notes.append("\(node.nodeID) (\(node.url)) did not answer: \(node.error ?? "")")
            }
        }
        rows.append(row("cluster", statistics.total, memory: nil))
        return ([table(columns, rows)] + notes).joined(separator: "\n")
    }

    /// `dead-letters replay`: what went back into the write path, what was superseded, what not.
    static func replay(_ answer: ReplayResult) -> String {
        var text = "replayed \(answer.replayed.count) change(s) into the write path"
        if !answer.superseded.isEmpty {
            text +=
                "\nsuperseded \(answer.superseded.count) (a later change of the same user and post stands; removed): "
                + answer.superseded.joined(separator: ", ")
        }
        for failure in answer.failed { text += "\nnot replayed \(failure.id): \(failure.reason)" }
        return text
    }

    /// `inspect`: Redis and PostgreSQL side by side, then the verdict and what it means.
    static func inspection(_ inspection: PostInspection) -> String {
        let redis = inspection.redis
        let postgres = inspection.postgres
        var rows: [[String]] = [
            [
                "likes_count", redis.hydrated ? String(redis.likesCount) : "not loaded",
                postgres.exists ? (postgres.likesCount.map(String.init) ?? "-") : "no such post",
            ],
            ["likes rows", "", String(postgres.likesRows)],
        ]
        if let user = inspection.userID {
            rows.append(["user \(user) likes", yesNo(redis.isLiked), yesNo(postgres.isLiked)])
        }
        var text = "post \(inspection.postID) (tier: \(redis.tier))\n" + table(["", "redis", "postgres"], rows)
        text += "\npending changes in the write-behind log: \(redis.pendingChanges)"
        text += "\nlast flush of its shard: \(decimal(redis.secondsSinceFlush)) s ago"
        text += "\nverdict: " + verdictExplanation(inspection)
        return text
    }

    static func verdictExplanation(_ inspection: PostInspection) -> String {
        let post = inspection.postID
        switch inspection.verdict {
        case PostInspection.Verdict.agree:
            return "in agreement — Redis and PostgreSQL show the same count and membership"
        case PostInspection.Verdict.pending:
            return
                "pending — they differ only by \(inspection.redis.pendingChanges) change(s) waiting for the flusher; PostgreSQL catches up at the next flush (counter-node flush --wait)"
        case PostInspection.Verdict.drift:
            let count = inspection.postgres.likesCount
            let rows = inspection.postgres.likesRows
            if let count, count != rows {
                return
                    "DRIFT — posts.likes_count is \(count) but likes holds \(rows) rows; repair with: counter-node reconcile --post \(post) --repair"
            }
            return "DRIFT — Redis and PostgreSQL differ with nothing pending; check with: counter-node reconcile --post \(post)"
        case PostInspection.Verdict.unknownPost:
            return "unknown post — it is not in PostgreSQL's posts table"
        case PostInspection.Verdict.notInRedis:
            return "cold — Redis holds nothing of this post; PostgreSQL is the record and answers its reads (a write loads it into Redis)"
        case let other:
            return other
        }
    }

    /// `reconcile`: what was checked, what drifted in PostgreSQL and in Redis, what was repaired.
    static func reconcile(_ totals: ReconcileTotals, repair: Bool) -> String {
        var text = "checked \(totals.checked) post(s): \(totals.drifted.count) with likes_count ≠ likes rows"
        if !totals.drifted.isEmpty {
            text +=
                "\n"
                + table(
                    ["post", "likes_count", "likes rows"],
                    totals.drifted.map {
                        [String($0.postID), String($0.likesCount), String($0.likesRows)]
                    })
        }
        text += "\nRedis: \(totals.redisDrifted.count) post(s) differ from the rows with nothing pending"
        if totals.redisPending > 0 { text += ", \(totals.redisPending) differ only by changes waiting for the flusher" }
        if !totals.redisDrifted.isEmpty {
            text +=
                "\n"
                + table(
                    ["post", "redis count", "likes rows"],
                    totals.redisDrifted.map {
                        [String($0.postID), String($0.redisCount), String($0.likesRows)]
                    })
        }
        if let kindsDrifted = totals.kindsDrifted {
            text += "\nreactions: \(kindsDrifted.count) kind(s) of posts with reaction_counts ≠ reactions rows"
            if !kindsDrifted.isEmpty {
                text +=
                    "\n"
                    + table(
                        ["post", "kind", "reaction_counts", "reactions rows"],
                        kindsDrifted.map { [String($0.postID), $0.kind, String($0.count), String($0.rows)] })
            }
            let redisKinds = totals.redisKindsDrifted ?? []
            text += "\nRedis: \(redisKinds.count) kind(s) of posts differ from the reactions rows with nothing pending"
            if !redisKinds.isEmpty {
                text +=
                    "\n"
                    + table(
                        ["post", "kind", "redis count", "reactions rows"],
                        redisKinds.map { [String($0.postID), $0.kind, String($0.redisCount), String($0.rows)] })
            }
        }
        let redisPosts = totals.redisDriftedPosts
        if repair {
            text += "\nrepaired \(totals.repaired) post(s): likes_count now equals the likes rows"
            if let kindsRepaired = totals.kindsRepaired {
                text += "\nrepaired \(kindsRepaired) post(s): each kind's reaction_counts now equals its reactions rows"
            }
            if redisPosts > 0 {
                text +=
                    "\nRedis: \(totals.redisRepaired) of \(redisPosts) post(s) reset; Redis loads them from PostgreSQL on their next touch"
            }
        } else if !totals.drifted.isEmpty || redisPosts > 0 || !(totals.kindsDrifted ?? []).isEmpty {
            text += "\nnothing changed; run again with --repair to set the counts from the rows and reload drifted posts into Redis"
        }
        return text
    }

    /// What several reconcile batches found, added up.
    struct ReconcileTotals {
        var checked = 0
        var drifted: [ReconcileReport.Drift] = []
        var redisDrifted: [ReconcileReport.RedisDrift] = []
        var redisPending = 0
        var repaired = 0
        var redisRepaired = 0
        /// With reactions of other kinds (else `nil`), as `ReconcileReport`'s.
        var kindsDrifted: [ReconcileReport.KindDrift]?
        var redisKindsDrifted: [ReconcileReport.RedisKindDrift]?
        var kindsRepaired: Int?

        /// The posts that drifted in Redis, in their likes or in any other kind.
        var redisDriftedPosts: Int {
            Set(redisDrifted.map(\.postID)).union((redisKindsDrifted ?? []).map(\.postID)).count
        }

        /// Whether drift is left: in `likes_count` or `reaction_counts` (unless repaired) or in
        /// Redis (not reloaded).
        func hasUnrepairedDrift(repair: Bool) -> Bool {
            (repair ? 0 : drifted.count + (kindsDrifted ?? []).count) + redisDriftedPosts - redisRepaired > 0
        }

        mutating func add(_ answer: ReconcileReport) {
            checked += answer.checked
            drifted += answer.drifted
            redisDrifted += answer.redisDrifted
            redisPending += answer.redisPending
            repaired += answer.repaired
            redisRepaired += answer.redisRepaired
            if let drifted = answer.kindsDrifted { kindsDrifted = (kindsDrifted ?? []) + drifted }
            if let drifted = answer.redisKindsDrifted { redisKindsDrifted = (redisKindsDrifted ?? []) + drifted }
            if let repaired = answer.kindsRepaired { kindsRepaired = (kindsRepaired ?? 0) + repaired }
        }
    }

    /// `dead-letters list`.
    static func deadLetters(_ letters: [DeadLetter]) -> String {
        guard !letters.isEmpty else { return "no dead letters" }
        return "\(letters.count) dead letter(s)\n"
            + table(
                ["id", "user", "post", "liked", "reason", "from log entry"],
                letters.map {
                    [
                        $0.id, $0.fields["u"] ?? "", $0.fields["p"] ?? "",
                        $0.fields["l"].map { $0 == "1" ? "yes" : "no" } ?? ($0.fields["raw"] ?? ""),
                        Self.reason(of: $0),
                        ($0.fields["log"] ?? "") + " " + ($0.fields["entry"] ?? ""),
                    ]
                })
    }

    /// A letter's reason, with PostgreSQL's SQLSTATE and message for a refused change.
    static func reason(of letter: DeadLetter) -> String {
        guard let state = letter.fields["sqlstate"] else { return letter.reason ?? "" }
        return "\(letter.reason ?? ""): [\(state)] \(letter.fields["message"] ?? "")"
    }

    /// `cluster status`: one row per node, then the map's version and the moves to come.
    static func cluster(_ map: ClusterMapBody) -> String {
        let rows = map.nodes.map { node -> [String] in
            let ranges = node.slots.map { $0.count == 2 && $0[0] != $0[1] ? "\($0[0])-\($0[1])" : "\($0.first ?? 0)" }
            return [
                node.id, node.url, String(node.incarnation), node.live ? "yes" : "no", node.draining ? "yes" : "no",
                node.live ? String(node.leaseRemainingMs) : "-", String(node.ownedSlots),
                ranges.count > 4 ? ranges.prefix(4).joined(separator: ",") + ",…" : (ranges.isEmpty ? "-" : ranges.joined(separator: ",")),
                node.ownedSlots == 0 ? "-" : "\(node.lowestEpoch)-\(node.highestEpoch)",
            ]
        }
        var text = table(["node", "url", "incarnation", "live", "draining", "lease ms", "slots", "ranges", "epochs"], rows)
        text += "\nmap version \(map.version) (read by \(map.answeredBy)); "
        text += map.movesPending == 0 ? "no moves pending" : "\(map.movesPending) slot(s) still to move"
        return text
    }

    /// A plain text table, columns padded to their widest cell.
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0.indices.contains(column) ? $0[column].count : 0 }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { column, cell in
                column == 0
                    ? cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[column] - cell.count) + cell
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    private static func decimal(_ value: Double) -> String { String(format: "%.1f", value) }
    private static func yesNo(_ value: Bool?) -> String { value.map { $0 ? "yes" : "no" } ?? "-" }
}
