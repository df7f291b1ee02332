import Foundation
import Persistence
import TestSupport
import Testing

/// Seeded random and mutated input (`FuzzInput`): none may crash or hang, each answer is a
/// refusal or a correct result, known-good input is accepted, and a good share of the mutated is.
@Suite("Log entry parser under random input (seeded)")
struct PersistenceFuzzTests {
    @Test("packed log entries: malformed ones are refused whole; what is read packs and reads back the same")
    func packedEntries() {
        var random = SeededGenerator(seed: 3)
        let seeds = [
            "42+7+9-7 43+1", "1+1", "9223372036854775807-9223372036854775807 5+5-5", "42:love+7-7 42-9 43:tada_2+1",
        ].map { Array($0.utf8) }
        #expect(
            ChangeLogEntry.unpack(seeds[0]) == [
                LikeChange(userID: 7, postID: 42, liked: true), LikeChange(userID: 9, postID: 42, liked: true),
                LikeChange(userID: 7, postID: 42, liked: false), LikeChange(userID: 1, postID: 43, liked: true),
            ])
        #expect(ChangeLogEntry.unpack(seeds[1]) == [LikeChange(userID: 1, postID: 1, liked: true)])
        #expect(ChangeLogEntry.unpack(seeds[2])?.count == 3)
        let total = FuzzInput.count(200_000)
        var accepted = 0
        for _ in 0..<total {
            let bytes = FuzzInput.mutate(seeds.randomElement(using: &random)!, &random)
            guard let changes = ChangeLogEntry.unpack(bytes) else { continue }
            accepted += 1
            #expect(!changes.isEmpty && changes.allSatisfy { $0.userID > 0 && $0.postID > 0 })
            let again = ChangeLogEntry.unpack(ChangeLogEntry.pack(changes))
            for group in Set(changes.map { PostKind(postID: $0.postID, kind: $0.kind) }) {
                #expect(
                    again?.filter { $0.postID == group.postID && $0.kind == group.kind }
                        == changes.filter { $0.postID == group.postID && $0.kind == group.kind },
                    "\(String(decoding: bytes, as: UTF8.self))")
            }
        }
        expectAccepted(accepted, of: total, atLeast: 0.10, "packed entries")
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
