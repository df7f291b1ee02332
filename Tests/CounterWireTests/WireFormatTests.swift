import CounterWire
import Foundation
import Testing

@Suite("Wire format (pure)")
struct WireFormatTests {
    @Test("members come in the order the type declares them, absent optionals as null, every run the same")
    func orderAndNulls() throws {
        var report = ReconcileReport()
        report.checked = 2
        report.drifted = [.init(postID: 5, likesCount: 15, likesRows: 10)]
        #expect(
            try WireEncoder.text(report)
                == #"{"checked":2,"drifted":[{"post_id":5,"likes_count":15,"likes_rows":10}],"redis_drifted":[],"redis_pending":0,"repaired":0,"redis_repaired":0,"next_after":null}"#
        )
        #expect(
            try WireEncoder.text(LikeStatus(postID: 1, userID: 7, isLiked: true, likesCount: 124))
                == #"{"post_id":1,"user_id":7,"is_liked":true,"likes_count":124}"#)
        #expect(
            try WireEncoder.text(ErrorBody(code: "x", message: "a \"quoted\" /path\n\u{01}é"))
                == #"{"error":{"code":"x","message":"a \"quoted\" /path\n\u0001é"}}"#)
    }

    @Test("every body survives a trip through the encoder and Foundation's decoder")
    func roundTrips() throws {
        func roundTrip<Body: Codable & Equatable>(_ body: Body) throws {
            let decoded = try WireDecoder.decode(Body.self, from: try WireEncoder.encode(body))
            #expect(decoded == body)
        }
        try roundTrip(LikeStatus(postID: .max, userID: 1, isLiked: false, likesCount: 0))
        try roundTrip(PostCount(postID: 4_000_000_000_000_000_123, likesCount: 3))
        try roundTrip(FeedQuery(postIDs: [1, 2, .max], userID: 7))
        try roundTrip(FeedPage(posts: [FeedEntry(postID: 1, likesCount: 2, isLiked: true)]))
        try roundTrip(FlushResult(flushed: false, pendingChanges: 12))
        try roundTrip(ReconcileRequest(postIDs: [3], repair: true))
        try roundTrip(ReconcileRequest(after: 10, limit: 500))
        var shard = ShardStatistics(shard: 2)
        shard.averageGroupCommit = 12.5
        shard.lastFlushError = "connection refused"
        let node = RedisNodeStatistics(
            endpoint: "127.0.0.1:6379", slots: 16_384, connected: true, pipelines: 9, errors: 0,
            moved: 1, ask: 2, tryAgain: 3, clusterDown: 0, lastError: nil)
        try roundTrip(
            ServiceStatistics(
                shards: [shard], total: ShardStatistics(),
                redis: RedisStatistics(
                    mode: "single", mapRefreshes: 1, secondsSinceMapRefresh: nil, lastMapError: nil, nodes: [node]), residentMemoryBytes: 1 << 30))
        try roundTrip(
            PostInspection(
                postID: 9, verdict: PostInspection.Verdict.pending,
                redis: .init(hydrated: true, likesCount: 3, pendingChanges: 1, secondsSinceFlush: 0.25, isLiked: nil),
                postgres: .init(exists: true, likesCount: nil, likesRows: 2, isLiked: true), userID: nil))
        try roundTrip(DeadLetterList(deadLetters: [DeadLetter(id: "1700000000000-0", fields: ["u": "7", "p": "9", "l": "1", "reason": "gone"])]))
        try roundTrip(DeadLetterSelection(ids: ["1-0"]))
        try roundTrip(ReplayResult(replayed: ["1-0"], superseded: ["3-0"], failed: [.init(id: "2-0", reason: "post 9 does not exist")]))
        // A node from before `superseded` leaves it out.
        #expect(
            try WireDecoder.decode(ReplayResult.self, from: Array(#"{"replayed":["1-0"],"failed":[]}"#.utf8))
                == ReplayResult(replayed: ["1-0"], failed: []))
        try roundTrip(DropResult(dropped: 2))
    }

    @Test("dead letters are one flat object, id first, fields in name order")
    func deadLetterShape() throws {
        let letter = DeadLetter(id: "5-1", fields: ["u": "7", "at": "1700", "p": "9"])
        #expect(try WireEncoder.text(letter) == #"{"id":"5-1","at":"1700","p":"9","u":"7"}"#)
    }

    @Test("request bodies refuse unknown members and say where an id is not an integer")
    func requestChecks() throws {
        #expect(throws: UnknownMember(name: "extra")) {
            try WireDecoder.decode(FeedQuery.self, from: Array(#"{"post_ids":[1],"user_id":7,"extra":1}"#.utf8))
        }
        #expect(throws: UnknownMember(name: "repiar")) {
            try WireDecoder.decode(ReconcileRequest.self, from: Array(#"{"repiar":true}"#.utf8))
        }
        for (body, path) in [
            (#"{"post_ids":[1,1.5],"user_id":7}"#, "post_ids[1]"), (#"{"post_ids":[99999999999999999999],"user_id":7}"#, "post_ids[0]"),
            (#"{"post_ids":[1],"user_id":"7"}"#, "user_id"),
        ] {
            do {
                _ = try WireDecoder.decode(FeedQuery.self, from: Array(body.utf8))
                Issue.record("\(body) was accepted")
            } catch DecodingError.typeMismatch(_, let context) {
                #expect(WireDecoder.path(context.codingPath) == path)
            }
        }
    }

    @Test("dead-letter ids are stream entry ids")
    func deadLetterIDs() {
        for good in ["0-0", "1700000000000-0", "18446744073709551615-18446744073709551615"] { #expect(DeadLetterID.isValid(good), "\(good)") }
        for bad in ["", "1", "-1", "1-", "a-1", "1-1-1", "18446744073709551616-0", " 1-0"] { #expect(!DeadLetterID.isValid(bad), "\(bad)") }
    }
}

@Suite("Request bodies on the wire (pure)")
struct RequestBodyWireTests {
    @Test("requests leave absent members out, and refuse an explicit null")
    func absentIsNotNull() throws {
        #expect(try WireEncoder.text(ReconcileRequest(postIDs: [3], repair: true)) == #"{"post_ids":[3],"repair":true}"#)
        #expect(try WireEncoder.text(ReconcileRequest(after: 0, limit: 1_000)) == #"{"after":0,"limit":1000}"#)
        #expect(try WireEncoder.text(DeadLetterSelection(ids: nil)) == "{}")
        #expect(throws: DecodingError.self) { try WireDecoder.decode(ReconcileRequest.self, from: Array(#"{"post_ids":null,"repair":true}"#.utf8)) }
        #expect(throws: DecodingError.self) { try WireDecoder.decode(DeadLetterSelection.self, from: Array(#"{"ids":null}"#.utf8)) }
        #expect(try WireDecoder.decode(DeadLetterSelection.self, from: Array("{}".utf8)) == DeadLetterSelection(ids: nil))
    }

    @Test("a feed query without a user leaves user_id out; null there reads as left out (the library once sent it), as it can only narrow the answer")
    func feedQueryUser() throws {
        #expect(try WireEncoder.text(OwnFeedQuery(postIDs: [1, 2])) == #"{"post_ids":[1,2]}"#)
        #expect(try WireEncoder.text(OwnFeedQuery(postIDs: [1], userID: 7)) == #"{"post_ids":[1],"user_id":7}"#)
        #expect(try WireDecoder.decode(OwnFeedQuery.self, from: Array(#"{"post_ids":[1],"user_id":null}"#.utf8)) == OwnFeedQuery(postIDs: [1]))
    }
}
