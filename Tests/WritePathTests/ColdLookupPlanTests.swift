import Foundation
import Persistence
import TestSupport
import Testing

@testable import WritePath

/// The batch's one PostgreSQL statement for cold posts (`ColdLookup`) on a real server: what it
/// returns, and that it reads `likes` by its indexes only, whatever PostgreSQL's statistics say.
@Suite("The cold lookup against real PostgreSQL")
struct ColdLookupPlanTests {
    @Test(
        "a table grown since its statistics were taken: the lookup reads likes by index, never by a scan of the table, and returns exactly the rows asked"
    )
    func readsLikesByIndexOnStaleStatistics() async throws {
        try await TestEnvironment.withScratchDatabase { pool, _ in
            _ = try await SchemaMigrator.migrate(pool)
            // Statistics taken while the tables were small, then ten times more posts and fifty
            // times more likes (autovacuum off, so nothing refreshes them): the state a table is
            // in after a burst of growth. As a join, PostgreSQL then planned the likers of the
            // loaded posts as a hash join over a scan of all of `likes`, on every batch.
            try await pool.query("ALTER TABLE posts SET (autovacuum_enabled = false)")
            try await pool.query("ALTER TABLE likes SET (autovacuum_enabled = false)")
            try await pool.query("INSERT INTO posts (id) SELECT g FROM generate_series(1, 100) g")
            try await pool.query("INSERT INTO likes (user_id, post_id) SELECT u, u % 100 + 1 FROM generate_series(1, 1000) u")
            try await pool.query("ANALYZE posts")
            try await pool.query("ANALYZE likes")
            try await pool.query("INSERT INTO posts (id) SELECT g FROM generate_series(101, 1000) g")
            try await pool.query("INSERT INTO likes (user_id, post_id) SELECT u, u % 1000 + 1 FROM generate_series(1001, 50000) u")
            try await pool.query("UPDATE posts p SET likes_count = (SELECT count(*) FROM likes WHERE post_id = p.id)")
            // Post 7 has 59 likers (10 below user 1,001, 49 above), posts 101 and up 49 each (all
            // above); post 5,000,000 does not exist. A batch's worth of posts is loaded: with a
            // handful, even the join was read by index.
            let loading: [Int64] = [7] + Array(101...160)
            let posts = loading + [50, 5_000_000]
            let pairs = [ColdLookup.Pair(post: 50, user: 49), ColdLookup.Pair(post: 50, user: 48), ColdLookup.Pair(post: 101, user: 1_100)]
            for loadBelow: Int64 in [1_000, 50] {
                let lookup = ColdLookup(posts: posts, pairs: pairs, loading: loading, loadBelow: loadBelow)

                let plan = try await pool.query("EXPLAIN (FORMAT JSON) " + lookup.query, lookup.parameters)
                let nodes = try Self.planNodes(json: plan.first?.string(0) ?? "")
                let likesScans = nodes.filter { $0["Relation Name"] as? String == "likes" }.map { $0["Node Type"] as? String ?? "?" }
                #expect(!likesScans.isEmpty)
                #expect(!likesScans.contains("Seq Scan"), "likes scanned whole: \(likesScans)")

                let found = try ColdLookup.found(in: try await pool.query(lookup.query, lookup.parameters))
                let counts = try await pool.query("SELECT id, likes_count FROM posts WHERE id = ANY($1::bigint[])", [.int64Array(posts)])
                #expect(found.counts == Dictionary(uniqueKeysWithValues: try counts.map { (try $0.int64(0), try $0.int64(1)) }))
                #expect(found.counts[5_000_000] == nil)
                for post in loading {
                    let rows = try await pool.query("SELECT user_id FROM likes WHERE post_id = $1", [.int64(post)])
                    let likers = Set(try rows.map { try $0.int64(0) })
                    let returned = found.likers[post] ?? []
                    if Int64(likers.count) < loadBelow {
                        // Every liker, each once; for 101 also the pair asked (1,100 likes it).
                        #expect(Set(returned) == likers && returned.count == likers.count + (post == 101 ? 1 : 0), "post \(post)")
                    } else {
                        #expect(returned.isEmpty, "post \(post) has \(likers.count) likers, not below \(loadBelow), but came back whole")
                    }
                }
                // The pairs asked: 49 likes post 50 (49 % 100 + 1), 48 does not.
                #expect(found.likers[50] == [49])
            }
        }
    }

    /// Every node of an `EXPLAIN (FORMAT JSON)` plan, depth first.
    static func planNodes(json: String) throws -> [[String: Any]] {
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]]
        var nodes: [[String: Any]] = []
        func walk(_ node: [String: Any]) {
            nodes.append(node)
            for child in node["Plans"] as? [[String: Any]] ?? [] { walk(child) }
        }
        for entry in parsed ?? [] { if let plan = entry["Plan"] as? [String: Any] { walk(plan) } }
        return nodes
    }
}
