import CounterCore
import Persistence
import PostgresDriver
import TestSupport
import Testing

/// A node holds its reaction settings against the data before it serves (each test on a
/// database of its own: the checks read whole tables).
@Suite("Reaction settings against the data")
struct ReactionDataCheckTests {
    static let love = ReactionKind("love")!

    @Test(
        "kinds rows hold that a fixed list leaves out, likes under a list without like, and users with several kinds under one per user are found; a fitting model finds nothing"
    )
    func contradictions() async throws {
        try await TestEnvironment.withScratchDatabase { pool, _ in
            _ = try await SchemaMigrator.migrate(pool)
            #expect(try await ReactionDataCheck.contradictions(of: .likesOnly, pool: pool).isEmpty, "an empty database fits every model")
            try await pool.withConnection { connection in
                try await connection.runScript(
                    """
                    INSERT INTO posts (id, likes_count) VALUES (1, 1), (2, 0);
                    INSERT INTO likes (user_id, post_id) VALUES (7, 1);
                    INSERT INTO reactions (user_id, post_id, kind) VALUES (7, 1, 'love'), (8, 2, 'tada');
                    INSERT INTO reaction_counts (post_id, kind, count) VALUES (1, 'love', 1), (2, 'tada', 1);
                    """)
            }
            let likesOnly = try await ReactionDataCheck.contradictions(of: .likesOnly, pool: pool)
            #expect(likesOnly.count == 1 && likesOnly[0].contains("love (1), tada (1)"), "\(likesOnly)")
            let noLike = try await ReactionDataCheck.contradictions(
                of: ReactionModel(kinds: .fixed([Self.love, ReactionKind("tada")!]), perUser: .many), pool: pool)
            #expect(noLike.count == 1 && noLike[0].contains("does not list like"), "\(noLike)")
            let one = try await ReactionDataCheck.contradictions(of: ReactionModel(kinds: .open, perUser: .one), pool: pool)
            #expect(one.count == 1 && one[0].contains("user 7 on post 1"), "\(one)")
            #expect(try await ReactionDataCheck.contradictions(of: ReactionModel(kinds: .open, perUser: .many), pool: pool).isEmpty)
            // A user's like and love of a post: many fits; one does not until one kind goes.
            try await pool.query("DELETE FROM reactions WHERE user_id = 7")
            #expect(try await ReactionDataCheck.contradictions(of: ReactionModel(kinds: .open, perUser: .one), pool: pool).isEmpty)
        }
    }
}
