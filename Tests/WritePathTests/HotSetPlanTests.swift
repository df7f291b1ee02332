import Persistence
import RedisDriver
import ShardRouter
import Testing

@testable import WritePath

@Suite("Hot set sweeps: markers, SCAN pages, memory requests (pure)")
struct HotSetPlanTests {
    static let layout = RedisKeyLayout(prefix: "cs")

    @Test("the marker pattern matches every post's marker and escapes the prefix's glob characters; other keys are not posts")
    func markers() {
        #expect(HotSetPlan.markerPattern(Self.layout) == "cs:{*}:hydrated:*")
        #expect(HotSetPlan.markerPattern(RedisKeyLayout(prefix: "a*b?[x]")) == "a\\*b\\?\\[x\\]:{*}:hydrated:*")
        let marker = Self.layout.hydratedMarker(ofPost: 42)
        #expect(HotSetPlan.post(ofMarker: marker, layout: Self.layout) == 42)
        #expect(HotSetPlan.post(ofMarker: Self.layout.likers(ofPost: 42), layout: Self.layout) == nil)
        // A marker key whose tag does not fit its post is not this layout's.
        #expect(HotSetPlan.post(ofMarker: "cs:{zz}:hydrated:42", layout: Self.layout) == nil)
        #expect(HotSetPlan.post(ofMarker: "other:{\(HashSlot(post: 42).hashTag)}:hydrated:42", layout: Self.layout) == nil)
    }

    @Test("a SCAN page gives its cursor and keys; another shape gives nothing")
    func scanPages() {
        let page = RedisReply.array([.bulkString(Array("17".utf8)), .array([.bulkString(Array("a".utf8)), .bulkString(Array("b".utf8))])])
        #expect(HotSetPlan.scanPage(page)?.cursor == "17")
        #expect(HotSetPlan.scanPage(page)?.keys == ["a", "b"])
        #expect(HotSetPlan.scanPage(.integer(0)) == nil)
    }

    @Test("the posts pinned by dead letters are those of refused changes (with an SQLSTATE); missing posts' and unreadable letters pin nothing")
    func pinnedPosts() {
        func letter(_ fields: [String: String]) -> StreamEntry {
            StreamEntry(id: StreamEntryID(milliseconds: 1, sequence: 0), fields: fields.mapValues { Array($0.utf8) })
        }
        let letters = [
            letter(["u": "5", "p": "11", "l": "1", "sqlstate": "P0001", "reason": "PostgreSQL refused the change"]),
            letter(["u": "5", "p": "12", "l": "1", "reason": "post does not exist in posts"]),
            letter(["raw": "garbage", "reason": "malformed log entry"]),
            letter(["u": "6", "p": "13", "l": "0", "sqlstate": "23514"]),
        ]
        #expect(HotSetPlan.pinnedPosts(in: letters) == [11, 13])
    }

    @Test("posts go to the shard that owns their slot")
    func byShard() throws {
        let map = try ShardMap(shardCount: 4)
        let grouped = HotSetPlan.byShard([1, 2, 3, 4, 5, 6, 7, 8], shardMap: map)
        for (shard, posts) in grouped { #expect(posts.allSatisfy { map.shard(forPost: $0) == shard }) }
        #expect(grouped.values.reduce(0) { $0 + $1.count } == 8)
    }

    @Test("above the target, each shard is asked for its share of hot posts (at least 100, at most 5,000); below, nothing")
    func shrinkRequests() {
        let a = RedisEndpoint(host: "a", port: 1)
        let b = RedisEndpoint(host: "b", port: 1)
        let requests = HotSetPlan.shrinkRequests(
            used: [a: 1_000, b: 500], target: 800, isCluster: true,
            slotsOf: { $0 == a ? [1, 2] : [3] }, hotPostsPerShard: [10_000, 0, 100_000])
        // a is 20 % above: 2,000 of shard 0's 10,000; shard 2's 20,000 is capped; shard 1 holds none.
        #expect(requests == [.init(shard: 0, slots: [1, 2], count: 2_000), .init(shard: 2, slots: [1, 2], count: 5_000)])
        #expect(
            HotSetPlan.shrinkRequests(used: [a: 801], target: 800, isCluster: false, slotsOf: { _ in [] }, hotPostsPerShard: [10])
                == [.init(shard: 0, slots: nil, count: 100)])
        #expect(HotSetPlan.shrinkRequests(used: [a: 800], target: 800, isCluster: false, slotsOf: { _ in [] }, hotPostsPerShard: [10]).isEmpty)
    }

    @Test("INFO memory: used_memory and maxmemory (0: no limit)")
    func memoryInfo() {
        let text = "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n"
        #expect(RedisMemoryInfo.parse(text) == RedisMemoryInfo(usedBytes: 1_048_576, maximumBytes: nil))
        #expect(RedisMemoryInfo.parse("used_memory:10\nmaxmemory:20\n") == RedisMemoryInfo(usedBytes: 10, maximumBytes: 20))
        #expect(RedisMemoryInfo.parse("# Memory\r\n") == nil)
    }
}
