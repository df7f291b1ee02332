import BenchKit
import PostgresDriver
import UserTokens

/// The seed's own endpoint as a bench target: `POST /api/posts/{id}/like` of the Laravel app in
/// `Examples/SeedLaravelApp` (php-fpm behind nginx, `scripts/seed-app start`), on its own
/// database. Each request carries an HS256 token for its user, signed with the secret the app
/// shares with the node. The rows are checked afterwards in the app's database as the node's
/// are in its own: nothing lost, nothing phantom, `likes_count` equal to the rows.
struct SeedAppTarget {
    /// Where nginx serves the app.
    let endpoint: Endpoint
    /// The app's database (`scripts/seed-app env` prints it).
    let postgresURL: String
    let signer: TokenSigner

    /// What the app answered under load and what its database holds afterwards.
    struct Measured {
        var load: LoadResult
        var check: CorrectnessCheck.Report
    }

    /// `hot`: every connection on one post, a new user per request (nearly every toggle a
    /// first like, as the node's `hot` row and `seed-sql`); `storm`: four posts toggled by users
    /// every connection shares (`sharedUsers` of them), so the same pairs are toggled at once,
    /// checked by parity.
    func measure(_ scenario: Scenario, load: LoadOptions, sharedUsers: Int64? = nil) async throws -> Measured {
        precondition(scenario == .hot || scenario == .storm, "the seed's route only toggles")
        let pool = PostgresPool(configuration: PostgresConfiguration(url: postgresURL))
        defer { Task { await pool.close() } }
        let base = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        let posts = (0..<Int64(scenario == .hot ? 1 : 4)).map { base + $0 }
        try await pool.query("INSERT INTO posts (id) SELECT unnest($1::bigint[])", [.int64Array(posts)])
        var workload = ScenarioWorkload(
            scenario: scenario, operation: .toggle, posts: posts, zipfExponent: 0.99, readRatio: 0,
            token: nil, userBase: Int64.random(in: 1...1_000_000) * 1_000_000_000)
        let signer = self.signer
        workload.seedRouteToken = { user in signer.token(user: user, lifetime: 3_600) }
        workload.sharedStormUsers = scenario == .storm ? sharedUsers : nil
        var options = load
        options.endpoints = [endpoint]
        let result = await LoadGenerator(options: options, workload: workload).run { _, _, _, _ in }
        // Requests the generator stopped waiting for at the end still run in the app: their
        // pairs are undetermined, but their writes must land before the rows are read and the
        // posts deleted (or they would fail on the deleted post and crowd the app's error log).
        try await waitUntilIdle(pool)
        let likes = try await PostgresLikes.read(posts, pool: pool)
        let members = Set(likes.pairs)
        let check =
            workload.sharedStormUsers == nil
            ? CorrectnessCheck.run(expected: result.expectations, baseline: [], members: members, counts: likes.counts)
            : CorrectnessCheck.runByParity(toggles: result.toggles, members: members, counts: likes.counts)
        print(
            "  correctness (the seed app's database): \(check.checkedPairs) pairs (\(check.undeterminedPairs) undetermined), \(members.count) likes rows — "
                + (check.passed ? "PASSED" : "FAILED: \(check.lost.count) lost, \(check.phantom.count) phantom, \(check.drift.count) count drifts"))
        let statuses = result.statusesText
        let errors = result.errorsText
        print("  the seed's endpoint answered: \(statuses.isEmpty ? "nothing" : statuses); without an answer: \(errors.isEmpty ? "none" : errors)")
        // The likes go with their posts (the app's foreign key cascades).
        try await pool.query("DELETE FROM posts p USING unnest($1::bigint[]) AS gone(id) WHERE p.id = gone.id", [.int64Array(posts)])
        return Measured(load: result, check: check)
    }

    /// Waits (up to 10 s) until no other session of the app's database is in a statement or
    /// a transaction.
    private func waitUntilIdle(_ pool: PostgresPool) async throws {
        for _ in 0..<100 {
            let busy = try await pool.query(
                """
                SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND state IS NOT NULL AND state <> 'idle'
                """)
            if try busy.first?.int64(0) == 0 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}
