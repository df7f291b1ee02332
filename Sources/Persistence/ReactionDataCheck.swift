import CounterCore
import PostgresDriver

/// What PostgreSQL holds that a reaction model cannot serve: rows of a kind the model does not
/// list (a kind removed from `--reactions`, or other kinds under likes only), and — for one kind
/// per user — users holding several kinds of a post. A node finding any refuses to start, and
/// says what to run (docs/REACTIONS.md, "Changing the model").
///
/// The kinds are read from `reaction_counts` (a row per post and kind, far fewer than the
/// reactions), the pairs with several kinds from a scan of `reactions` probing `likes` and
/// `reactions` by their unique indexes: a start pays a read of each once.
public enum ReactionDataCheck {
    /// The contradictions found (none: the model fits the data), each a sentence with what to do.
    public static func contradictions(of model: ReactionModel, pool: PostgresPool) async throws -> [String] {
        var found: [String] = []
        let listed: [String]?
        switch model.kinds {
        case .fixed(let kinds): listed = kinds.map(\.name)
        case .open: listed = nil
        }
        if let listed {
            let rows = try await pool.query(
                """
                SELECT kind, sum(count)::bigint FROM reaction_counts
                WHERE count > 0 AND kind <> ALL($1::text[])
                GROUP BY kind ORDER BY kind LIMIT 20
                """, [.textArray(listed)])
            if !rows.isEmpty {
                let kinds = try rows.map { "\($0.string(0) ?? "?") (\(try $0.int64(1)))" }.joined(separator: ", ")
                found.append(
                    "PostgreSQL holds reactions of kinds --reactions does not list: \(kinds); list them in --reactions, or delete their rows first (DELETE FROM reactions WHERE kind IN (…); DELETE FROM reaction_counts WHERE kind IN (…))"
                )
            }
            if !listed.contains("like"), try await pool.query("SELECT 1 FROM likes LIMIT 1").first != nil {
                found.append("PostgreSQL holds likes (rows of likes), and --reactions does not list like; list it, or delete the likes first")
            }
        }
        if model.isOnePerUser {
            let rows = try await pool.query(
                """
                SELECT r.user_id, r.post_id FROM reactions r
                WHERE EXISTS (SELECT 1 FROM likes l WHERE l.user_id = r.user_id AND l.post_id = r.post_id)
                   OR EXISTS (SELECT 1 FROM reactions o WHERE o.user_id = r.user_id AND o.post_id = r.post_id AND o.kind <> r.kind)
                LIMIT 5
                """)
            if !rows.isEmpty {
                // A pair is found once per row of it beyond the first: named once.
                var named: [String] = []
                for row in rows {
                    let pair = "user \(try row.int64(0)) on post \(try row.int64(1))"
                    if !named.contains(pair) { named.append(pair) }
                }
                let pairs = named.joined(separator: ", ")
                found.append(
                    "users hold several kinds of a post (\(pairs)…), which --reactions-per-user one cannot serve; keep --reactions-per-user many, or keep one kind per user and post first (docs/REACTIONS.md, \"Changing the model\")"
                )
            }
        }
        return found
    }

    /// The refusal to start a node whose model contradicts the data.
    public struct Contradiction: Error, Sendable, CustomStringConvertible {
        public let problems: [String]

        public init(problems: [String]) {
            self.problems = problems
        }

        public var description: String {
            "the reaction settings contradict what PostgreSQL holds: " + problems.joined(separator: "; ")
        }
    }
}
