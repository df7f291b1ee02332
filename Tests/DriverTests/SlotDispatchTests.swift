import ShardRouter
import TestSupport
import Testing

@testable import RedisDriver

/// The cluster routing logic without servers: scripted answers, and a model of a cluster in the
/// middle of slot migrations that a random workload must get through exactly once.
@Suite("Slot dispatch (pure)")
struct SlotDispatchTests {
    static let a = RedisEndpoint(host: "10.0.0.1", port: 7000)
    static let b = RedisEndpoint(host: "10.0.0.2", port: 7000)
    static let c = RedisEndpoint(host: "10.0.0.3", port: 7000)
    static let slot1 = HashSlot(rawValue: 1)!
    static let slot2 = HashSlot(rawValue: 2)!

    static func names(_ send: SlotDispatch.Send) -> [String] { send.commands.map(\.name) }

    @Test("one server: the groups go out as one pipeline, in order, transactions wrapped in MULTI/EXEC; cluster answers are plain errors")
    func singleServer() throws {
        var dispatch = SlotDispatch(
            [
                SlotCommands(slot: Self.slot1, commands: [RedisCommand("GET", "x"), RedisCommand("GET", "y")]),
                SlotCommands(slot: Self.slot2, commands: [RedisCommand("SET", "z", "1")], atomic: true),
            ], followsRedirects: false)
        let sends = dispatch.nextRound { _ in Self.a }
        #expect(sends.count == 1)
        #expect(Self.names(sends[0]) == ["GET", "GET", "MULTI", "SET", "EXEC"])
        let events = dispatch.receive(
            sends[0],
            .success([
                .bulkString(Array("1".utf8)), .error("MOVED 1 10.0.0.2:7000"), .status("OK"), .status("QUEUED"), .array([.status("OK")]),
            ]))
        #expect(events.isEmpty)
        #expect(dispatch.isFinished)
        #expect(try dispatch.results[0].get() == [.bulkString(Array("1".utf8)), .error("MOVED 1 10.0.0.2:7000")])
        #expect(try dispatch.results[1].get() == [.status("OK")])
    }

