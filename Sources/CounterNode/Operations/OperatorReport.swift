import Foundation

/// Human-readable renderings of the admin API's answers, for the operator subcommands. Pure:
/// JSON in, text out.
enum OperatorReport {
    /// `stats`: one row per shard and a total row.
    static func stats(_ json: JSONValue) -> String {
        let columns = ["shard", "pending", "oldest s", "since flush s", "commits", "avg commit", "max commit",
                       "flushes", "flushed", "max flush", "retries", "dead"]
        var rows: [[String]] = []
        func row(_ name: String, _ value: JSONValue) -> [String] {
            [name, int(value["pending_changes"]), decimal(value["oldest_pending_age_seconds"]),
             decimal(value["seconds_since_flush"]), int(value["group_commits"]),
             decimal(value["average_group_commit"]), int(value["largest_group_commit"]), int(value["flush_transactions"]),
             int(value["flushed_entries"]), int(value["largest_flush"]), int(value["flush_retries"]),
             int(value["dead_letters"])]
        }
        for shard in json["shards"]?.array ?? [] { rows.append(row(int(shard["shard"]), shard)) }
        if let total = json["total"] { rows.append(row("total", total)) }
        var text = table(columns, rows)
        if let error = json["total"]?["last_flush_error"]?.string {
            text += "\nlast flush error: \(error)"
        }
        if let redis = json["redis"], let nodes = redis["nodes"]?.array, !nodes.isEmpty {
            let rows = nodes.map { node -> [String] in
                [node["endpoint"]?.string ?? "?", int(node["slots"]), (node["connected"]?.bool ?? false) ? "yes" : "no",
                 int(node["pipelines"]), int(node["errors"]), int(node["moved"]), int(node["ask"]),
                 int(node["try_again"]), int(node["cluster_down"])]
            }
            text += "\n\nredis (\(redis["mode"]?.string ?? "?"))\n"
            text += table(["node", "slots", "connected", "pipelines", "errors", "moved", "ask", "tryagain", "clusterdown"], rows)
            for node in nodes {
                if let error = node["last_error"]?.string { text += "\n\(node["endpoint"]?.string ?? "?") last error: \(error)" }
            }
            if let error = redis["last_map_error"]?.string { text += "\nlast slot map refresh failed: \(error)" }
        }
        if let bytes = json["resident_memory_bytes"]?.int64 {
            text += "\nmemory in use (resident): \(String(format: "%.1f", Double(bytes) / 1_048_576)) MiB"
        }
        return text
    }

    /// `inspect`: Redis and PostgreSQL side by side, then the verdict and what it means.
    static func inspection(_ json: JSONValue) -> String {
        let post = int(json["post_id"])
        let redis = json["redis"], postgres = json["postgres"]
        var rows: [[String]] = [
            ["likes_count", (redis?["hydrated"]?.bool ?? false) ? int(redis?["likes_count"]) : "not loaded",
             (postgres?["exists"]?.bool ?? false) ? int(postgres?["likes_count"]) : "no such post"],
            ["likes rows", "", int(postgres?["likes_rows"])],
        ]
        if let user = json["user_id"]?.int64 {
            rows.append(["user \(user) likes", yesNo(redis?["is_liked"]), yesNo(postgres?["is_liked"])])
        }
        var text = "post \(post)\n" + table(["", "redis", "postgres"], rows)
        text += "\npending changes in the write-behind log: \(int(redis?["pending_changes"]))"
        text += "\nlast flush of its shard: \(decimal(redis?["seconds_since_flush"])) s ago"
        text += "\nverdict: " + verdictExplanation(json)
        return text
    }

    static func verdictExplanation(_ json: JSONValue) -> String {
        let post = int(json["post_id"])
        let pending = int(json["redis"]?["pending_changes"])
        switch json["verdict"]?.string ?? "" {
        case "agree":
            return "in agreement — Redis and PostgreSQL show the same count and membership"
        case "pending":
            return "pending — they differ only by \(pending) change(s) waiting for the flusher; PostgreSQL catches up at the next flush (counter-node flush --wait)"
        case "drift":
            let count = int(json["postgres"]?["likes_count"]), rows = int(json["postgres"]?["likes_rows"])
            if count != rows {
                return "DRIFT — posts.likes_count is \(count) but likes holds \(rows) rows; repair with: counter-node reconcile --post \(post) --repair"
            }
            return "DRIFT — Redis and PostgreSQL differ with nothing pending; check with: counter-node reconcile --post \(post)"
        case "unknown_post":
            return "unknown post — it is not in PostgreSQL's posts table"
        case "not_in_redis":
            return "not loaded — Redis has not seen this post yet (it is loaded on first touch); PostgreSQL is the record"
        case let other:
            return other
        }
    }

