import CounterCore
import CounterWire
import Foundation
import ShardRouter
import TestSupport
import Testing
@testable import BenchKit
@testable import NodeAPI
@testable import NodeHTTP
@testable import Persistence

/// Seeded random and mutated input for the parsers that read what clients, peers and Redis send:
/// none may crash or hang, and each answer is either a refusal or a correct result. The inputs
/// per parser default to what a debug build runs in a few seconds; set `COUNTER_FUZZ_INPUTS`
/// (for example 1000000) for a longer run.
@Suite("Parsers under random input (seeded)")
struct ParserFuzzTests {
    static func inputs(_ defaultCount: Int) -> Int {
        ProcessInfoCount.value ?? defaultCount
    }

    /// Bytes that matter to the parsers: digits, separators, escapes, signs, control bytes.
    static let alphabet: [UInt8] = Array("0123456789/%+-. \t\r\n{}[],:\"\\eE_aZ".utf8) + [0, 0x7F, 0x80, 0xC3, 0xFF]

    /// `seed` with one to four random mutations: a byte replaced, inserted or deleted, a range
    /// repeated, or the end cut.
    static func mutate(_ seed: [UInt8], _ random: inout SeededGenerator) -> [UInt8] {
        var bytes = seed
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0 where !bytes.isEmpty: bytes[position] = alphabet.randomElement(using: &random)!
            case 1: bytes.insert(alphabet.randomElement(using: &random)!, at: min(position, bytes.count))
            case 2 where !bytes.isEmpty: bytes.remove(at: position)
            case 3 where !bytes.isEmpty:
                let end = min(bytes.count, position + Int.random(in: 1...8, using: &random))
                bytes.insert(contentsOf: bytes[position..<end], at: end)
            default: bytes = Array(bytes.prefix(position))
            }
        }
        return bytes
    }

    /// The share of `total` inputs a parser accepted must be at least `least`: a parser that
    /// refused everything would pass every check made inside the loops.
    static func expectAccepted(_ accepted: Int, of total: Int, atLeast least: Double, _ what: String,
                               sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(Double(accepted) >= least * Double(total), "\(what): \(accepted) of \(total) inputs accepted", sourceLocation: sourceLocation)
    }

    @Test("route matching: any path gives a route, and an id in a route is exactly the digits of its segment")
    func routes() {
        var random = SeededGenerator(seed: 1)
        let seeds = ["/v1/posts/12/likes/7", "/v1/posts/12/likes/7/toggle", "/v1/posts/12", "/v1/posts/query", "/admin/posts/5",
                     "/healthz", "/v1/cluster", "/admin/dead-letters/replay", "/v1/posts/12/like/toggle", "/api/posts/12/like"].map { Array($0.utf8) }
        #expect(APIRoute.match("/v1/posts/12/likes/7") == .like(post: 12, user: 7))
        #expect(APIRoute.match("/v1/posts/12/likes/7/toggle") == .toggle(post: 12, user: 7))
        #expect(APIRoute.match("/v1/posts/12") == .post(12))
        #expect(APIRoute.match("/admin/posts/5") == .adminInspect(post: 5))
        #expect(APIRoute.match("/v1/posts/12/like/toggle") == .userToggle(post: 12))
        #expect(APIRoute.match("/api/posts/12/like") == .seedToggle(post: 12))
        #expect(APIRoute.match("/healthz") == .healthz)
        let total = Self.inputs(200_000)
        var withID = 0
        for _ in 0..<total {
            let bytes = Self.mutate(seeds.randomElement(using: &random)!, &random)
            let path = String(decoding: bytes, as: UTF8.self)
            let segments = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(Array.init)
            func isID(_ index: Int, _ value: Int64) -> Bool {
                index < segments.count && (1...19).contains(segments[index].count)
                    && segments[index].allSatisfy { $0 >= 48 && $0 <= 57 } && DecimalText.parse(segments[index]) == value && value > 0
            }
            switch APIRoute.match(path) {
            case .like(let post, let user), .toggle(let post, let user):
                withID += 1
                #expect(isID(3, post) && isID(5, user), "\(path.debugDescription)")
            case .post(let post), .adminInspect(let post), .userLike(let post), .userToggle(let post), .seedToggle(let post):
                withID += 1
                #expect(isID(3, post), "\(path.debugDescription)")
            default:
                break
            }
        }
        Self.expectAccepted(withID, of: total, atLeast: 0.005, "routes with an id")
    }

    @Test("request targets: split at the first ?, nothing decoded, every argument a piece of the query as sent")
    func requestTargets() {
        var random = SeededGenerator(seed: 7)
        let seeds = ["/admin/posts/5?user=7", "/admin/dead-letters?count=10&x", "/admin/flush?wait=false", "/v1/posts/1%2F/likes/%31",
                     "/a?b=c=d&&=e&f"].map { Array($0.utf8) }
        for _ in 0..<Self.inputs(100_000) {
            let raw = String(decoding: Self.mutate(seeds.randomElement(using: &random)!, &random), as: UTF8.self)
            let target = RequestTarget(raw)
            let mark = raw.firstIndex(of: "?")
            #expect(target.path == String(raw[..<(mark ?? raw.endIndex)]), "\(raw.debugDescription)")
            #expect(target.rawQuery == (mark.map { String(raw[raw.index(after: $0)...]) } ?? ""), "\(raw.debugDescription)")
            let pieces = target.rawQuery.split(separator: "&").map(String.init)
            for (name, value) in target.arguments {
                #expect(!name.isEmpty && (pieces.contains("\(name)=\(value)") || (value.isEmpty && pieces.contains(name))), "\(raw.debugDescription)")
            }
        }
    }

    @Test("feed query bodies: refused with an error, or 1 to 1,000 positive ids; the hand-read shape always agrees with the wire's decoder")
    func feedBodies() {
        var random = SeededGenerator(seed: 2)
        let seeds = [#"{"post_ids":[1,2,3],"user_id":7}"#, #" { "user_id" : 7 , "post_ids" : [ 10 , 20 ] } "#,
                     #"{"post_ids":[9223372036854775807],"user_id":1}"#, #"{"post_ids":[1.5e3],"user_id":"7"}"#].map { Array($0.utf8) }
        for _ in 0..<Self.inputs(20_000) {
            let body = Self.mutate(seeds.randomElement(using: &random)!, &random)
            if let hot = HotRequests.feedQuery(body) {
                #expect(hot == (try? WireDecoder.decode(FeedQuery.self, from: body)), "\(String(decoding: body, as: UTF8.self).debugDescription)")
            }
            do {
                let query = try RequestBody.feedQuery(body)
                #expect((1...FeedQuery.maximumPosts).contains(query.postIDs.count) && query.postIDs.allSatisfy { $0 > 0 } && query.userID > 0)
            } catch {
                #expect(error is RequestError)
            }
        }
    }

    @Test("packed log entries: malformed ones are refused whole; what is read packs and reads back the same")
    func packedEntries() {
        var random = SeededGenerator(seed: 3)
        let seeds = ["42+7+9-7 43+1", "1+1", "9223372036854775807-9223372036854775807 5+5-5"].map { Array($0.utf8) }
        #expect(ChangeLogEntry.unpack(seeds[0]) == [LikeChange(userID: 7, postID: 42, liked: true), LikeChange(userID: 9, postID: 42, liked: true),
                                                    LikeChange(userID: 7, postID: 42, liked: false), LikeChange(userID: 1, postID: 43, liked: true)])
        #expect(ChangeLogEntry.unpack(seeds[1]) == [LikeChange(userID: 1, postID: 1, liked: true)])
        #expect(ChangeLogEntry.unpack(seeds[2])?.count == 3)
        let total = Self.inputs(200_000)
        var accepted = 0
        for _ in 0..<total {
            let bytes = Self.mutate(seeds.randomElement(using: &random)!, &random)
            guard let changes = ChangeLogEntry.unpack(bytes) else { continue }
            accepted += 1
            #expect(!changes.isEmpty && changes.allSatisfy { $0.userID > 0 && $0.postID > 0 })
            let again = ChangeLogEntry.unpack(ChangeLogEntry.pack(changes))
            for post in Set(changes.map(\.postID)) {
                #expect(again?.filter { $0.postID == post } == changes.filter { $0.postID == post }, "\(String(decoding: bytes, as: UTF8.self))")
            }
        }
        Self.expectAccepted(accepted, of: total, atLeast: 0.10, "packed entries")
    }

    @Test("stream entry ids: any bytes parse to an id that prints back to the same id, or to nothing")
    func streamEntryIDs() {
        var random = SeededGenerator(seed: 4)
        let seeds = ["1700000000000-0", "0-1", "18446744073709551615-18446744073709551615"].map { Array($0.utf8) }
        #expect(StreamEntryID(bytes: seeds[0]) == StreamEntryID(milliseconds: 1_700_000_000_000, sequence: 0))
        #expect(StreamEntryID(bytes: seeds[1]) == StreamEntryID(milliseconds: 0, sequence: 1))
        #expect(StreamEntryID(bytes: seeds[2]) == StreamEntryID(milliseconds: .max, sequence: .max))
        let total = Self.inputs(200_000)
        var accepted = 0
        for _ in 0..<total {
            let bytes = Self.mutate(seeds.randomElement(using: &random)!, &random)
            guard let id = StreamEntryID(bytes: bytes) else { continue }
            accepted += 1
            #expect(StreamEntryID(id.description) == id)
        }
        Self.expectAccepted(accepted, of: total, atLeast: 0.10, "stream entry ids")
    }

    @Test("peer answers: any bytes are incomplete, malformed, or an answer whose body is no longer than what arrived")
    func peerAnswers() {
        var random = SeededGenerator(seed: 5)
        let seeds = ["HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello",
                     "HTTP/1.1 421 Misdirected Request\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
                     "HTTP/1.1 204 No Content\r\n\r\n"].map { Array($0.utf8) }
        for (seed, (wantedStatus, wantedBody)) in zip(seeds, [(200, "hello"), (421, "{}"), (204, "")]) {
            guard case .complete(let status, _, let body, let used, _) = PeerResponseParser.parse(seed) else {
                Issue.record("a known-good answer was not read: \(String(decoding: seed, as: UTF8.self).debugDescription)")
                continue
            }
            #expect(status == wantedStatus && body == Array(wantedBody.utf8) && used == seed.count)
        }
        let total = Self.inputs(50_000)
        var answers = 0
        for _ in 0..<total {
            let bytes = Self.mutate(seeds.randomElement(using: &random)!, &random)
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
        Self.expectAccepted(answers, of: total, atLeast: 0.05, "peer answers")
    }

    @Test("RESP replies (the bench's framing): any bytes are framed within what arrived, or wait")
    func respReplies() {
        var random = SeededGenerator(seed: 6)
        let seeds = ["*2\r\n:1\r\n:17\r\n", "$3\r\nabc\r\n", "-ERR no\r\n", "*1\r\n*2\r\n$1\r\nx\r\n$-1\r\n"].map { Array($0.utf8) }
        for (seed, isError) in zip(seeds, [false, false, true, false]) {
            let framed = RESPFraming.reply(seed)
            #expect(framed?.length == seed.count && framed?.isError == isError, "\(String(decoding: seed, as: UTF8.self).debugDescription)")
        }
        let total = Self.inputs(200_000)
        var framed = 0
        for _ in 0..<total {
            let bytes = Self.mutate(seeds.randomElement(using: &random)!, &random)
            if let (length, _) = RESPFraming.reply(bytes) {
                framed += 1
                #expect(length > 0 && length <= bytes.count)
            }
        }
        Self.expectAccepted(framed, of: total, atLeast: 0.10, "RESP replies")
    }
}