    @Test("one server: fenced groups go as one script, in their place among the others; each has its own result; NOSCRIPT sends the text once")
    func fencedTogether() throws {
        func fenced(_ slot: Int, _ key: String) -> SlotCommands {
            SlotCommands(
                slot: HashSlot(rawValue: UInt16(slot))!, commands: [RedisCommand("SET", key, "1")],
                fence: SlotFence(key: "epoch:\(slot)", epoch: Int64(slot)))
        }
        var dispatch = SlotDispatch(
            [fenced(1, "a"), fenced(2, "b"), SlotCommands(slot: Self.slot1, commands: [RedisCommand("GET", "a")]), fenced(3, "c"), fenced(4, "d")],
            followsRedirects: false)
        let first = dispatch.nextRound { _ in Self.a }
        #expect(first.count == 1)
        #expect(Self.names(first[0]) == ["EVALSHA", "GET", "EVALSHA"])
        #expect(first[0].commands[0].decodedArguments.dropFirst().prefix(4) == [FencedScript.guardedWritesSHA, "2", "epoch:1", "epoch:2"])
        _ = dispatch.receive(
            first[0],
            .success([
                .array([.array([.status("OK")]), .error("FENCED slot epoch is 9, the writer holds 2")]),
                .bulkString(Array("1".utf8)),
                .error("NOSCRIPT No matching script."),
            ]))
        #expect(!dispatch.isFinished)
        let second = dispatch.nextRound { _ in Self.a }
        #expect(Self.names(second[0]) == ["EVAL"])
        #expect(second[0].commands[0].decodedArguments[1] == FencedScript.guardedWrites)
        _ = dispatch.receive(second[0], .success([.array([.array([.status("OK")]), .array([.status("OK")])])]))
        #expect(dispatch.isFinished)
        let results = dispatch.results
        #expect(try results[0].get() == [.status("OK")])
        #expect(results[1].fenceRefused)
        #expect(try results[2].get() == [.bulkString(Array("1".utf8))])
        #expect(try results[3].get() == [.status("OK")])
        #expect(try results[4].get() == [.status("OK")])

        // A script that stopped part-way (a Lua error) leaves every group it carried unknown; a
        // refusal before it ran leaves them not run.
        for (text, code) in [("ERR user_script:9: bad argument", RedisError.Code.connectionLost), ("BUSY Redis is busy", .server)] {
            var failing = SlotDispatch([fenced(1, "a"), fenced(2, "b")], followsRedirects: false)
            let send = failing.nextRound { _ in Self.a }[0]
            _ = failing.receive(send, .success([.error(text)]))
            for result in failing.results {
                if case .failure(let error) = result { #expect(error.code == code, "\(text)") } else { Issue.record("expected a failure") }
            }
        }

        // More groups than one script carries: several scripts.
        var many = SlotDispatch((1...(FencedScript.maximumGroupsPerScript + 1)).map { fenced($0, "k\($0)") }, followsRedirects: false)
        #expect(Self.names(many.nextRound { _ in Self.a }[0]) == ["EVALSHA", "EVALSHA"])

        // On a cluster each fenced group stays a script of its own.
        var cluster = SlotDispatch([fenced(1, "a"), fenced(2, "b")], followsRedirects: true)
        #expect(Self.names(cluster.nextRound { _ in Self.a }[0]) == ["EVALSHA", "EVALSHA"])
    }

    @Test("a cluster: one pipeline per master, results back in the groups' order")
    func splitByMaster() {
        var dispatch = SlotDispatch(
            [
                SlotCommands(slot: Self.slot1, commands: [RedisCommand("GET", "x")]),
                SlotCommands(slot: Self.slot2, commands: [RedisCommand("GET", "y")]),
                SlotCommands(slot: Self.slot1, commands: [RedisCommand("GET", "z")]),
            ], followsRedirects: true)
        let sends = dispatch.nextRound { $0 == Self.slot1 ? Self.a : Self.b }
        #expect(sends.map(\.endpoint) == [Self.a, Self.b])
        #expect(sends[0].commands.count == 2 && sends[1].commands.count == 1)
        _ = dispatch.receive(sends[1], .success([.integer(2)]))
        _ = dispatch.receive(sends[0], .success([.integer(1), .integer(3)]))
        #expect(dispatch.isFinished)
        #expect(dispatch.results.map { try? $0.get() } == [[.integer(1)], [.integer(2)], [.integer(3)]])
    }

    @Test("MOVED: the map is told, and only the redirected commands are sent again, to the new master")
    func moved() throws {
        var dispatch = SlotDispatch(
            [
                SlotCommands(slot: Self.slot1, commands: [RedisCommand("GET", "x"), RedisCommand("GET", "y")])
            ], followsRedirects: true)
        let first = dispatch.nextRound { _ in Self.a }
        let events = dispatch.receive(first[0], .success([.integer(1), .error("MOVED 1 10.0.0.2:7000")]))
        #expect(events == [.moved(Self.slot1, Self.b)])
        #expect(dispatch.backoff == nil)
        let second = dispatch.nextRound { _ in Self.b }
        #expect(second.map(\.endpoint) == [Self.b])
        #expect(second[0].commands == [RedisCommand("GET", "y")])
        _ = dispatch.receive(second[0], .success([.integer(2)]))
        #expect(try dispatch.results[0].get() == [.integer(1), .integer(2)])
        #expect(dispatch.counters[Self.a]?.moved == 1)
    }

    @Test("ASK on a transaction: sent once to the target with ASKING first; the map is not changed")
    func askTransaction() throws {
        var dispatch = SlotDispatch(
            [SlotCommands(slot: Self.slot1, commands: [RedisCommand("SADD", "s", "1")], atomic: true)],
            followsRedirects: true)
        let first = dispatch.nextRound { _ in Self.a }
        let events = dispatch.receive(
            first[0],
            .success([
                .status("OK"), .error("ASK 1 10.0.0.3:7000"),
                .error("EXECABORT Transaction discarded because of previous errors."),
            ]))
        #expect(events.isEmpty)
        let second = dispatch.nextRound { _ in Self.a }
        #expect(second[0].endpoint == Self.c)
        #expect(Self.names(second[0]) == ["ASKING", "MULTI", "SADD", "EXEC"])
        _ = dispatch.receive(second[0], .success([.status("OK"), .status("OK"), .status("QUEUED"), .array([.integer(1)])]))
        #expect(try dispatch.results[0].get() == [.integer(1)])
    }

    @Test("ASK on plain commands: each redirected command gets its own ASKING")
    func askPlain() throws {
        var dispatch = SlotDispatch(
            [SlotCommands(slot: Self.slot1, commands: [RedisCommand("GET", "x"), RedisCommand("GET", "y")])],
            followsRedirects: true)
        let first = dispatch.nextRound { _ in Self.a }
        _ = dispatch.receive(first[0], .success([.error("ASK 1 10.0.0.3:7000"), .error("ASK 1 10.0.0.3:7000")]))
        let second = dispatch.nextRound { _ in Self.a }
        #expect(Self.names(second[0]) == ["ASKING", "GET", "ASKING", "GET"])
        _ = dispatch.receive(second[0], .success([.status("OK"), .integer(1), .status("OK"), .integer(2)]))
        #expect(try dispatch.results[0].get() == [.integer(1), .integer(2)])
    }

    @Test("TRYAGAIN: back off (5 ms, doubling) and send again to the map's master, not the ASK target")
    func tryAgain() {
        var dispatch = SlotDispatch(
            [SlotCommands(slot: Self.slot1, commands: [RedisCommand("SET", "x", "1"), RedisCommand("SET", "y", "1")], atomic: true)],
            followsRedirects: true)
        let first = dispatch.nextRound { _ in Self.a }
        _ = dispatch.receive(first[0], .success([.status("OK"), .status("QUEUED"), .status("QUEUED"), .error("ASK 1 10.0.0.3:7000")]))
        let second = dispatch.nextRound { _ in Self.a }
        #expect(second[0].endpoint == Self.c)
        _ = dispatch.receive(
            second[0],
            .success([
                .status("OK"), .status("OK"), .status("QUEUED"), .status("QUEUED"),
                .error("TRYAGAIN Multiple keys request during rehashing of slot"),
            ]))
        #expect(dispatch.backoff == .milliseconds(5))
        let third = dispatch.nextRound { _ in Self.a }
        #expect(third[0].endpoint == Self.a)
        _ = dispatch.receive(
            third[0],
            .success([.status("OK"), .status("QUEUED"), .status("QUEUED"), .error("TRYAGAIN Multiple keys request during rehashing of slot")]))
        #expect(dispatch.backoff == .milliseconds(10))
        let fourth = dispatch.nextRound { _ in Self.a }
        _ = dispatch.receive(fourth[0], .success([.status("OK"), .status("QUEUED"), .status("QUEUED"), .array([.status("OK"), .status("OK")])]))
        #expect(dispatch.isFinished)
        #expect(dispatch.counters[Self.c]?.tryAgain == 1 && dispatch.counters[Self.a]?.tryAgain == 1)
    }

    @Test("CLUSTERDOWN, no master for the slot, and an aborted transaction fail their group alone")
    func failures() throws {
        var dispatch = SlotDispatch(
            [
                SlotCommands(slot: Self.slot1, commands: [RedisCommand("GET", "x")]),
                SlotCommands(slot: Self.slot2, commands: [RedisCommand("GET", "y")]),
                SlotCommands(slot: HashSlot(rawValue: 3)!, commands: [RedisCommand("GET", "z")]),
                SlotCommands(slot: HashSlot(rawValue: 4)!, commands: [RedisCommand("BAD")], atomic: true),
            ], followsRedirects: true)
        let sends = dispatch.nextRound { $0.rawValue == 2 ? nil : Self.a }
        #expect(sends.count == 1)
        _ = dispatch.receive(
            sends[0],
            .success([
                .error("CLUSTERDOWN The cluster is down"), .integer(3),
                .status("OK"), .error("ERR unknown command 'BAD'"), .error("EXECABORT Transaction discarded because of previous errors."),
            ]))
        #expect(dispatch.isFinished)
        #expect(dispatch.sawClusterTrouble, "the map should be read again")
        let results = dispatch.results
        #expect(throws: RedisError.self) { try results[0].get() }
        if case .failure(let error) = results[0] { #expect(error.code == .clusterUnavailable) }
        if case .failure(let error) = results[1] { #expect(error.code == .clusterUnavailable && error.message.contains("no master serves slot 2")) }
        #expect(try results[2].get() == [.integer(3)])
        if case .failure(let error) = results[3] {
            #expect(error.code == .server && error.message.contains("EXECABORT") && error.message.contains("unknown command"))
        } else {
            Issue.record("the aborted transaction should fail")
        }
    }

    @Test("a broken connection is an unknown outcome, never retried; a refused one is retried once after the map is read again")
    func connectionErrors() {
        var dispatch = SlotDispatch(
            [
                SlotCommands(slot: Self.slot1, commands: [RedisCommand("SET", "x", "1")]),
                SlotCommands(slot: Self.slot2, commands: [RedisCommand("SET", "y", "1")]),
            ], followsRedirects: true)
        let first = dispatch.nextRound { $0 == Self.slot1 ? Self.a : Self.b }
        _ = dispatch.receive(first[0], .failure(RedisError(code: .connectionLost, message: "lost")))
        let events = dispatch.receive(first[1], .failure(RedisError(code: .connectionFailed, message: "refused")))
        #expect(events == [.refreshMap(Self.b)])
        let second = dispatch.nextRound { _ in Self.c }
        #expect(second.map(\.endpoint) == [Self.c])
        #expect(second[0].commands == [RedisCommand("SET", "y", "1")])
        _ = dispatch.receive(second[0], .failure(RedisError(code: .connectionFailed, message: "refused again")))
        #expect(dispatch.isFinished)
        if case .failure(let error) = dispatch.results[0] { #expect(error.code == .connectionLost) } else { Issue.record("expected a failure") }
        if case .failure(let error) = dispatch.results[1] { #expect(error.message == "refused again") } else { Issue.record("expected a failure") }
    }

    @Test("redirects that never settle give up after the round limit, and nothing ran")
    func roundLimit() {
        var dispatch = SlotDispatch(
            [SlotCommands(slot: Self.slot1, commands: [RedisCommand("GET", "x")])],
            followsRedirects: true, maximumRounds: 4)
        var rounds = 0
        while true {
            let sends = dispatch.nextRound { _ in Self.a }
            if sends.isEmpty { break }
            rounds += 1
            _ = dispatch.receive(sends[0], .success([.error("MOVED 1 10.0.0.1:7000")]))
        }
        #expect(rounds == 4)
        if case .failure(let error) = dispatch.results[0] { #expect(error.code == .clusterUnavailable) } else { Issue.record("expected a failure") }
    }

    @Test("redirect replies are read with their slot and address; an empty host means the node that answered")
    func redirectParsing() {
        #expect(
            RedisRedirect(errorText: "MOVED 3999 127.0.0.1:6381", askedHost: "x")
                == .moved(HashSlot(rawValue: 3999)!, RedisEndpoint(host: "127.0.0.1", port: 6381)))
        #expect(
            RedisRedirect(errorText: "ASK 3999 :6381", askedHost: "10.1.1.1")
                == .ask(HashSlot(rawValue: 3999)!, RedisEndpoint(host: "10.1.1.1", port: 6381)))
        #expect(RedisRedirect(errorText: "TRYAGAIN Multiple keys request during rehashing of slot", askedHost: "x") == .tryAgain)
        #expect(RedisRedirect(errorText: "LOADING Redis is loading the dataset in memory", askedHost: "x") == .tryAgain)
        #expect(RedisRedirect(errorText: "CLUSTERDOWN Hash slot not served", askedHost: "x") == .clusterDown)
        #expect(RedisRedirect(errorText: "MOVED 99999 127.0.0.1:6381", askedHost: "x") == nil)
        #expect(RedisRedirect(errorText: "WRONGTYPE Operation against a key", askedHost: "x") == nil)
    }

    // MARK: - A cluster in the middle of migrations

    /// A model of Redis Cluster's routing rules: slot owners, slots migrating with some of their
    /// keys moved, ASKING, MULTI/EXEC; it records where each command ran.
    struct ModelCluster {
        var owner: [HashSlot: RedisEndpoint]
        /// Migrating slots: the target, and the keys already moved there.
        var migrating: [HashSlot: (to: RedisEndpoint, moved: Set<String>)] = [:]
        var executions: [String: Int] = [:]

        func location(of key: String, slot: HashSlot) -> RedisEndpoint {
            if let migration = migrating[slot], migration.moved.contains(key) { return migration.to }
            return owner[slot]!
        }

        /// Where `keys` (one slot) may run on `node`: nil to run, or the error reply.
        func check(_ keys: [String], slot: HashSlot, on node: RedisEndpoint, asking: Bool) -> RedisReply? {
            let present = keys.filter { location(of: $0, slot: slot) == node }
            if node == owner[slot] {
                if present.count == keys.count { return nil }
                guard let migration = migrating[slot] else { return nil }
                return present.isEmpty
                    ? .error("ASK \(slot.rawValue) \(migration.to)") : .error("TRYAGAIN Multiple keys request during rehashing of slot")
            }
            if let migration = migrating[slot], migration.to == node, asking {
                if Set(keys).count == 1 || present.count == keys.count { return nil }
                return .error("TRYAGAIN Multiple keys request during rehashing of slot")
            }
            return .error("MOVED \(slot.rawValue) \(owner[slot]!)")
        }

        mutating func serve(_ send: SlotDispatch.Send) -> [RedisReply] {
            var replies: [RedisReply] = []
            var asking = false
            var queue: [(String, HashSlot)]? = nil
            var aborted = false
            for command in send.commands {
                switch command.name {
                case "ASKING":
                    asking = true
                    replies.append(.status("OK"))
                    continue
                case "MULTI":
                    queue = []
                    aborted = false
                    replies.append(.status("OK"))
                    continue
                case "EXEC":
                    let queued = queue ?? []
                    queue = nil
                    defer { asking = false }
                    if aborted {
                        replies.append(.error("EXECABORT Transaction discarded because of previous errors."))
                        continue
                    }
                    if let slot = queued.first?.1, let refusal = check(queued.map(\.0), slot: slot, on: send.endpoint, asking: asking) {
                        replies.append(refusal)
                        continue
                    }
                    for (key, _) in queued { executions[key, default: 0] += 1 }
                    replies.append(.array(queued.map { _ in .status("OK") }))
                    continue
                default:
                    break
                }
                let key = Self.key(of: command)
                let slot = HashSlot(rawValue: UInt16(key.split(separator: ":")[0])!)!
                if queue != nil {
                    if let refusal = check([key], slot: slot, on: send.endpoint, asking: asking) {
                        aborted = true
                        replies.append(refusal)
                    } else {
                        queue!.append((key, slot))
                        replies.append(.status("QUEUED"))
                    }
                } else {
                    if let refusal = check([key], slot: slot, on: send.endpoint, asking: asking) {
                        replies.append(refusal)
                    } else {
                        executions[key, default: 0] += 1
                        replies.append(.status("OK"))
                    }
                    asking = false
                }
            }
            return replies
        }

        /// The key of `SET <key> v`, read back from the command's RESP.
        static func key(of command: RedisCommand) -> String {
            let text = String(decoding: command.encoded, as: UTF8.self)
            return String(text.split(separator: "\r\n")[4])
        }
    }

    @Test("through migrations and a stale map, every command of every group runs exactly once, transactions whole", arguments: 0..<40)
    func modelCluster(seed: Int) {
        var random = SeededGenerator(seed: UInt64(seed) &+ 1)
        let nodes = [Self.a, Self.b, Self.c]
        let slots = (0..<12).map { HashSlot(rawValue: UInt16($0))! }
        var cluster = ModelCluster(owner: Dictionary(uniqueKeysWithValues: slots.map { ($0, nodes[Int(random.next() % 3)]) }))
        // The client's map is out of date for some slots.
        var clientMap = cluster.owner
        for slot in slots where random.next() % 3 == 0 { clientMap[slot] = nodes[Int(random.next() % 3)] }
        var groups: [SlotCommands] = []
        var keyNumber = 0
        for _ in 0..<30 {
            let slot = slots[Int(random.next() % UInt64(slots.count))]
            let count = 1 + Int(random.next() % 4)
            let commands = (0..<count).map { _ -> RedisCommand in
                keyNumber += 1
                return RedisCommand("SET", "\(slot.rawValue):k\(keyNumber)", "v")
            }
            groups.append(SlotCommands(slot: slot, commands: commands, atomic: random.next() % 2 == 0))
        }
        // Some slots are being migrated, with a random part of their keys moved already.
        let allKeys = groups.flatMap { group in group.commands.map { ModelCluster.key(of: $0) } }
        for slot in slots where random.next() % 3 == 0 {
            let target = nodes.filter { $0 != cluster.owner[slot] }[Int(random.next() % 2)]
            let keys = allKeys.filter { $0.hasPrefix("\(slot.rawValue):") && random.next() % 2 == 0 }
            cluster.migrating[slot] = (target, Set(keys))
        }

        var dispatch = SlotDispatch(groups, followsRedirects: true, maximumRounds: 64)
        var rounds = 0
        while true {
            let sends = dispatch.nextRound { clientMap[$0] }
            if sends.isEmpty { break }
            rounds += 1
            for send in sends {
                for event in dispatch.receive(send, .success(cluster.serve(send))) {
                    if case .moved(let slot, let endpoint) = event { clientMap[slot] = endpoint }
                }
            }
            // Now and then a migration finishes: every key moves, the target owns the slot.
            if random.next() % 4 == 0, let slot = cluster.migrating.keys.sorted().first {
                cluster.owner[slot] = cluster.migrating[slot]!.to
                cluster.migrating[slot] = nil
            }
        }
        #expect(dispatch.isFinished)
        for (group, result) in zip(groups, dispatch.results) {
            let keys = group.commands.map { ModelCluster.key(of: $0) }
            switch result {
            case .success(let replies):
                #expect(replies.count == keys.count)
                for key in keys { #expect(cluster.executions[key] == 1, "\(key) ran \(cluster.executions[key] ?? 0) times (seed \(seed))") }
            case .failure(let error):
                // Only a migration that never finished may leave a group undone — and then none of it ran.
                #expect(error.code == .clusterUnavailable, "seed \(seed): \(error)")
                if group.atomic { for key in keys { #expect(cluster.executions[key] == nil) } }
            }
        }
        #expect(cluster.executions.values.allSatisfy { $0 == 1 })
        #expect(rounds <= 64)
    }
}

extension Result where Success == [RedisReply], Failure == RedisError {
    fileprivate var fenceRefused: Bool {
        if case .failure(let error) = self { return error.code == .fenced }
        return false
    }
}
