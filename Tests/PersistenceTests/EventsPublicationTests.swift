import Foundation
import Persistence
import RedisDriver
import ShardRouter
import TestSupport
import Testing

/// The outbox's publication read by Debian's `pg_recvlogical` with the `pgoutput` plugin — the
/// protocol Debezium and PostgreSQL's own subscribers speak — a consumer no one here wrote.
@Suite("Change events by logical replication: the publication, read by pg_recvlogical")
struct EventsPublicationTests {
    /// One row of `counter_like_events` as a pgoutput insert carries it (text columns).
    struct Published: Equatable {
        let id: Int64
        let postID: Int64
        let userID: Int64
        let liked: Bool
    }

    /// Reads what `pg_recvlogical -P pgoutput` wrote: each message's bytes, then a newline.
    /// Returns the inserts into `counter_like_events`, in stream order. Pure.
    static func inserts(in bytes: [UInt8]) throws -> [Published] {
        var reader = Reader(bytes: bytes)
        var relations: [UInt32: String] = [:]
        var found: [Published] = []
        while !reader.atEnd {
            let type = try reader.byte()
            switch type {
            case UInt8(ascii: "B"): try reader.skip(8 + 8 + 4)
            case UInt8(ascii: "C"): try reader.skip(1 + 8 + 8 + 8)
            case UInt8(ascii: "O"):
                try reader.skip(8)
                _ = try reader.string()
            case UInt8(ascii: "Y"):
                try reader.skip(4)
                _ = try reader.string()
                _ = try reader.string()
            case UInt8(ascii: "R"):
                let oid = try reader.uint32()
                _ = try reader.string()
                relations[oid] = try reader.string()
                try reader.skip(1)
                for _ in 0..<(try reader.uint16()) {
                    try reader.skip(1)
                    _ = try reader.string()
                    try reader.skip(8)
                }
            case UInt8(ascii: "I"):
                let oid = try reader.uint32()
                guard try reader.byte() == UInt8(ascii: "N") else { throw ParseError("an insert without a new tuple") }
                var columns: [String?] = []
                for _ in 0..<(try reader.uint16()) {
                    switch try reader.byte() {
                    case UInt8(ascii: "n"), UInt8(ascii: "u"): columns.append(nil)
                    case UInt8(ascii: "t"): columns.append(String(decoding: try reader.bytes(Int(try reader.uint32())), as: UTF8.self))
                    default: throw ParseError("a column of an unknown kind")
                    }
                }
                if relations[oid] == "counter_like_events" {
                    // id, post_id, user_id, liked, liked_at, committed_at, then kind and
                    // replaced_kind: NULL for a like.
                    guard columns.count == 8, columns[6] == nil, columns[7] == nil, let id = columns[0].flatMap({ Int64($0) }),
                        let post = columns[1].flatMap({ Int64($0) }),
                        let user = columns[2].flatMap({ Int64($0) })
                    else { throw ParseError("an event row of another shape: \(columns)") }
                    found.append(Published(id: id, postID: post, userID: user, liked: columns[3] == "t"))
                }
            default:
                throw ParseError("message type \(Character(UnicodeScalar(type))) at byte \(reader.offset - 1)")
            }
            guard try reader.byte() == UInt8(ascii: "\n") else { throw ParseError("a message not followed by its newline") }
        }
        return found
    }

    struct ParseError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    struct Reader {
        let bytes: [UInt8]
        var offset = 0
        var atEnd: Bool { offset >= bytes.count }

        mutating func bytes(_ count: Int) throws -> ArraySlice<UInt8> {
            guard offset + count <= bytes.count else { throw ParseError("the stream ends inside a message") }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }
        mutating func skip(_ count: Int) throws { _ = try bytes(count) }
        mutating func byte() throws -> UInt8 { try bytes(1).first! }
        mutating func uint16() throws -> UInt16 { try bytes(2).reduce(0) { $0 << 8 | UInt16($1) } }
        mutating func uint32() throws -> UInt32 { try bytes(4).reduce(0) { $0 << 8 | UInt32($1) } }
        mutating func string() throws -> String {
            guard let end = bytes[offset...].firstIndex(of: 0) else { throw ParseError("a string without its terminator") }
            defer { offset = end + 1 }
            return String(decoding: bytes[offset..<end], as: UTF8.self)
        }
    }

    static func entry(_ log: String, _ ms: UInt64, _ user: Int64, _ post: Int64, _ liked: Bool) -> LoggedLikeChange {
        LoggedLikeChange(
            log: log, slot: HashSlot(key: log.utf8).rawValue, entryID: StreamEntryID(milliseconds: ms, sequence: 0),
            change: LikeChange(userID: user, postID: post, liked: liked))
    }

    @Test("migrate's publication streams every event to pg_recvlogical (pgoutput) in id order while four flushers commit", .timeLimit(.minutes(2)))
    func pgRecvLogicalReadsTheEvents() async throws {
        try await TestEnvironment.withScratchDatabase { pool, url in
            _ = try await SchemaMigrator.migrate(pool)
            let publication = try await LikeEvents(pool: pool).createPublication()
            #expect(publication.created)
            #expect(publication.walLevel == "logical", "the test servers run with wal_level = logical (scripts/services)")
            #expect(try await LikeEvents(pool: pool).createPublication().created == false, "a second migrate leaves it as it is")

            let slot = "counter_test_\(UInt32.random(in: 0...UInt32.max))"
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(slot).pgoutput").path
            let create = try ChildProcess(
                ["/usr/bin/pg_recvlogical", "-d", url, "--slot", slot, "--create-slot", "-P", "pgoutput"], mergingStandardError: true)
            #expect(try await create.waitForExit() == 0, "\(create.output)")
            let stream = try ChildProcess(
                [
                    "/usr/bin/pg_recvlogical", "-d", url, "--slot", slot, "--start", "-o", "proto_version=1",
                    "-o", "publication_names=\(LikeEvents.publication)", "-f", file, "-F", "0",
                ], mergingStandardError: true)
            do {
                let posts = try await TestEnvironment.createPosts(4, in: pool)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, post) in posts.enumerated() {
                        group.addTask {
                            var ms: UInt64 = 1_764_000_000_000
                            for round in 0..<10 {
                                let entries = (1...5).map { user -> LoggedLikeChange in
                                    ms += 1
                                    return Self.entry("log:\(index)", ms, Int64(user), post, round % 2 == 0)
                                }
                                _ = try await LikeBatchApplier.apply(entries, pool: pool, events: true)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let committed = try await LikeEvents(pool: pool).read(after: 0, limit: 10_000)
                #expect(committed.count == 4 * 10 * 5)
                var published: [Published] = []
                let deadline = ContinuousClock.now + .seconds(30)
                while published.count < committed.count && ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(100))
                    let bytes = FileManager.default.contents(atPath: file).map(Array.init) ?? []
                    // A message may be half written: parse up to the last complete one.
                    published = (try? Self.inserts(in: bytes)) ?? published
                }
                #expect(published == committed.map { Published(id: $0.id, postID: $0.postID, userID: $0.userID, liked: $0.liked) })
            } catch {
                Issue.record("\(error)")
            }
            stream.kill(SIGINT)
            _ = try await stream.waitForExit()
            let drop = try ChildProcess(["/usr/bin/pg_recvlogical", "-d", url, "--slot", slot, "--drop-slot"], mergingStandardError: true)
            #expect(try await drop.waitForExit() == 0, "\(drop.output)")
            try? FileManager.default.removeItem(atPath: file)
        }
    }
}
