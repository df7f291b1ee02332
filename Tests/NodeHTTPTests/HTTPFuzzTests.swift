import Foundation
import TestSupport
import Testing

@testable import NodeHTTP

/// Seeded random and mutated input (`FuzzInput`): none may crash or hang, each answer is a
/// refusal or a correct result, known-good input is accepted, and a good share of the mutated is.
@Suite("HTTP parsers under random input (seeded)")
struct HTTPFuzzTests {
    @Test("request targets: split at the first ?, nothing decoded, every argument a piece of the query as sent")
    func requestTargets() {
        var random = SeededGenerator(seed: 7)
        let seeds = [
            "/admin/posts/5?user=7", "/admin/dead-letters?count=10&x", "/admin/flush?wait=false", "/v1/posts/1%2F/likes/%31",
            "/a?b=c=d&&=e&f",
        ].map { Array($0.utf8) }
        for _ in 0..<FuzzInput.count(100_000) {
            let raw = String(decoding: FuzzInput.mutate(seeds.randomElement(using: &random)!, &random), as: UTF8.self)
            let target = RequestTarget(raw)
            // Split on bytes, as the target is: a separator followed by a combining mark is
            // still a separator.
            let mark = raw.utf8.firstIndex(of: UInt8(ascii: "?"))
            #expect(target.path == String(raw[..<(mark ?? raw.endIndex)]), "\(raw.debugDescription)")
            #expect(target.rawQuery == (mark.map { String(raw[raw.utf8.index(after: $0)...]) } ?? ""), "\(raw.debugDescription)")
            let pieces = target.rawQuery.utf8.split(separator: UInt8(ascii: "&")).map { String(Substring($0)) }
            for (name, value) in target.arguments {
                #expect(!name.isEmpty && (pieces.contains("\(name)=\(value)") || (value.isEmpty && pieces.contains(name))), "\(raw.debugDescription)")
            }
        }
    }

    @Test("a query is split on its bytes: & and the first = separate whatever follows them; empty names left out")
    func queryBytes() {
        let target = RequestTarget("/p?a=1&b=2=3&&=x&c&d=\u{301}&\u{301}e=4")
        #expect(target.arguments == ["a": "1", "b": "2=3", "c": "", "d": "\u{301}", "\u{301}e": "4"])
        #expect(target.path == "/p")
    }

    @Test("peer answers: any bytes are incomplete, malformed, or an answer whose body is no longer than what arrived")
    func peerAnswers() {
        var random = SeededGenerator(seed: 5)
        let seeds = [
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello",
            "HTTP/1.1 421 Misdirected Request\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            "HTTP/1.1 204 No Content\r\n\r\n",
        ].map { Array($0.utf8) }
        for (seed, (wantedStatus, wantedBody)) in zip(seeds, [(200, "hello"), (421, "{}"), (204, "")]) {
            guard case .complete(let status, _, let body, let used, _) = PeerResponseParser.parse(seed) else {
                Issue.record("a known-good answer was not read: \(String(decoding: seed, as: UTF8.self).debugDescription)")
                continue
            }
            #expect(status == wantedStatus && body == Array(wantedBody.utf8) && used == seed.count)
        }
        let total = FuzzInput.count(50_000)
        var answers = 0
        for _ in 0..<total {
            let bytes = FuzzInput.mutate(seeds.randomElement(using: &random)!, &random)
            switch PeerResponseParser.parse(bytes) {
            case .complete(let status, _, let body, let used, _):
                answers += 1
                #expect((100...999).contains(status) && used <= bytes.count && body.count <= used)
            case .untilClose(let status, _, let bodyStart):
                answers += 1
                #expect((100...999).contains(status) && bodyStart <= bytes.count)
            case .incomplete, .malformed:
                break
            }
        }
        expectAccepted(answers, of: total, atLeast: 0.05, "peer answers")
    }
}

/// The share of `total` inputs a parser accepted must be at least `least`: a parser that refused
/// everything would pass every check made inside the fuzz loops.
func expectAccepted(
    _ accepted: Int, of total: Int, atLeast least: Double, _ what: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(Double(accepted) >= least * Double(total), "\(what): \(accepted) of \(total) inputs accepted", sourceLocation: sourceLocation)
}
