import ShardRouter

/// Pure: sends groups of slot commands to the masters that serve their slots, and reads the
/// answers the way Redis Cluster means them — `MOVED` (the slot lives elsewhere now: send there,
/// and tell the map), `ASK` (the slot is being migrated: send there once, after `ASKING`),
/// `TRYAGAIN`/`LOADING` (back off, send again), `CLUSTERDOWN` or no master (give up: the group
/// did not run). Only what did not run is sent again: a plain group's commands that were
/// redirected, an atomic group whole (a redirected `MULTI … EXEC` runs nothing).
///
/// The I/O shell (`RedisClient`) asks for a round (`nextRound`), sends each `Send` on the
/// endpoint's connection, hands the outcome back (`receive`), and repeats until `isFinished`,
/// sleeping `backoff` first when the machine asks for it.
///
/// Against a Redis that is not a cluster, the fenced groups of a round go as one script per 64
/// (`FencedScript.guardedWrites`) instead of one per group: each group still runs only if its
/// slot's epoch is held, and the others run whatever one group's fence says.
struct SlotDispatch {
    /// One pipeline to one endpoint, and which groups' commands it carries where.
    struct Send {
        let endpoint: RedisEndpoint
        var commands: [RedisCommand] = []
        fileprivate var parts: [Part] = []

        /// A pipeline outside any dispatch (a `PING` to each master, say).
        init(endpoint: RedisEndpoint, commands: [RedisCommand] = []) {
            self.endpoint = endpoint
            self.commands = commands
        }
    }

    fileprivate struct Part {
        let group: Int
        /// Indices into the group's commands, in the order sent.
        let indices: [Int]
        let asking: Bool
        let atomic: Bool
        /// Sent as the fencing script (`FencedScript`): one reply (after `ASKING`'s, if asked).
        let fenced: Bool
        /// For a part that is one `guardedWrites` script: the groups it carries, in order
        /// (`group` is the first). Empty for any other part.
        let together: [Int]
        /// Where the part's replies start in the pipeline's replies.
        let firstReply: Int
        let replyCount: Int
    }

    /// What the shell should do besides sending.
    enum Event: Equatable {
        /// A `MOVED` answer: the map should say that `endpoint` serves `slot`.
        case moved(HashSlot, RedisEndpoint)
        /// Nothing reached `endpoint` (it refused or is down): read the slot map again before
        /// the next round.
        case refreshMap(RedisEndpoint)
    }

    /// Redirects and retries per endpoint that answered, for statistics.
    struct Counters: Equatable {
        var moved = 0
        var ask = 0
        var tryAgain = 0
        var clusterDown = 0
    }

    private struct GroupState {
        let group: SlotCommands
        var pending: [Int]
        var replies: [RedisReply?]
        var askTarget: RedisEndpoint?
        var result: Result<[RedisReply], RedisError>?
        /// Connection failures (nothing sent) seen; one is retried after a map refresh.
        var connectionFailures = 0
        /// A fenced group is sent with the script's text (`EVAL`) once Redis said it does not
        /// have the script cached (`NOSCRIPT`, after a restart or failover).
        var loadingScript = false
    }

    private var groups: [GroupState]
    private let followsRedirects: Bool
    private let maximumRounds: Int
    private var rounds = 0
    /// Rounds before this one, back to back, that met a `TRYAGAIN`.
    private var tryAgainStreak = 0
    private var sawTryAgain = false
    /// Redirect counts per endpoint that answered with them.
    private(set) var counters: [RedisEndpoint: Counters] = [:]
    /// Whether a group failed because no master served its slot or the cluster said it is down:
    /// the map should be read again soon, not only at the next periodic refresh.
    private(set) var sawClusterTrouble = false

    /// - Parameters:
    ///   - followsRedirects: `false` for a Redis that is not a cluster: cluster answers are then
    ///     ordinary errors, as any other.
    ///   - maximumRounds: rounds after which groups still redirected give up.
    init(_ groups: [SlotCommands], followsRedirects: Bool, maximumRounds: Int = 32) {
        self.groups = groups.map {
            GroupState(group: $0, pending: Array($0.commands.indices), replies: Array(repeating: nil, count: $0.commands.count))
        }
        self.followsRedirects = followsRedirects
        self.maximumRounds = maximumRounds
    }

    /// Whether every group has its result.
    var isFinished: Bool { groups.allSatisfy { $0.result != nil } }

