import PostgresDriver

/// One versioned step of the schema. Its SQL is constant and written so it creates only what is
/// missing (`IF NOT EXISTS`), because the app may have created some of it already.
public struct SchemaMigration: Sendable {
    /// An index built with `CREATE INDEX CONCURRENTLY`, or dropped with `DROP INDEX
    /// CONCURRENTLY`: outside any transaction, so writes to its table go on meanwhile (a
    /// migration of this kind has no `sql`).
    public enum ConcurrentIndex: Sendable, Equatable {
        /// `name` (in the connection's schema) `ON definition`: the table and the columns, e.g.
        /// `likes (post_id, created_at DESC)`.
        case create(name: String, definition: String)
        /// The index `name`, if it exists.
        case drop(name: String)
    }

    /// Applied in ascending order; never reuse or renumber a version once it has shipped.
    public let version: Int
    /// A few words on what it does, stored with the version.
    public let name: String
    /// Constant SQL, run inside the migration transaction (empty for an index built concurrently).
    public let sql: String
    /// For a migration that builds or drops an index concurrently: which (`sql` is then empty).
    public let concurrentIndex: ConcurrentIndex?

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
        self.concurrentIndex = nil
    }

    public init(version: Int, name: String, concurrentIndex: ConcurrentIndex) {
        self.version = version
        self.name = name
        self.sql = ""
        self.concurrentIndex = concurrentIndex
    }
}

extension SchemaMigration {
    /// Every migration this build knows, in order.
    public static let all: [SchemaMigration] = [
        seedLayout, flushProgress, clusterMembership, slotEpochs,
        likesByPostNewestFirst, likesByUserNewestFirst, dropLikesByPost, likeEvents,
        reactions, reactionEvents, nodeSettings, replacedProgress,
    ]

    /// The progress a flush's upsert replaced, kept on the row so the upsert can return it: one
    /// statement and one row lock per log, where a `SELECT … FOR UPDATE` then the upsert took
    /// two (`LikeBatchApplier.progressUpsert`). Only the upsert that sets them reads them.
    static let replacedProgress = SchemaMigration(
        version: 12, name: "counter_flush_progress.previous_entry_ms, previous_entry_seq",
        sql: """
            ALTER TABLE counter_flush_progress ADD COLUMN IF NOT EXISTS previous_entry_ms bigint;
            ALTER TABLE counter_flush_progress ADD COLUMN IF NOT EXISTS previous_entry_seq bigint;
            """)

    /// The settings every node of a deployment must share (the reaction model), as each live
    /// node registered them: a node whose settings differ from a live one's refuses to start.
    /// `NULL` (a node of a version before it): likes only.
    static let nodeSettings = SchemaMigration(
        version: 11, name: "counter_nodes.settings",
        sql: """
            ALTER TABLE counter_nodes ADD COLUMN IF NOT EXISTS settings text;
            """)

    /// Reactions of kinds other than `like` (whose rows stay `likes`, and whose count stays
    /// `posts.likes_count`): a row per (user, post, kind) held, and a count per post and kind,
    /// both written by the flush transaction that writes the likes. New tables only: an app's
    /// `posts` and `likes` are not touched. The indexes serve who reacted with a kind, newest
    /// first, and a user's reactions, newest first (the tables are new and empty, so they are
    /// built in the migration's transaction).
    static let reactions = SchemaMigration(
        version: 9, name: "reactions, reaction_counts",
        sql: """
            CREATE TABLE IF NOT EXISTS reactions (
                id bigserial PRIMARY KEY,
                user_id bigint NOT NULL,
                post_id bigint NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
                kind text NOT NULL CONSTRAINT reactions_kind_check CHECK (kind ~ '^[a-z0-9_]{1,32}$' AND kind <> 'like'),
                created_at timestamptz,
                updated_at timestamptz,
                CONSTRAINT reactions_user_id_post_id_kind_unique UNIQUE (user_id, post_id, kind)
            );
            CREATE INDEX IF NOT EXISTS reactions_post_id_kind_created_at_index ON reactions (post_id, kind, created_at DESC, user_id);
            CREATE INDEX IF NOT EXISTS reactions_user_id_created_at_index ON reactions (user_id, created_at DESC, post_id);
            CREATE TABLE IF NOT EXISTS reaction_counts (
                post_id bigint NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
                kind text NOT NULL,
                count bigint NOT NULL DEFAULT 0,
                PRIMARY KEY (post_id, kind)
            );
            """)

