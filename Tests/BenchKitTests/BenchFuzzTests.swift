import Foundation
import TestSupport
import Testing

@testable import BenchKit

/// Seeded random and mutated input (`FuzzInput`): none may crash or hang, each answer is a
/// refusal or a correct result, known-good input is accepted, and a good share of the mutated is.
@Suite("The bench's RESP framing under random input (seeded)")
struct BenchFuzzTests {
    @Test("RESP replies (the bench's framing): any bytes are framed within what arrived, or wait")
    func respReplies() {
        var random = SeededGenerator(seed: 6)
        let seeds = ["*2\r\n:1\r\n:17\r\n", "$3\r\nabc\r\n", "-ERR no\r\n", "*1\r\n*2\r\n$1\r\nx\r\n$-1\r\n"].map { Array($0.utf8) }
        for (seed, isError) in zip(seeds, [false, false, true, false]) {
            let framed = RESPFraming.reply(seed)
            #expect(framed?.length == seed.count && framed?.isError == isError, "\(String(decoding: seed, as: UTF8.self).debugDescription)")
        }
        let total = FuzzInput.count(200_000)
        var framed = 0
        for _ in 0..<total {
            let bytes = FuzzInput.mutate(seeds.randomElement(using: &random)!, &random)
            if let (length, _) = RESPFraming.reply(bytes) {
                framed += 1
                #expect(length > 0 && length <= bytes.count)
            }
        }
        expectAccepted(framed, of: total, atLeast: 0.10, "RESP replies")
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