    /// One result per group, in order: the replies of its commands (for an atomic group, the
    /// replies inside `EXEC`), or why it failed. Call once `isFinished`.
    var results: [Result<[RedisReply], RedisError>] {
        groups.map { $0.result ?? .failure(RedisError(code: .clusterUnavailable, message: "not sent")) }
    }

    /// How long to wait before the next round: after a `TRYAGAIN`, 5 ms doubling to 200 ms;
    /// otherwise none.
    var backoff: Duration? {
        guard sawTryAgain else { return nil }
        return .milliseconds(min(5 << min(tryAgainStreak, 10), 200))
    }

    /// The pipelines of the next round, at most one per endpoint. Groups whose slot no master
    /// serves fail here. Empty when finished.
    mutating func nextRound(master: (HashSlot) -> RedisEndpoint?) -> [Send] {
        if isFinished { return [] }
        rounds += 1
        if sawTryAgain { tryAgainStreak += 1 } else { tryAgainStreak = 0 }
        sawTryAgain = false
        if rounds > maximumRounds {
            for index in groups.indices where groups[index].result == nil {
                groups[index].result = .failure(
                    RedisError(
                        code: .clusterUnavailable,
                        message:
                            "slot \(groups[index].group.slot.rawValue) was still redirected after \(maximumRounds) attempts (a slot migration that does not settle?); its commands did not run"
                    ))
            }
            return []
        }
        var sends: [Send] = []
        var sendIndex: [RedisEndpoint: Int] = [:]
        // Fenced groups waiting to go together, per send (a server that is not a cluster).
        var together: [Int: [Int]] = [:]
        for index in groups.indices where groups[index].result == nil {
            let state = groups[index]
            guard let endpoint = state.askTarget ?? master(state.group.slot) else {
                sawClusterTrouble = true
                groups[index].result = .failure(
                    RedisError(
                        code: .clusterUnavailable, message: "no master serves slot \(state.group.slot.rawValue) (the cluster is down or failing over)"
                    ))
                continue
            }
            let position: Int
            if let known = sendIndex[endpoint] {
                position = known
            } else {
                position = sends.count
                sendIndex[endpoint] = position
                sends.append(Send(endpoint: endpoint))
            }
            if !followsRedirects && state.group.fence != nil {
                together[position, default: []].append(index)
                if together[position]!.count == FencedScript.maximumGroupsPerScript {
                    appendTogether(together.removeValue(forKey: position)!, to: &sends[position])
                }
            } else {
                // What went before it is sent before it.
                if let waiting = together.removeValue(forKey: position) { appendTogether(waiting, to: &sends[position]) }
                append(index, to: &sends[position])
            }
        }
        for (position, indices) in together { appendTogether(indices, to: &sends[position]) }
        return sends
    }

    /// Appends fenced groups as one `guardedWrites` script (a lone one as `guardedWrite`).
    private func appendTogether(_ indices: [Int], to send: inout Send) {
        if indices.count == 1 {
            append(indices[0], to: &send)
            return
        }
        let loadingScript = indices.contains { groups[$0].loadingScript }
        let first = send.commands.count
        send.commands.append(
            FencedScript.command(forGroups: indices.map { (groups[$0].group.commands, groups[$0].group.fence!) }, loadingScript: loadingScript))
        send.parts.append(
            Part(
                group: indices[0], indices: [], asking: false, atomic: true, fenced: true, together: indices,
                firstReply: first, replyCount: 1))
    }

    private func append(_ index: Int, to send: inout Send) {
        let state = groups[index]
        let asking = state.askTarget != nil
        let first = send.commands.count
        if let fence = state.group.fence {
            if asking { send.commands.append(RedisCommand("ASKING")) }
            send.commands.append(FencedScript.command(for: state.group.commands, fence: fence, loadingScript: state.loadingScript))
        } else if state.group.atomic {
            if asking { send.commands.append(RedisCommand("ASKING")) }
            send.commands.append(RedisCommand("MULTI"))
            send.commands.append(contentsOf: state.group.commands)
            send.commands.append(RedisCommand("EXEC"))
        } else {
            for command in state.pending {
                if asking { send.commands.append(RedisCommand("ASKING")) }
                send.commands.append(state.group.commands[command])
            }
        }
        send.parts.append(
            Part(
                group: index, indices: state.pending, asking: asking, atomic: state.group.atomic,
                fenced: state.group.fence != nil, together: [],
                firstReply: first, replyCount: send.commands.count - first))
    }