    /// The events' kind: `kind` (`NULL` for `like`, so every event written before stays what
    /// it was) and, for a switch of kinds in the `one`-per-user model, the kind it replaced
    /// (`replaced_kind`, `like` included): one event, never two. Nullable columns without a default: adding them
    /// rewrites no row.
    static let reactionEvents = SchemaMigration(
        version: 10, name: "counter_like_events.kind, replaced_kind",
        sql: """
            ALTER TABLE counter_like_events ADD COLUMN IF NOT EXISTS kind text;
            ALTER TABLE counter_like_events ADD COLUMN IF NOT EXISTS replaced_kind text;
            """)

    /// The change events' outbox: one row per like or unlike that changed `likes`, written by the
    /// flush transaction that changed it (with `--events on`), and the clock its ids come from.
    /// The flush takes the clock's row lock last, just before it commits, so ids are handed out
    /// in commit order and a reader that has seen id N will never later see a smaller one
    /// appear (no gaps for a consumer's `after` to skip). `pruned_through` is the highest id
    /// retention deleted: a consumer behind it has missed events, and is told so.
    static let likeEvents = SchemaMigration(
        version: 8, name: "counter_like_events, counter_event_clock",
        sql: """
            CREATE TABLE IF NOT EXISTS counter_like_events (
                id bigint PRIMARY KEY,
                post_id bigint NOT NULL,
                user_id bigint NOT NULL,
                liked boolean NOT NULL,
                liked_at timestamptz NOT NULL,
                committed_at timestamptz NOT NULL DEFAULT clock_timestamp()
            );
            CREATE TABLE IF NOT EXISTS counter_event_clock (
                only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
                last_id bigint NOT NULL DEFAULT 0,
                pruned_through bigint NOT NULL DEFAULT 0,
                pruned_events bigint NOT NULL DEFAULT 0
            );
            INSERT INTO counter_event_clock DEFAULT VALUES ON CONFLICT DO NOTHING;
            """)

    /// A post's likers newest first (`GET /v1/posts/{post}/likers`: a keyset on `created_at`,
    /// `user_id`), built without blocking the flusher's writes.
    static let likesByPostNewestFirst = SchemaMigration(
        version: 5, name: "likes_post_id_created_at_index",
        concurrentIndex: .create(name: "likes_post_id_created_at_index", definition: "likes (post_id, created_at DESC, user_id)"))

    /// A user's likes newest first (`GET /v1/users/{user}/likes`), built the same way.
    static let likesByUserNewestFirst = SchemaMigration(
        version: 6, name: "likes_user_id_created_at_index",
        concurrentIndex: .create(name: "likes_user_id_created_at_index", definition: "likes (user_id, created_at DESC, post_id)"))

    /// Version 1's `likes (post_id)` index: version 5's begins with `post_id` and serves every
    /// read it served (a post's rows, a recount, the foreign key's cascade), and each index
    /// costs every like the flusher writes (PostgreSQL's CPU per hot toggle, measured with
    /// `scripts/bench-cpu`: 12.9–15.9 µs with version 1's indexes, 17.4–18.8 with versions 5 and
    /// 6 instead of this one, 16.2–25.0 with all three).
    static let dropLikesByPost = SchemaMigration(
        version: 7, name: "drop likes_post_id_index (likes_post_id_created_at_index covers it)",
        concurrentIndex: .drop(name: "likes_post_id_index"))

