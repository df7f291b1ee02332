import CounterClient
import CounterCore
import Foundation

/// The operator subcommands — `flush`, `inspect`, `stats`, `reconcile`, `dead-letters`, `cluster` — which
/// talk to a running node's admin API (`--node`, `--admin-token`). Human-readable output by
/// default, the node's JSON with `--json`; progress goes to standard error.
public struct OperatorCommand: Sendable {
    /// The subcommands this type runs.
    public static let subcommands: Set<String> = ["flush", "inspect", "stats", "reconcile", "dead-letters", "cluster"]

    let subcommand: String
    /// The node's base URL (`--node`) and admin token (`--admin-token`).
    let nodeURL: String
    let adminToken: String?
    let output: CommandOutput
    var json = false
    var wait = false
    /// `flush --wait --timeout S`: how long the flush may take. Defaults to 60 s.
    var flushTimeout: Duration = .seconds(60)
    var user: Int64?
    var post: Int64?
    var all = false
    var repair = false
    var ids: [String] = []
    var verb: String?
    /// `cluster drain NODE`: the node; `--undo` takes the drain back.
    var node: String?
    var undo = false
    /// `--this-node`: `flush`, `stats`, `reconcile` and `dead-letters replay` act on the node at
    /// `--node` alone, instead of on every live node of its cluster.
    var thisNode = false

    /// A command line the subcommand cannot use, with the reason.
    public struct UsageError: Error {
        public let message: String
    }