    /// Takes the outcome of one `Send`: the pipeline's replies in order, or the connection error.
    mutating func receive(_ send: Send, _ outcome: Result<[RedisReply], RedisError>) -> [Event] {
        switch outcome {
        case .failure(let error):
            var events: [Event] = []
            for part in send.parts {
                if !part.together.isEmpty {
                    // Never retried: a server that is not a cluster has no map to read again.
                    for group in part.together { groups[group].result = .failure(error) }
                    continue
                }
                // Nothing was sent: safe to try once more after the map is read again (the
                // master may have failed over). Broken mid-way: the outcome is unknown.
                if error.code == .connectionFailed && followsRedirects && groups[part.group].connectionFailures == 0 {
                    groups[part.group].connectionFailures += 1
                    groups[part.group].askTarget = nil
                    if !events.contains(.refreshMap(send.endpoint)) { events.append(.refreshMap(send.endpoint)) }
                } else {
                    groups[part.group].result = .failure(error)
                }
            }
            return events
        case .success(let replies):
            var events: [Event] = []
            for part in send.parts {
                let slice = Array(replies[part.firstReply..<(part.firstReply + part.replyCount)])
                if !part.together.isEmpty {
                    receiveTogether(part, slice[0])
                } else if part.fenced {
                    receiveFenced(part, slice, from: send.endpoint, events: &events)
                } else if part.atomic {
                    receiveAtomic(part, slice, from: send.endpoint, events: &events)
                } else {
                    receivePlain(part, slice, from: send.endpoint, events: &events)
                }
            }
            return events
        }
    }

    private mutating func receivePlain(_ part: Part, _ replies: [RedisReply], from endpoint: RedisEndpoint, events: inout [Event]) {
        let step = part.asking ? 2 : 1
        var stillPending: [Int] = []
        var redirectedTo: RedisEndpoint?? = nil
        var down = false
        for (offset, command) in part.indices.enumerated() {
            let reply = replies[offset * step + step - 1]
            if followsRedirects, let redirect = RedisRedirect(reply: reply, askedHost: endpoint.host) {
                stillPending.append(command)
                apply(redirect, from: endpoint, events: &events, askTarget: &redirectedTo, down: &down)
            } else {
                groups[part.group].replies[command] = reply
            }
        }
        groups[part.group].pending = stillPending
        if down {
            groups[part.group].result = .failure(Self.clusterDown(groups[part.group].group.slot))
        } else if stillPending.isEmpty {
            groups[part.group].result = .success(groups[part.group].replies.map { $0 ?? .null })
        } else {
            groups[part.group].askTarget = redirectedTo ?? nil
        }
    }

    private mutating func receiveFenced(_ part: Part, _ replies: [RedisReply], from endpoint: RedisEndpoint, events: inout [Event]) {
        let reply = replies[replies.count - 1]
        switch reply {
        case .array(let results):
            groups[part.group].result = .success(results)
        case .error(let text) where text.hasPrefix("NOSCRIPT") && !groups[part.group].loadingScript:
            // Nothing ran; send the script's text next round.
            groups[part.group].loadingScript = true
        case .error(let text) where text.hasPrefix("FENCED"):
            groups[part.group].result = .failure(RedisError(code: .fenced, message: "(Redis) \(text)"))
        default:
            if followsRedirects, let redirect = RedisRedirect(reply: reply, askedHost: endpoint.host) {
                redirectWhole(part, redirect, from: endpoint, events: &events)
                return
            }
            if case .error(let text) = reply {
                groups[part.group].result = .failure(Self.scriptFailure(text))
            } else {
                groups[part.group].result = .failure(
                    RedisError(
                        code: .unexpectedReply, message: "the fenced write of slot \(groups[part.group].group.slot.rawValue) answered \(reply)"))
            }
        }
    }

    private mutating func receiveTogether(_ part: Part, _ reply: RedisReply) {
        switch reply {
        case .array(let results) where results.count == part.together.count:
            for (group, result) in zip(part.together, results) {
                switch result {
                case .array(let replies):
                    groups[group].result = .success(replies)
                case .error(let text) where text.hasPrefix("FENCED"):
                    groups[group].result = .failure(RedisError(code: .fenced, message: "(Redis) \(text)"))
                default:
                    groups[group].result = .failure(
                        RedisError(
                            code: .unexpectedReply, message: "the fenced write of slot \(groups[group].group.slot.rawValue) answered \(result)"))
                }
            }
        case .error(let text) where text.hasPrefix("NOSCRIPT") && !part.together.contains(where: { groups[$0].loadingScript }):
            // Nothing ran; send the script's text next round.
            for group in part.together { groups[group].loadingScript = true }
        case .error(let text):
            for group in part.together { groups[group].result = .failure(Self.scriptFailure(text)) }
        default:
            for group in part.together {
                groups[group].result = .failure(
                    RedisError(code: .unexpectedReply, message: "the fenced writes of \(part.together.count) slots answered \(reply)"))
            }
        }
    }