    /// `reconcile`: what was checked, what drifted in PostgreSQL and in Redis, what was repaired.
    static func reconcile(_ totals: ReconcileTotals, repair: Bool) -> String {
        var text = "checked \(totals.checked) post(s): \(totals.drifted.count) with likes_count ≠ likes rows"
        if !totals.drifted.isEmpty {
            text += "\n" + table(["post", "likes_count", "likes rows"], totals.drifted.map {
                [int($0["post_id"]), int($0["likes_count"]), int($0["likes_rows"])]
            })
        }
        text += "\nRedis: \(totals.redisDrifted.count) post(s) differ from the rows with nothing pending"
        if totals.redisPending > 0 { text += ", \(totals.redisPending) differ only by changes waiting for the flusher" }
        if !totals.redisDrifted.isEmpty {
            text += "\n" + table(["post", "redis count", "likes rows"], totals.redisDrifted.map {
                [int($0["post_id"]), int($0["redis_count"]), int($0["likes_rows"])]
            })
        }
        if repair {
            text += "\nrepaired \(totals.repaired) post(s): likes_count now equals the likes rows"
            if !totals.redisDrifted.isEmpty {
                text += "\nRedis: \(totals.redisRepaired) of \(totals.redisDrifted.count) post(s) reset; Redis loads them from PostgreSQL on their next touch"
            }
        } else if !totals.drifted.isEmpty || !totals.redisDrifted.isEmpty {
            text += "\nnothing changed; run again with --repair to set likes_count from the rows and reload drifted posts into Redis"
        }
        return text
    }

    /// What several reconcile batches found, added up.
    struct ReconcileTotals {
        var checked = 0
        var drifted: [JSONValue] = []
        var redisDrifted: [JSONValue] = []
        var redisPending = 0
        var repaired = 0
        var redisRepaired = 0

        mutating func add(_ answer: JSONValue) {
            checked += Int(answer["checked"]?.int64 ?? 0)
            drifted += answer["drifted"]?.array ?? []
            redisDrifted += answer["redis_drifted"]?.array ?? []
            redisPending += Int(answer["redis_pending"]?.int64 ?? 0)
            repaired += Int(answer["repaired"]?.int64 ?? 0)
            redisRepaired += Int(answer["redis_repaired"]?.int64 ?? 0)
        }
    }

    /// `dead-letters list`.
    static func deadLetters(_ json: JSONValue) -> String {
        let letters = json["dead_letters"]?.array ?? []
        guard !letters.isEmpty else { return "no dead letters" }
        return "\(letters.count) dead letter(s)\n" + table(["id", "user", "post", "liked", "reason", "from log entry"], letters.map {
            [$0["id"]?.string ?? "", $0["u"]?.string ?? "", $0["p"]?.string ?? "",
             $0["l"]?.string.map { $0 == "1" ? "yes" : "no" } ?? ($0["raw"]?.string ?? ""),
             $0["reason"]?.string ?? "", ($0["log"]?.string ?? "") + " " + ($0["entry"]?.string ?? "")]
        })
    }

    /// A plain text table, columns padded to their widest cell.
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0.indices.contains(column) ? $0[column].count : 0 }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { column, cell in
                column == 0 ? cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                            : String(repeating: " ", count: widths[column] - cell.count) + cell
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    private static func int(_ value: JSONValue?) -> String { value?.int64.map(String.init) ?? "-" }
    private static func decimal(_ value: JSONValue?) -> String { value?.double.map { String(format: "%.1f", $0) } ?? "-" }
    private static func yesNo(_ value: JSONValue?) -> String { value?.bool.map { $0 ? "yes" : "no" } ?? "-" }
}
