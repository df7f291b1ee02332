import CounterCore
import CounterWire
import Foundation
import TestSupport
import Testing

@testable import NodeAPI

/// Seeded random and mutated input (`FuzzInput`): none may crash or hang, each answer is a
/// refusal or a correct result, known-good input is accepted, and a good share of the mutated is.
@Suite("API parsers under random input (seeded)")
struct APIFuzzTests {
    @Test("route matching: any path gives a route, and an id in a route is exactly the digits of its segment")
    func routes() {
        var random = SeededGenerator(seed: 1)
        let seeds = [
            "/v1/posts/12/likes/7", "/v1/posts/12/likes/7/toggle", "/v1/posts/12", "/v1/posts/query", "/admin/posts/5",
            "/healthz", "/v1/cluster", "/admin/dead-letters/replay", "/v1/posts/12/like/toggle", "/api/posts/12/like",
            "/v1/posts/12/reactions/love/users/7/toggle", "/v1/posts/12/reactions/party_2/toggle", "/v1/posts/12/reactions",
        ].map { Array($0.utf8) }
        #expect(APIRoutes.table.match("/v1/posts/12/likes/7") == found("/v1/posts/{post}/likes/{user}", post: 12, user: 7))
        #expect(APIRoutes.table.match("/v1/posts/12/likes/7/toggle") == found("/v1/posts/{post}/likes/{user}/toggle", post: 12, user: 7))
        #expect(APIRoutes.table.match("/v1/posts/12") == found("/v1/posts/{post}", post: 12))
        #expect(APIRoutes.table.match("/admin/posts/5") == found("/admin/posts/{post}", post: 5))
        #expect(APIRoutes.table.match("/v1/posts/12/like/toggle") == found("/v1/posts/{post}/like/toggle", post: 12))
        #expect(APIRoutes.table.match("/api/posts/12/like") == found("/api/posts/{id}/like", post: 12))
        #expect(APIRoutes.table.match("/healthz") == found("/healthz"))
        var reaction = PathIDs(post: 12, user: 7)
        reaction.kind = ReactionKind("love")
        #expect(
            APIRoutes.table.match("/v1/posts/12/reactions/love/users/7/toggle")
                == .found(APIRoutes.table.route("/v1/posts/{post}/reactions/{kind}/users/{user}/toggle")!, reaction))
        #expect(APIRoutes.table.match("/v1/posts/12/reactions/Love/toggle") == .invalidID("reaction kind \"Love\""))
        #expect(APIRoutes.table.match("/v1/posts/x/reactions/love/toggle") == .invalidID("post id \"x\""))
        let total = FuzzInput.count(200_000)
        var withID = 0
        for _ in 0..<total {
            let bytes = FuzzInput.mutate(seeds.randomElement(using: &random)!, &random)
            let path = String(decoding: bytes, as: UTF8.self)
            let segments = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(Array.init)
            func isID(_ index: Int, _ value: Int64) -> Bool {
                index < segments.count && (1...19).contains(segments[index].count)
                    && segments[index].allSatisfy { $0 >= 48 && $0 <= 57 } && DecimalText.parse(segments[index]) == value && value > 0
            }
            guard case .found(let route, let ids) = APIRoutes.table.match(path), route.pattern.literalCount < route.pattern.segments.count else {
                continue
            }
            withID += 1
            // Each id of the route is exactly the digits of its segment (after the path's leading "/": one further on).
            for (index, segment) in route.pattern.segments.enumerated() {
                switch segment {
                case .id(.post): #expect(isID(index + 1, ids.post), "\(path.debugDescription)")
                case .id(.user): #expect(isID(index + 1, ids.user), "\(path.debugDescription)")
                case .id(.kind): #expect(ids.kind.map { Array($0.name.utf8) == segments[index + 1] } == true, "\(path.debugDescription)")
                case .literal(let literal): #expect(segments[index + 1] == literal, "\(path.debugDescription)")
                }
            }
        }
        expectAccepted(withID, of: total, atLeast: 0.005, "routes with an id")
    }

    @Test("feed query bodies: refused with an error, or 1 to 1,000 positive ids; the hand-read shape always agrees with the wire's decoder")
    func feedBodies() {
        var random = SeededGenerator(seed: 2)
        let seeds = [
            #"{"post_ids":[1,2,3],"user_id":7}"#, #" { "user_id" : 7 , "post_ids" : [ 10 , 20 ] } "#,
            #"{"post_ids":[9223372036854775807],"user_id":1}"#, #"{"post_ids":[1.5e3],"user_id":"7"}"#,
        ].map { Array($0.utf8) }
        for _ in 0..<FuzzInput.count(20_000) {
            let body = FuzzInput.mutate(seeds.randomElement(using: &random)!, &random)
            if let hot = HotRequests.feedQuery(body) {
                #expect(hot == (try? WireDecoder.decode(FeedQuery.self, from: body)), "\(String(decoding: body, as: UTF8.self).debugDescription)")
            }
            do {
                let query = try RequestBody.feedQuery(body)
                #expect((1...FeedQuery.maximumPosts).contains(query.postIDs.count) && query.postIDs.allSatisfy { $0 > 0 } && (query.userID ?? 1) > 0)
            } catch {
                #expect(error is RequestError)
            }
        }
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