    /// Error replies with which Redis refuses a script before running any of it.
    private static let refusalsBeforeRunning = [
        "BUSY", "LOADING", "MASTERDOWN", "NOREPLICAS", "MISCONF", "READONLY", "OOM", "NOPERM", "NOAUTH",
        "CLUSTERDOWN", "TRYAGAIN", "CROSSSLOT",
    ]

    /// What a fenced script's error reply means for its groups. A refusal before running leaves
    /// nothing written (`.server`). Any other error stopped the script part-way (a Lua error),
    /// and what it wrote before stays in Redis: the outcome is unknown, as after a broken
    /// connection, so the caller reads the slots' logs again rather than take the writes as not
    /// made.
    static func scriptFailure(_ text: String) -> RedisError {
        if refusalsBeforeRunning.contains(where: { text.hasPrefix($0) }) { return .server(text) }
        return RedisError(
            code: .connectionLost,
            message: "(Redis) \(text) — the fenced script stopped part-way; what it wrote before that is unknown")
    }

    /// A group that did not run (atomic or fenced) was redirected: it is sent whole again where
    /// the answer says, or fails if the cluster is down.
    private mutating func redirectWhole(_ part: Part, _ redirect: RedisRedirect, from endpoint: RedisEndpoint, events: inout [Event]) {
        var askTarget: RedisEndpoint?? = nil
        var down = false
        apply(redirect, from: endpoint, events: &events, askTarget: &askTarget, down: &down)
        if down {
            groups[part.group].result = .failure(Self.clusterDown(groups[part.group].group.slot))
        } else {
            groups[part.group].askTarget = askTarget ?? nil
        }
    }

    private mutating func receiveAtomic(_ part: Part, _ replies: [RedisReply], from endpoint: RedisEndpoint, events: inout [Event]) {
        let exec = replies[replies.count - 1]
        if case .array(let results) = exec {
            groups[part.group].result = .success(results)
            return
        }
        // Not run. A cluster answer (on EXEC itself, or on a queued command, which then aborts
        // EXEC) says where to go; any other error is the group's result.
        let queued = replies.dropLast()
        if followsRedirects,
            let redirect = RedisRedirect(reply: exec, askedHost: endpoint.host)
                ?? queued.lazy.compactMap({ RedisRedirect(reply: $0, askedHost: endpoint.host) }).first
        {
            redirectWhole(part, redirect, from: endpoint, events: &events)
            return
        }
        var text = exec.isNull ? "EXEC returned nil (transaction aborted)" : "\(exec)"
        if case .error(let execText) = exec { text = execText }
        if case .error(let why)? = queued.first(where: { if case .error = $0 { return true } else { return false } }) {
            text += "; first refused command: \(why)"
        }
        groups[part.group].result = .failure(RedisError.server(text))
    }

    /// Records a redirect. `askTarget` ends as the endpoint to send to once (ASK), `nil` to go
    /// by the map again, or stays unset when nothing was said.
    private mutating func apply(
        _ redirect: RedisRedirect, from endpoint: RedisEndpoint, events: inout [Event],
        askTarget: inout RedisEndpoint??, down: inout Bool
    ) {
        switch redirect {
        case .moved(let slot, let target):
            counters[endpoint, default: Counters()].moved += 1
            if !events.contains(.moved(slot, target)) { events.append(.moved(slot, target)) }
            askTarget = .some(nil)
        case .ask(_, let target):
            counters[endpoint, default: Counters()].ask += 1
            askTarget = .some(target)
        case .tryAgain:
            counters[endpoint, default: Counters()].tryAgain += 1
            sawTryAgain = true
            askTarget = .some(nil)
        case .clusterDown:
            counters[endpoint, default: Counters()].clusterDown += 1
            sawClusterTrouble = true
            down = true
        }
    }

    private static func clusterDown(_ slot: HashSlot) -> RedisError {
        RedisError(code: .clusterUnavailable, message: "the cluster answered CLUSTERDOWN for slot \(slot.rawValue); nothing ran")
    }
}