    /// The seed's Laravel layout: `posts.likes_count`, and `likes` with `unique(user_id, post_id)`
    /// and timestamps. Works on a database where the app already created `posts` (perhaps without
    /// `likes_count`) or `likes`: it adds only what is missing.
    static let seedLayout = SchemaMigration(
        version: 1, name: "seed layout: posts.likes_count, likes",
        sql: """
            CREATE TABLE IF NOT EXISTS posts (
                id bigint PRIMARY KEY,
                likes_count bigint NOT NULL DEFAULT 0,
                created_at timestamptz,
                updated_at timestamptz
            );
            ALTER TABLE posts ADD COLUMN IF NOT EXISTS likes_count bigint NOT NULL DEFAULT 0;
            CREATE TABLE IF NOT EXISTS likes (
                id bigserial PRIMARY KEY,
                user_id bigint NOT NULL,
                post_id bigint NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
                created_at timestamptz,
                updated_at timestamptz,
                CONSTRAINT likes_user_id_post_id_unique UNIQUE (user_id, post_id)
            );
            -- The flusher's ON CONFLICT (user_id, post_id) needs this; Laravel names it the same way.
            CREATE UNIQUE INDEX IF NOT EXISTS likes_user_id_post_id_unique ON likes (user_id, post_id);
            -- Recounting a post (reconcile, hydration) reads its likes by post.
            CREATE INDEX IF NOT EXISTS likes_post_id_index ON likes (post_id);
            """)

    /// The flusher's progress per write-behind log, updated in the same transaction as the
    /// changes it applies, so a crash between commit and trimming the log neither loses nor
    /// double-applies anything.
    static let flushProgress = SchemaMigration(
        version: 2, name: "counter_flush_progress",
        sql: """
            CREATE TABLE IF NOT EXISTS counter_flush_progress (
                log text PRIMARY KEY,
                last_entry_ms bigint NOT NULL,
                last_entry_seq bigint NOT NULL,
                applied_changes bigint NOT NULL DEFAULT 0,
                applied_batches bigint NOT NULL DEFAULT 0,
                updated_at timestamptz NOT NULL DEFAULT now()
            );
            """)

    /// The nodes of a cluster, each with a lease kept by PostgreSQL's clock and a new incarnation
    /// per process start, and the owner and epoch of every slot.
    static let clusterMembership = SchemaMigration(
        version: 3, name: "counter_nodes, counter_slots",
        sql: """
            CREATE SEQUENCE IF NOT EXISTS counter_node_incarnations;
            CREATE TABLE IF NOT EXISTS counter_nodes (
                id text PRIMARY KEY,
                incarnation bigint NOT NULL,
                advertise_url text NOT NULL,
                lease_expires_at timestamptz NOT NULL,
                started_at timestamptz NOT NULL DEFAULT now()
            );
            CREATE TABLE IF NOT EXISTS counter_slots (
                slot integer PRIMARY KEY CHECK (slot >= 0 AND slot < 16384),
                owner text,
                owner_incarnation bigint,
                epoch bigint NOT NULL DEFAULT 0
            );
            """)

    /// Ownership per deployment (the Redis key prefix, so deployments sharing one database — and
    /// tests running side by side — each have their own nodes and slots), replacing version 3's
    /// tables, which no node used: epochs drawn from one sequence, so every change of a slot's
    /// owner gets an epoch no slot ever had (epochs, not node ids, tell an owner from the one
    /// before it, even A→B→A); the operator's drain mark.
    static let slotEpochs = SchemaMigration(
        version: 4, name: "counter_nodes, counter_slots per deployment; counter_epochs",
        sql: """
            CREATE SEQUENCE IF NOT EXISTS counter_epochs;
            DROP TABLE IF EXISTS counter_slots;
            DROP TABLE IF EXISTS counter_nodes;
            CREATE TABLE counter_nodes (
                deployment text NOT NULL,
                id text NOT NULL,
                incarnation bigint NOT NULL,
                advertise_url text NOT NULL,
                lease_expires_at timestamptz NOT NULL,
                started_at timestamptz NOT NULL DEFAULT now(),
                draining boolean NOT NULL DEFAULT false,
                PRIMARY KEY (deployment, id)
            );
            CREATE TABLE counter_slots (
                deployment text NOT NULL,
                slot integer NOT NULL CHECK (slot >= 0 AND slot < 16384),
                owner text,
                owner_incarnation bigint,
                epoch bigint NOT NULL DEFAULT 0,
                PRIMARY KEY (deployment, slot)
            );
            """)
}
