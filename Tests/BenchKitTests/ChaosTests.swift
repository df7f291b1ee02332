import Testing

@testable import BenchKit

@Suite("Chaos run: schedule, workload and timeline (pure)")
struct ChaosTests {
    @Test("two minutes hold each fault once, 17 s apart from 8 s, none in the last 12 s; longer runs repeat them in turn")
    func schedule() {
        let two = ChaosSchedule(duration: .seconds(120))
        #expect(two.entries.map(\.fault) == ChaosFault.allCases)
        #expect(two.entries.map(\.at) == [8, 25, 42, 59, 76, 93].map { Duration.seconds($0) })
        let thirty = ChaosSchedule(duration: .seconds(1_800))
        #expect(thirty.entries.count == 105)
        #expect(thirty.entries.allSatisfy { $0.at + .seconds(12) <= .seconds(1_800) })
        for (index, entry) in thirty.entries.enumerated() { #expect(entry.fault == ChaosFault.allCases[index % ChaosFault.allCases.count]) }
        #expect(ChaosSchedule(duration: .seconds(15)).entries.isEmpty)
    }

    @Test(
        "writes carry their pair, each pair belongs to one connection, each connection writes as its poison user; reads and feed queries carry none")
    func workload() {
        let workload = ChaosWorkload(posts: Array(1...50), token: nil, userBase: 1_000_000)
        var random = SystemRandomNumberGenerator()
        var owner: [Int64: Int] = [:]
        var kinds: Set<String> = []
        var poisonWrites: [Int: Int] = [:]
        for connection in 0..<8 {
            for sequence in 0..<2_000 {
                let request = workload.request(connection: connection, sequence: sequence, random: &random)
                let text = String(decoding: request.bytes, as: UTF8.self)
                let method = String(text.prefix { $0 != " " })
                kinds.insert(method + (text.contains("/toggle ") ? " toggle" : text.contains("/query ") ? " query" : ""))
                if let pair = request.pair {
                    #expect(["POST", "PUT", "DELETE"].contains(method) && !text.contains("/query "))
                    #expect(owner.updateValue(connection, forKey: pair.user) ?? connection == connection, "user \(pair.user)")
                    #expect(text.contains("/v1/posts/\(pair.post)/likes/\(pair.user)"))
                    if workload.isPoison(pair.user) {
                        #expect(pair.user == 1_000_000 + Int64(connection) * workload.usersPerConnection + 1)
                        poisonWrites[connection, default: 0] += 1
                    }
                } else {
                    #expect(method == "GET" || text.contains("/v1/posts/query "), "\(text)")
                }
            }
        }
        #expect(kinds == ["POST toggle", "PUT", "DELETE", "GET", "POST query"])
        #expect((0..<8).allSatisfy { poisonWrites[$0, default: 0] > 100 }, "\(poisonWrites)")
        #expect(workload.poisonCondition("u") == "(u > 1000000 AND (u - 1000000 - 1) % 50 = 0)")
    }

    @Test("the timeline has a row per bucket with its rates and the faults that began in it, then a line per fault")
    func timeline() {
        var timeline = ChaosTimeline()
        timeline.answered = [100, 100, 100, 0, 0, 50, 100, 100, 100, 100]
        timeline.failed = [0, 0, 0, 90, 90, 10, 0, 0, 0, 0]
        timeline.events = [.init(fault: .killNode, began: 3.2, ended: 5.4, note: "ready again after 2.2 s")]
        let lines = timeline.render(bucket: 5).split(separator: "\n").map(String.init)
        #expect(lines.count == 4)
        #expect(lines[1].hasPrefix("       0-5     60        36") && lines[1].hasSuffix("kill -9 node"), "\(lines[1])")
        #expect(lines[2].hasPrefix("      5-10     90         2") && !lines[2].contains("kill"), "\(lines[2])")
        #expect(lines[3] == "  kill -9 node at 3.2 s, over at 5.4 s: ready again after 2.2 s")
    }
}