    /// Reads the subcommand's own arguments (what `NodeConfiguration.parse` left).
    public init(subcommand: String, operands: [String], nodeURL: String, adminToken: String?, output: CommandOutput) throws(UsageError) {
        self.subcommand = subcommand
        self.nodeURL = nodeURL
        self.adminToken = adminToken
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
            case "--this-node" where ["flush", "stats", "reconcile", "dead-letters"].contains(subcommand): thisNode = true
            case "--wait" where subcommand == "flush": wait = true
            case "--timeout" where subcommand == "flush":
                let text = try value(argument)
                guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
                    throw UsageError(message: "--timeout \(text): must be more than 0 and at most 86400 seconds")
                }
                flushTimeout = .milliseconds(Int64((seconds * 1_000).rounded()))
                timeoutGiven = true
            case "--user" where subcommand == "inspect": user = try id(argument, try value(argument))
            case "--post" where subcommand == "reconcile": post = try id(argument, try value(argument))
            case "--all" where subcommand == "reconcile": all = true
            case "--repair" where subcommand == "reconcile": repair = true
            case "--undo" where subcommand == "cluster": undo = true
            case "--id" where subcommand == "dead-letters":
                let text = try value(argument)
                guard DeadLetterID.isValid(text) else { throw UsageError(message: "--id \(text): not a dead letter id like 1700000000000-0") }
                ids.append(text)
            default:
                if argument.hasPrefix("-") && Int64(argument) == nil {
                    throw UsageError(message: "unknown option \(argument) for \(subcommand)")
                }
                positional.append(argument) // a negative number is refused below as an id
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
        case "cluster":
            switch positional.first {
            case "status" where positional.count == 1 && !undo: verb = "status"
            case "drain" where positional.count == 2:
                verb = "drain"
                node = positional[1]
            default: throw UsageError(message: "cluster needs status, or drain NODE [--undo]")
            }
        default:
            if let extra = positional.first { throw UsageError(message: "unknown argument \"\(extra)\" for \(subcommand)") }
        }
    }

    /// Calls the node and reports; the exit status says how it went.
    public func run() async -> ExitStatus {
        do {
            // flush --wait's deadline is its client's timeout; other calls get 30 s.
            let client = try AdminClient(
                baseURL: nodeURL, token: adminToken,
                timeout: subcommand == "flush" && wait ? flushTimeout : .seconds(30))
            switch subcommand {
            case "flush": return thisNode ? try await flush(client) : try await clusterFlush(client)
            case "inspect": return try await inspect(client)
            case "stats": return thisNode ? try await stats(client) : try await clusterStats(client)
            case "reconcile": return thisNode ? try await reconcile(client) : try await clusterReconcile(client)
            case "cluster": return try await cluster(client)
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
            let answer = try await client.call("POST /admin/flush?wait=false") { client throws(CounterClientError) in
                try await client.flush(wait: false)
            }
            output.standard(
                json
                    ? Self.json(answer)
                    : "flush started on this node; \(answer.pendingChanges) change(s) were waiting for PostgreSQL (use --wait to wait for them)")
            return .success
        }
        let started = ContinuousClock.now
        let answer = try await waitingForFlush(
            client, "POST /admin/flush", { client throws(CounterClientError) in try await client.flush(wait: true) },
            backlog: { client throws(CounterClientError) in try await client.statistics().total.pendingChanges })
        guard let answer else { return .timedOut }
        let elapsed = ContinuousClock.now - started
        output.standard(
            json
                ? Self.json(answer)
                : "flushed this node: PostgreSQL has every change it acknowledged before the flush (\(String(format: "%.1f", elapsed.inSeconds)) s); \(answer.pendingChanges) newer change(s) waiting"
        )
        return .success
    }

    /// Runs a flush call that waits, with the backlog on standard error every half second; `nil`
    /// when it did not finish within `--timeout` (said on standard error).
    func waitingForFlush<Answer: Sendable>(
        _ client: AdminClient, _ what: String,
        _ flush: @escaping @Sendable (CounterServiceClient) async throws(CounterClientError) -> Answer,
        backlog: @escaping @Sendable (CounterServiceClient) async throws(CounterClientError) -> Int
    ) async throws(AdminClient.Failure) -> Answer? {
        let progressClient = try AdminClient(baseURL: nodeURL, token: adminToken, timeout: .seconds(5))
        let output = self.output
        let outcome = await withTaskGroup(of: Void.self) { group -> Result<Answer, AdminClient.Failure> in
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    if Task.isCancelled { break }
                    if let pending = try? await progressClient.call("backlog", backlog), !Task.isCancelled {
                        output.error("flushing: \(pending) change(s) still waiting for PostgreSQL")
                    }
                }
            }
            defer { group.cancelAll() }
            do throws(AdminClient.Failure) {
                return .success(try await client.call(what, flush))
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let answer):
            return answer
        case .failure(.timedOut):
            output.error("flush did not finish within \(Self.format(flushTimeout.inSeconds)) s; the nodes go on flushing (see counter-node stats)")
            return nil
        case .failure(let failure):
            throw failure
        }
    }

    private func inspect(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        let post = self.post!
        let user = self.user
        let answer = try await client.call("GET /admin/posts/\(post)") { client throws(CounterClientError) in
            try await client.inspect(post: post, user: user)
        }
        output.standard(json ? Self.json(answer) : OperatorReport.inspection(answer))
        return answer.verdict == PostInspection.Verdict.drift ? .driftFound : .success
    }

    private func stats(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        let answer = try await client.call("GET /admin/stats") { client throws(CounterClientError) in try await client.statistics() }
        output.standard(json ? Self.json(answer) : OperatorReport.stats(answer))
        return .success
    }

    private func reconcile(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        let repair = self.repair
        let (totals, answers) = try await reconcilePages(client, "POST /admin/reconcile", report: { $0 }) {
            client, posts, after throws(CounterClientError) in
            try await client.reconcile(posts: posts, after: after, limit: 1_000, repair: repair)
        }
        output.standard(json ? Self.json(answers) : OperatorReport.reconcile(totals, repair: repair))
        return totals.hasUnrepairedDrift(repair: repair) ? .driftFound : .success
    }

    /// Runs reconcile calls: one for `--post`, or pages of 1,000 through every post (`--all`)
    /// with progress on standard error, each answer's report added to the totals.
    func reconcilePages<Answer: Sendable>(
        _ client: AdminClient, _ what: String, report: (Answer) -> ReconcileReport,
        _ call: @escaping @Sendable (CounterServiceClient, [Int64]?, Int64) async throws(CounterClientError) -> Answer
    )
        async throws(AdminClient.Failure) -> (OperatorReport.ReconcileTotals, [Answer])
    {
        var totals = OperatorReport.ReconcileTotals()
        var answers: [Answer] = []
        var after: Int64 = 0
        let posts = post.map { [$0] }
        while true {
            let from = after
            let answer = try await client.call(what) { client throws(CounterClientError) in try await call(client, posts, from) }
            let batch = report(answer)
            totals.add(batch)
            answers.append(answer)
            guard posts == nil else { break }
            output.error("reconcile: \(totals.checked) post(s) checked, \(totals.drifted.count) drifted so far")
            guard let next = batch.nextAfter else { break }
            after = next
        }
        return (totals, answers)
    }

    private func deadLetters(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        let ids = self.ids
        switch verb {
        case "list":
            let letters = try await client.call("GET /admin/dead-letters") { client throws(CounterClientError) in
                try await client.deadLetters(count: 1_000)
            }
            output.standard(json ? Self.json(DeadLetterList(deadLetters: letters)) : OperatorReport.deadLetters(letters))
            return .success
        case "replay" where !thisNode:
            return try await clusterReplay(client)
        case "replay":
            let answer = try await client.call("POST /admin/dead-letters/replay") { client throws(CounterClientError) in
                try await client.replayDeadLetters(ids: ids.isEmpty ? nil : ids)
            }
            output.standard(json ? Self.json(answer) : OperatorReport.replay(answer))
            return answer.failed.isEmpty ? .success : .failure
        default:
            let dropped = try await client.call("POST /admin/dead-letters/drop") { client throws(CounterClientError) in
                try await client.dropDeadLetters(ids: ids)
            }
            output.standard(json ? Self.json(DropResult(dropped: dropped)) : "dropped \(dropped) dead letter(s)")
            return .success
        }
    }

    private func cluster(_ client: AdminClient) async throws(AdminClient.Failure) -> ExitStatus {
        if verb == "status" {
            let map = try await client.call("GET /v1/cluster") { client throws(CounterClientError) in try await client.clusterMap() }
            output.standard(json ? Self.json(map) : OperatorReport.cluster(map))
            return .success
        }
        let node = self.node!
        let draining = !undo
        let answer = try await client.call("POST /admin/cluster/drain") { client throws(CounterClientError) in
            try await client.drainNode(node, draining: draining)
        }
        output.standard(
            json
                ? Self.json(answer)
                : answer.draining
                    ? "node \(answer.nodeID) is draining: its slots go to the other nodes (see counter-node cluster status)"
                    : "node \(answer.nodeID) takes slots again")
        return .success
    }

    /// `--json`: the answer in the node's own wire format.
    static func json<Answer: Encodable>(_ answer: Answer) -> String {
        (try? WireEncoder.text(answer)) ?? "null"
    }

    static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}
