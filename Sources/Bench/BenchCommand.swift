import Foundation
import WritePath

/// `counter-bench`'s command line.
enum BenchCommand {
    static let usage = """
        counter-bench — load tests and measurements for CounterService

        Usage: counter-bench <mode> [options]

        Modes:
          persistence   time the write-behind's building blocks against real servers: one
                        PostgreSQL batch-apply transaction of N changes (with duplicates), and one
                        Redis pipeline of N commands (plain, and as MULTI/EXEC with a stream entry
                        per change). Creates its own posts and keys and removes them afterwards.
          writepath     drive the write path in-process (no HTTP) with many concurrent callers,
                        each liking with a fresh user every time: first all on one hot post (one
                        shard), then spread over many posts (all shards). Reports changes/s, the
                        average group commit, PostgreSQL transactions per 10,000 changes, and
                        checks that PostgreSQL agrees with every acknowledgement.
          http          load a running node over real sockets: keep-alive HTTP/1.1 connections
                        driven by a few event-loop threads; progress each second; a table of
                        throughput and p50/p90/p99/p99.9/max (histogram within 1/128); then, for
                        write scenarios, flush and check PostgreSQL against every acknowledgement
                        (fails loudly). Creates its own posts and deletes them afterwards.

          tokens        what an end user's token costs the node per request, in process: the
                        first request of a token (parse, signature, claims) for HS256, RS256
                        and ES256, and each request after it (SHA-256 and the verified-token
                        cache). Options: --tokens N distinct tokens (default 1000), --rounds N
                        passes over them once cached (default 200).

          lists         list pages of a post with --likers N likers (default 1000000) and of a
                        user with --user-likes N likes (default 100000), all written to PostgreSQL
                        by the bench one millisecond apart, at --connections N (64), each phase
                        while hot toggles run beside it at --hot-connections N (64; 0: none);
                        half first pages, half from a cursor at a random depth; --rate R for open
                        loop; --duration S (10), --warmup S (2), --url U, --api-token T,
                        --admin-token T, --postgres-url U. Checks the first pages against the
                        rows, prints pages/s and latency per phase and hot's toggles/s beside it,
                        and deletes what it made.

          events        change events (the node runs with --events true): hot toggles at
                        --connections N (64) for --duration S (10) while one consumer long-polls
                        GET /v1/events (--page-size N, 1000; the admin token); prints how long
                        after its commit each event reached the consumer (p50/p99/max), then
                        reads every event of the run back and checks id order with no gap.
                        --url U, --api-token T, --admin-token T, --postgres-url U.

        Options for persistence:
          --changes N      changes per batch / commands per pipeline (default 10000, 1-1000000)
          --posts N        posts the changes spread over (default 100, 1-100000)
          --repeat N       timed repetitions after one warm-up (default 5, 1-1000)
          --postgres-url U PostgreSQL (env COUNTER_POSTGRES_URL; default the scripts/services one)
          --redis-url U    Redis (env COUNTER_REDIS_URL; default the scripts/services one)

          compare       the standard comparison in one invocation: node hot, seed-sql,
                        sql-upsert, the /healthz ceiling and redis-lua (the same toggle as
                        one Lua script in the node's Redis, SISMEMBER then SADD/SREM then
                        SCARD by EVALSHA, driven over RESP by the same load generator) at each
                        level, node hot in open loop at half its measured rate at the largest
                        level, hot and the ceiling over HTTP/2 (--http2 64x32: connections ×
                        streams; none leaves them out), then zipf, feed, storm, mixed and lists;
                        prints every row and the ratios of this run. Options: --levels 64,256,1000
                        --duration S --warmup S --url U --api-token T --admin-token T --postgres-url U
                        --redis-url U (the node's Redis, for redis-lua) --html FILE; --cluster-url U adds a row per level for hot on a second
                        node, one that runs on a Redis Cluster; --nodes-url U (any node of a
                        cluster of several nodes, on its own key prefix) adds hot and zipf on
                        that cluster, spread over its nodes and slot-aware, with the node CPU
                        per request against the one node's; --reactions-url U (a node with
                        --reactions listing the kinds, default like,love,haha,wow,sad,angry)
                        adds the reactions scenario at 256 connections, checked, and its ratio to
                        hot (--reactions-per-user one|many: the node's, default one;
                        --reaction-kinds K,…); with --user-token-secret S (env
                        COUNTER_USER_TOKEN_SECRET, the node's), a hot row per level with end
                        users' tokens (one per connection, on the user routes) beside the
                        service token's; with --seed-app-url U and --seed-app-postgres-url U
                        (env COUNTER_SEED_APP_URL, COUNTER_SEED_APP_DATABASE_URL: what
                        `scripts/seed-app env` prints) and the user-token secret, a laravel-seed
                        row per level (the seed's own Laravel endpoint, POST /api/posts/{id}/like,
                        a new user per request, checked in its database) and a storm of users
                        every connection shares on both the node and the seed's endpoint, checked
                        by parity

        Columns: throughput, latency percentiles, failures, node µs/req (the CPU the
        node(s) spent per answered request over the measured seconds) and, for writes,
        lag p50/p99 ms: how long the run's changes waited from their acknowledgement (their
        write to Redis) to the PostgreSQL commit that applied them, from the nodes'
        counter_write_behind_lag_seconds histogram (end of warm-up to the flush after the run).

        Options for http:
          --scenario S     hot (one post, new user per request), zipf, storm, feed, mixed,
                           lists (first pages of likers, by Zipf, and of users' likes),
                           reactions (one post, random kinds, a new user per request; run the
                           node with --reactions listing them), or
                           ceiling (GET --path on every request; default /healthz)
          --operation O    toggle (default), like or unlike, for writes
          --url U          the node, http://host:port (default http://127.0.0.1:8080); with
                           several nodes, any of them: the bench reads the cluster's map
                           (GET /v1/cluster), flushes every node before the check and sums
                           every node's CPU (process_cpu_seconds_total of /metrics)
          --slot-aware     send each post's requests straight to its slot's owner, as a
                           slot-aware client does (one socket per node per connection)
          --spread         spread the connections over every node in turn, as a round-robin
                           load balancer would: nodes forward what they do not own
          --connections N  keep-alive connections (default 64, up to 20000)
          --http2          speak HTTP/2 in cleartext (prior knowledge): each of --connections
                           carries --streams N clients (1 to 100, default 32), each with one
                           request in flight, as h2load -c/-m do; the check is the same
          --threads N      event-loop threads (default 1)
          --duration S     measured seconds (default 10); --warmup S not counted (default 2)
          --rate R         open loop at R requests/s in all (latency counts from the scheduled
                           time, so queueing shows); default closed loop
          --timeout S      a request unanswered this long fails (default 5)
          --posts N        posts for zipf/feed/mixed (default 1000); --zipf-exponent E (0.99)
          --read-ratio R   share of reads in mixed (default 0.9)
          --feed-size N    posts per feed page, 1 to 1000 (default: 20 to 100 at random)
          --api-token T, --admin-token T   (env COUNTER_API_TOKEN, COUNTER_ADMIN_TOKEN)
          --user-tokens    writes go to the user routes (/v1/posts/{post}/like/toggle, …), each
                           connection as one end user with its own HS256 token, signed with
                           --user-token-secret S (env COUNTER_USER_TOKEN_SECRET: the node's);
                           run the node with --user-write-rate 0, or it limits each user
          --storm-users N  storm: N users every connection shares, so the same pairs are
                           toggled at once (checked by parity: a pair ends liked exactly when
                           an odd number of its toggles succeeded); default each connection's own
          --reaction-kinds K  reactions: the kinds drawn (default like,love,haha,wow,sad,angry)
          --reaction-users N  reactions: N users per connection, in turn, so each keeps
                           changing kinds (a storm of switches with one per user)
          --reactions-per-user one|many  reactions: the node's setting (default one); with one,
                           the check fails on any answer or row showing a user with two kinds
          --no-check       skip the correctness check; --json FILE writes the result;
          --html FILE      writes a self-contained page with charts (also for compare)

          hydration     the first touch of a post with --likers likers in PostgreSQL (default
                        1000000) and none in Redis, while toggles keep arriving on --other-posts
                        posts of its slot (default 16) over --connections (default 64): prints
                        the first request's time, the node's resident memory before, at its peak
                        and after, and the other posts' latency meanwhile. Also --url U,
                        --duration S (default 4), --postgres-url U, --api-token T, --admin-token T.
                        Writes the rows itself (about 10 s per million) and deletes them after.

          scale         --posts posts (default 1000000) get --likes-per-post likes each (default
                        10) through the node over --connections (default 256): prints the node's
                        resident memory before and after, Redis's bytes per post and per liker
                        (its used_memory after one like per post and after all), and what the
                        write-behind log costs per change before it is trimmed. Then
                        --hot-phase S seconds (default 300; 0: none) of zipf toggles on 1 % of
                        the posts by --hot-users users (default 1024, at least one per
                        connection: an audience that bounds each post's likers), and Redis's
                        used_memory above the empty baseline after it:
                        what the node's --hot-idle kept (compare a node with --hot-idle 60s and
                        one with --hot-idle off); the pairs toggled are checked in PostgreSQL.
                        Also --url U, --postgres-url U, --redis-url U (the node's Redis), --keep
                        (leave the posts), --api-token T, --admin-token T.

          chaos         (run by scripts/chaos, which starts PostgreSQL and Redis of its own) a node
                        under mixed load — likes, unlikes, toggles on pairs each connection owns,
                        reads, feed queries — while faults come every 17 s: kill -9 of the node, a
                        PostgreSQL restart, kill -9 of Redis, SIGSTOP of the node, PostgreSQL down
                        until a shard's backlog passes its limit, a trigger that refuses one user's
                        rows. Then replays the dead letters, flushes and checks PostgreSQL: nothing
                        lost or phantom, likes_count equal to the rows, dead letters only of the
                        poisoned user; prints a timeline of throughput and failures with the faults.
                        Options: --minutes M (default 2), --connections N (32), --rate R (800 per
                        second, open loop), --posts N (200), --backlog-limit N (150 per shard),
                        --hot-idle D (the node's; 1s evicts posts all the time), --reactions one|many
                        (the node serves like,love,haha,wow, one or many per user; the load reacts
                        with them and the check holds each pair's kinds and each kind's count),
                        --port P (18180), --node-binary PATH, --services PATH (scripts/services;
                        its data folder and ports from COUNTER_DATA_DIR, COUNTER_PG_PORT,
                        COUNTER_REDIS_PORT, COUNTER_REDIS_APPENDFSYNC).

        Options for writepath:
          --callers N      concurrent callers (default 1000, 1-100000)
          --seconds N      seconds per run (default 5)
          --shards N       shards (default 4, 1-256)
          --posts N        posts of the spread run (default 10000)
          --postgres-url U, --redis-url U   as above

        Build with `swift build -c release` for figures worth comparing.
        Exit status: 0 done; 1 a server failed; 2 invalid command line.
        """