extension ParserFuzzTests {
    @Test("Redis redirect errors (MOVED, ASK): any text is no redirect, or one to a real slot and port")
    func redirects() {
        var random = SeededGenerator(seed: 7)
        let seeds = ["MOVED 3999 127.0.0.1:6381", "ASK 16383 redis-2:7000", "TRYAGAIN Multiple keys request during rehashing of slot",
                     "CLUSTERDOWN The cluster is down", "MOVED 0 :6379"].map { Array($0.utf8) }
        #expect(RedisRedirect(errorText: "MOVED 3999 127.0.0.1:6381", askedHost: "10.0.0.1")
                == .moved(HashSlot(rawValue: 3999)!, RedisEndpoint(host: "127.0.0.1", port: 6381)))
        #expect(RedisRedirect(errorText: "ASK 16383 redis-2:7000", askedHost: "10.0.0.1")
                == .ask(HashSlot(rawValue: 16383)!, RedisEndpoint(host: "redis-2", port: 7000)))
        #expect(RedisRedirect(errorText: "MOVED 0 :6379", askedHost: "10.0.0.1") == .moved(HashSlot(rawValue: 0)!, RedisEndpoint(host: "10.0.0.1", port: 6379)))
        #expect(RedisRedirect(errorText: "TRYAGAIN Multiple keys request during rehashing of slot", askedHost: "10.0.0.1") == .tryAgain)
        #expect(RedisRedirect(errorText: "CLUSTERDOWN The cluster is down", askedHost: "10.0.0.1") == .clusterDown)
        let total = Self.inputs(200_000)
        var redirects = 0
        for _ in 0..<total {
            let text = String(decoding: Self.mutate(seeds.randomElement(using: &random)!, &random), as: UTF8.self)
            switch RedisRedirect(errorText: text, askedHost: "10.0.0.1") {
            case .moved(let slot, let endpoint)?, .ask(let slot, let endpoint)?:
                redirects += 1
                #expect(Int(slot.rawValue) < HashSlot.count && (1...65_535).contains(endpoint.port) && !endpoint.host.isEmpty, "\(text.debugDescription)")
            default:
                break
            }
        }
        Self.expectAccepted(redirects, of: total, atLeast: 0.05, "MOVED and ASK redirects")
    }
}

/// `COUNTER_FUZZ_INPUTS`, when set to a positive number.
private enum ProcessInfoCount {
    static let value: Int? = {
        guard let text = ProcessInfo.processInfo.environment["COUNTER_FUZZ_INPUTS"], let value = Int(text), value > 0 else { return nil }
        return value
    }()
}
