import Foundation
import Persistence

/// The operator subcommands — `flush`, `inspect`, `stats`, `reconcile`, `dead-letters` — which
/// talk to a running node's admin API (`--node`, `--admin-token`). Human-readable output by
/// default, the node's JSON with `--json`; progress goes to standard error.
struct OperatorCommand {
    typealias ExitStatus = NodeCommand.ExitStatus

    /// The subcommands this type runs.
    static let subcommands: Set<String> = ["flush", "inspect", "stats", "reconcile", "dead-letters"]

    let subcommand: String
    let configuration: NodeConfiguration
    let output: NodeCommand.Output
    var json = false
    var wait = false
    var timeoutSeconds = 60.0
    var user: Int64?
    var post: Int64?
    var all = false
    var repair = false
    var ids: [String] = []
    var verb: String?

    /// A command line the subcommand cannot use, with the reason.
    struct UsageError: Error {
        let message: String
    }

    /// Reads the subcommand's own arguments (what `NodeConfiguration.parse` left).
    init(subcommand: String, operands: [String], configuration: NodeConfiguration, output: NodeCommand.Output) throws(UsageError) {
        self.subcommand = subcommand
        self.configuration = configuration
        self.output = output
        var index = 0
        var positional: [String] = []
        var inlineValue: String?
        var timeoutGiven = false
        func value(_ flag: String) throws(UsageError) -> String {
            if let inlineValue { return inlineValue }
            index += 1
            guard index < operands.count else { throw UsageError(message: "\(flag) needs a value") }
            return operands[index]
        }
        func id(_ flag: String, _ text: String) throws(UsageError) -> Int64 {
            guard let id = EntityID.parse(text) else { throw UsageError(message: "\(flag) \(text): not a positive 64-bit integer") }
            return id
        }
        while index < operands.count {
            // `--flag value` or `--flag=value`, as for the settings.
            var argument = operands[index]
            inlineValue = nil
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                inlineValue = String(argument[argument.index(after: equals)...])
                argument = String(argument[..<equals])
            }
            switch argument {
            case "--json": json = true
            case "--wait" where subcommand == "flush": wait = true
            case "--timeout" where subcommand == "flush":
                let text = try value(argument)
                guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
                    throw UsageError(message: "--timeout \(text): must be more than 0 and at most 86400 seconds")
                }
                timeoutSeconds = seconds
                timeoutGiven = true
            case "--user" where subcommand == "inspect": user = try id(argument, try value(argument))
            case "--post" where subcommand == "reconcile": post = try id(argument, try value(argument))
            case "--all" where subcommand == "reconcile": all = true
            case "--repair" where subcommand == "reconcile": repair = true
            case "--id" where subcommand == "dead-letters":
                let text = try value(argument)
                guard StreamEntryID(text) != nil else { throw UsageError(message: "--id \(text): not a dead letter id like 1700000000000-0") }
                ids.append(text)
            default:
                if argument.hasPrefix("-") && Int64(argument) == nil {
                    throw UsageError(message: "unknown option \(argument) for \(subcommand)")
                }
                positional.append(argument)   // a negative number is refused below as an id
            }
            index += 1
        }
        if timeoutGiven && !wait { throw UsageError(message: "--timeout only applies with --wait") }
        switch subcommand {
        case "inspect":
            guard positional.count == 1 else { throw UsageError(message: "inspect needs one post id: counter-node inspect <post> [--user U]") }
            post = try id("post", positional[0])
        case "reconcile":
            guard positional.isEmpty else { throw UsageError(message: "unknown argument \"\(positional[0])\" for reconcile") }
            guard (post != nil) != all else { throw UsageError(message: "reconcile needs exactly one of --post P or --all") }
        case "dead-letters":
            guard positional.count == 1, ["list", "replay", "drop"].contains(positional[0]) else {
                throw UsageError(message: "dead-letters needs list, replay [--id ID …] or drop --id ID [--id ID …]")
            }
            verb = positional[0]
            if verb == "drop" && ids.isEmpty { throw UsageError(message: "dead-letters drop needs at least one --id") }
            if verb == "list" && !ids.isEmpty { throw UsageError(message: "dead-letters list takes no --id") }
        default:
            if let extra = positional.first { throw UsageError(message: "unknown argument \"\(extra)\" for \(subcommand)") }
        }
    }

    func run() async -> ExitStatus {
        do {
            // flush --wait's deadline is its client's timeout; other calls get 30 s.
            let client = try AdminClient(baseURL: configuration.nodeURL, token: configuration.tokens.admin,
                                         timeoutSeconds: subcommand == "flush" && wait ? timeoutSeconds : 30)
            switch subcommand {
            case "flush": return try await flush(client)
            case "inspect": return try await inspect(client)
            case "stats": return try await stats(client)
            case "reconcile": return try await reconcile(client)
            default: return try await deadLetters(client)
            }
        } catch {
            switch error {
            case .unreachable(let why):
                output.error("\(why)\n(is `counter-node serve` running there? set --node or COUNTER_NODE_URL)")
                return .unreachable
            case .unauthorized(let why):
                output.error("the node refused the admin token: \(why)\n(set --admin-token or COUNTER_ADMIN_TOKEN to the node's admin token)")
                return .unauthorized
            case .refused(let status, let code, let message):
                output.error("the node answered \(status) \(code): \(message)")
                return .failure
            case .invalidAnswer(let why):
                output.error(why)
                return .failure
            case .timedOut(let why):
                output.error("the node is there but slow: \(why)")
                return .failure
            }
        }
    }

    // MARK: - Subcommands

    private func flush(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        guard wait else {
            let answer = try await client.post("/admin/flush", query: [("wait", "false")])
            if json { output.standard(answer.text) } else {
                output.standard("flush started; \(answer.json["pending_changes"]?.int64 ?? 0) change(s) were waiting for PostgreSQL (use --wait to wait for them)")
            }
            return .success
        }
        let started = ContinuousClock.now
        // Progress while the node flushes: the backlog, from /admin/stats, every half second.
        let progressClient = try AdminClient(baseURL: configuration.nodeURL, token: configuration.tokens.admin, timeoutSeconds: 5)
        let progress = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(500))
                if Task.isCancelled { break }
                if let stats = try? await progressClient.get("/admin/stats"), !Task.isCancelled {
                    let pending = stats.json["total"]?["pending_changes"]?.int64 ?? 0
                    output.error("flushing: \(pending) change(s) still waiting for PostgreSQL")
                }
            }
        }
        defer { progress.cancel() }
        let answer: AdminClient.Answer
        do {
            answer = try await client.post("/admin/flush")
        } catch .timedOut {
            output.error("flush did not finish within \(Self.format(timeoutSeconds)) s; the node goes on flushing (see counter-node stats)")
            return .timedOut
        }
        let elapsed = ContinuousClock.now - started
        if json { output.standard(answer.text) } else {
            output.standard("flushed: PostgreSQL has every change acknowledged before the flush (\(String(format: "%.1f", elapsed.inSeconds)) s); \(answer.json["pending_changes"]?.int64 ?? 0) newer change(s) waiting")
        }
        return .success
    }

    private func inspect(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        let answer = try await client.get("/admin/posts/\(post!)", query: user.map { [("user", String($0))] } ?? [])
        output.standard(json ? answer.text : OperatorReport.inspection(answer.json))
        return answer.json["verdict"]?.string == "drift" ? .driftFound : .success
    }

    private func stats(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        let answer = try await client.get("/admin/stats")
        output.standard(json ? answer.text : OperatorReport.stats(answer.json))
        return .success
    }

    private func reconcile(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        var totals = OperatorReport.ReconcileTotals()
        var answers: [String] = []
        if let post {
            let answer = try await client.post("/admin/reconcile", body: Self.body(["\"post_ids\":[\(post)]", "\"repair\":\(repair)"]))
            totals.add(answer.json)
            answers.append(answer.text)
        } else {
            // All posts, in bounded batches, with progress.
            var after: Int64 = 0
            while true {
                let answer = try await client.post("/admin/reconcile", body: Self.body(["\"after\":\(after)", "\"limit\":1000", "\"repair\":\(repair)"]))
                totals.add(answer.json)
                answers.append(answer.text)
                output.error("reconcile: \(totals.checked) post(s) checked, \(totals.drifted.count) drifted so far")
                guard let next = answer.json["next_after"]?.int64 else { break }
                after = next
            }
        }
        output.standard(json ? "[" + answers.joined(separator: ",") + "]" : OperatorReport.reconcile(totals, repair: repair))
        let unrepaired = repair ? 0 : totals.drifted.count
        return unrepaired + totals.redisDrifted.count - totals.redisRepaired > 0 ? .driftFound : .success
    }

    private func deadLetters(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        let idList = "\"ids\":[" + ids.map { "\"\($0)\"" }.joined(separator: ",") + "]"
        switch verb {
        case "list":
            let answer = try await client.get("/admin/dead-letters", query: [("count", "1000")])
            output.standard(json ? answer.text : OperatorReport.deadLetters(answer.json))
            return .success
        case "replay":
            let answer = try await client.post("/admin/dead-letters/replay", body: ids.isEmpty ? nil : Self.body([idList]))
            let replayed = answer.json["replayed"]?.array ?? []
            let failed = answer.json["failed"]?.array ?? []
            if json { output.standard(answer.text) } else {
                var text = "replayed \(replayed.count) change(s) into the write path"
                for failure in failed {
                    text += "\nnot replayed \(failure["id"]?.string ?? "?"): \(failure["reason"]?.string ?? "")"
                }
                output.standard(text)
            }
            return failed.isEmpty ? .success : .failure
        default:
            let answer = try await client.post("/admin/dead-letters/drop", body: Self.body([idList]))
            output.standard(json ? answer.text : "dropped \(answer.json["dropped"]?.int64 ?? 0) dead letter(s)")
            return .success
        }
    }

    private static func body(_ members: [String]) -> [UInt8] {
        Array(("{" + members.joined(separator: ",") + "}").utf8)
    }

    private static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}