    static func run(arguments: [String], environment: [String: String]) async -> Int32 {
        guard let mode = arguments.first else {
            FileHandle.standardError.write(Data("counter-bench: missing mode\n\n\(usage)\n".utf8))
            return 2
        }
        if mode == "--help" || mode == "-h" || arguments.contains("--help") {
            print(usage)
            return 0
        }
        do {
            let rest = Array(arguments.dropFirst())
            switch mode {
            case "persistence":
                try await PersistenceBench(options: PersistenceBenchOptions(arguments: rest, environment: environment)).run()
            case "compare":
                try await CompareBench(arguments: rest, environment: environment).run()
            case "http":
                try await HTTPBench(options: HTTPBenchOptions(arguments: rest, environment: environment)).run()
            case "writepath":
                try await WritePathBench(options: WritePathBenchOptions(arguments: rest, environment: environment)).run()
            case "scale":
                try await ScaleBench(options: ScaleBenchOptions(arguments: rest, environment: environment)).run()
            case "lists":
                try await ListsBench(options: ListsBenchOptions(arguments: rest, environment: environment)).run()
            case "events":
                try await EventsBench(options: EventsBenchOptions(arguments: rest, environment: environment)).run()
            case "hydration":
                try await HydrationBench(options: HydrationBenchOptions(arguments: rest, environment: environment)).run()
            case "tokens":
                try TokenBench(arguments: rest).run()
            case "chaos":
                try await ChaosBench(options: ChaosBenchOptions(arguments: rest, environment: environment)).run()
            default:
                FileHandle.standardError.write(Data("counter-bench: unknown mode \"\(mode)\" (see --help)\n".utf8))
                return 2
            }
            return 0
        } catch let error as BenchCheckFailure {
            FileHandle.standardError.write(Data("counter-bench: \(error.message)\n".utf8))
            return 1
        } catch let error as BenchUsageError {
            FileHandle.standardError.write(Data("counter-bench: \(error.message) (see --help)\n".utf8))
            return 2
        } catch {
            FileHandle.standardError.write(Data("counter-bench: \(error)\n".utf8))
            return 1
        }
    }
}

/// A command line the bench cannot use.
struct BenchUsageError: Error {
    let message: String
}

/// A run whose correctness check failed.
struct BenchCheckFailure: Error {
    let message: String
}
