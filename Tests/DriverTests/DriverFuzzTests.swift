import Foundation
import ShardRouter
import TestSupport
import Testing

@testable import RedisDriver

/// Seeded random and mutated input (`FuzzInput`): none may crash or hang, each answer is a
/// refusal or a correct result, known-good input is accepted, and a good share of the mutated is.
@Suite("Redis parsers under random input (seeded)")
struct DriverFuzzTests {
    @Test("stream entry ids: any bytes parse to an id that prints back to the same id, or to nothing")
    func streamEntryIDs() {
        var random = SeededGenerator(seed: 4)
        let seeds = ["1700000000000-0", "0-1", "18446744073709551615-18446744073709551615"].map { Array($0.utf8) }
        #expect(StreamEntryID(bytes: seeds[0]) == StreamEntryID(milliseconds: 1_700_000_000_000, sequence: 0))
        #expect(StreamEntryID(bytes: seeds[1]) == StreamEntryID(milliseconds: 0, sequence: 1))
        #expect(StreamEntryID(bytes: seeds[2]) == StreamEntryID(milliseconds: .max, sequence: .max))
        let total = FuzzInput.count(200_000)
        var accepted = 0
        for _ in 0..<total {
            let bytes = FuzzInput.mutate(seeds.randomElement(using: &random)!, &random)
            guard let id = StreamEntryID(bytes: bytes) else { continue }
            accepted += 1
            #expect(StreamEntryID(id.description) == id)
        }
        expectAccepted(accepted, of: total, atLeast: 0.10, "stream entry ids")
    }

    @Test("Redis redirect errors (MOVED, ASK): any text is no redirect, or one to a real slot and port")
    func redirects() {
        var random = SeededGenerator(seed: 7)
        let seeds = [
            "MOVED 3999 127.0.0.1:6381", "ASK 16383 redis-2:7000", "TRYAGAIN Multiple keys request during rehashing of slot",
            "CLUSTERDOWN The cluster is down", "MOVED 0 :6379",
        ].map { Array($0.utf8) }
        #expect(
            RedisRedirect(errorText: "MOVED 3999 127.0.0.1:6381", askedHost: "10.0.0.1")
                == .moved(HashSlot(rawValue: 3999)!, RedisEndpoint(host: "127.0.0.1", port: 6381)))
        #expect(
            RedisRedirect(errorText: "ASK 16383 redis-2:7000", askedHost: "10.0.0.1")
                == .ask(HashSlot(rawValue: 16383)!, RedisEndpoint(host: "redis-2", port: 7000)))
        #expect(
            RedisRedirect(errorText: "MOVED 0 :6379", askedHost: "10.0.0.1")
                == .moved(HashSlot(rawValue: 0)!, RedisEndpoint(host: "10.0.0.1", port: 6379)))
        #expect(RedisRedirect(errorText: "TRYAGAIN Multiple keys request during rehashing of slot", askedHost: "10.0.0.1") == .tryAgain)
        #expect(RedisRedirect(errorText: "CLUSTERDOWN The cluster is down", askedHost: "10.0.0.1") == .clusterDown)
        let total = FuzzInput.count(200_000)
        var redirects = 0
        for _ in 0..<total {
            let text = String(decoding: FuzzInput.mutate(seeds.randomElement(using: &random)!, &random), as: UTF8.self)
            switch RedisRedirect(errorText: text, askedHost: "10.0.0.1") {
            case .moved(let slot, let endpoint)?, .ask(let slot, let endpoint)?:
                redirects += 1
                #expect(
                    Int(slot.rawValue) < HashSlot.count && (1...65_535).contains(endpoint.port) && !endpoint.host.isEmpty, "\(text.debugDescription)")
            default:
                break
            }
        }
        expectAccepted(redirects, of: total, atLeast: 0.05, "MOVED and ASK redirects")
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
