import CounterCore
import Persistence

/// How the shards and their flushers behave. Defaults suit one node on a small machine.
public struct WritePathConfiguration: Sendable, Equatable {
    /// Shards (each with its own Redis connection and write-behind). Defaults to `4`.
    public var shardCount: Int = 4
    /// When writes are answered. Defaults to `.redis`.
    public var acknowledgement: AcknowledgementMode = .redis
    /// With `.replicated`: how many replicas of each master a batch wrote to must have its
    /// writes before it is answered. Defaults to `1`.
    public var acknowledgementReplicas: Int = 1
    /// With `.replicated`: how long a batch waits for them (`WAIT`'s timeout); then its writes
    /// are answered `not_replicated`. Defaults to 500 ms.
    public var acknowledgementReplicaTimeout: Duration = .milliseconds(500)
    /// How long a batch waits for a Redis reply before the connection is dropped and the batch's
    /// requests on it are answered `unavailable`; `nil`: the connection's command timeout (5 s).
    /// A batch's round trips are awaited in its shard's loop, so nothing else of the shard moves
    /// meanwhile — a node of a cluster sets half its lease: by then it has stopped deciding
    /// (Redis did not answer its lease check), and its callers should hear so. Defaults to `nil`.
    public var batchRedisTimeout: Duration? = nil
    /// Changes a shard lets wait for PostgreSQL before it refuses new writes. Defaults to `1_000_000`.
    public var backlogLimitPerShard: Int = 1_000_000
    /// How long a shard's oldest change may wait for PostgreSQL before the shard refuses new
    /// writes (`backlog_full`, like the count limit), so that under overload or an outage the
    /// lag of PostgreSQL behind the answers is bounded in time too, not only in changes; `nil`:
    /// no limit. Defaults to 120 s: twice `/readyz`'s default lag limit, so a load balancer
    /// turns away first.
    public var backlogMaximumAge: Duration? = .seconds(120)
    /// A post untouched this long leaves Redis (is evicted) once nothing of it is pending: its
    /// reads are then answered from PostgreSQL, and its next write loads it again (or turns it
    /// warm). `nil`: posts
    /// stay in Redis for good. Defaults to 10 minutes.
    public var hotIdle: Duration? = .seconds(600)
    /// Bytes of `used_memory` per Redis master above which the least recently touched posts
    /// there are evicted before they are idle (those with nothing pending), until it is below
    /// again. `nil` (the default): idle time only.
    public var hotMemoryTarget: Int? = nil
    /// A flush runs at least this often while changes wait. Defaults to 200 ms.
    public var flushInterval: Duration = .milliseconds(200)
    /// A flush runs as soon as this many changes wait; also about the most one flush reads.
    /// Defaults to `5_000`. Larger flushes hold Redis and the CPU longer at a time, which shows
    /// in the latency tail (wrk, 64 connections, single runs: p99 54 ms at 20,000 against 12–27 ms
    /// at 1,000–5,000, where run-to-run noise is as large as the differences); smaller ones cap
    /// how fast a backlog drains (in-process, 1,000 or 2,000 left a 2.5–2.7 s backlog at 38k
    /// changes/s where 5,000 left 0.9 s).
    public var flushBatchSize: Int = 5_000
    /// A change waits at most about this long, counted from when its slot's log first had a change
    /// waiting (a slot flushed in part keeps its age; posts share their slot's). Defaults to 1 s.
    public var flushMaxAge: Duration = .seconds(1)
    /// How long "this post does not exist" is remembered before PostgreSQL is asked again
    /// (for at most `unknownPostsRemembered` posts per shard; beyond that the oldest are
    /// forgotten first). Defaults to 5 s.
    public var unknownPostMemory: Duration = .seconds(5)
    /// Most posts a shard remembers as not existing at once: a client sending endless distinct
    /// ids that do not exist cannot grow the memory past it (about 100 bytes each). Defaults to 10,000.
    public var unknownPostsRemembered: Int = 10_000
    /// Most operations a shard holds waiting to be decided (queued, or parked while a large
    /// post loads); more are refused with `CounterError(.overloaded)` until it catches up, so
    /// clients cannot grow the queue without bound (about 200 bytes each). Defaults to 100,000.
    public var maximumQueuedOperationsPerShard: Int = 100_000
    /// Prefix of every Redis key. Defaults to `cs`.
    public var keyPrefix: String = "cs"
    /// Flush retries back off from this delay, doubling. Defaults to 50 ms.
    public var retryInitialDelay: Duration = .milliseconds(50)
    /// ... up to this delay. Defaults to 5 s.
    public var retryMaximumDelay: Duration = .seconds(5)
    /// How long an operation on a slot that is changing owner waits for the move to settle
    /// before it is refused with `slotMoving` (503, Retry-After). Defaults to 5 s.
    public var slotMoveWait: Duration = .seconds(5)
    /// A cold post whose `likes_count` is at least this is not loaded by the batch that first
    /// writes it: it turns *warm* (its count and the memberships seen in Redis; other users are
    /// looked up in PostgreSQL), and is loaded whole only once it is busy enough
    /// (`warmPromotionLookups`), in the background, page by page (`WarmPostPromotion`), while it
    /// keeps answering. Smaller posts load inside the batch that first writes them. Defaults to
    /// `10_000`.
    public var warmThreshold: Int64 = 10_000
    /// A warm post is promoted to a whole likers set once this many of its users' memberships
    /// were looked up in PostgreSQL (users its hash did not know) since it turned warm in this
    /// process: then most of its traffic is users Redis cannot answer, and the set, loaded once,
    /// answers them all. Defaults to `1_000`.
    public var warmPromotionLookups: Int = 1_000
    /// Likers read from PostgreSQL (a cursor's `FETCH`) and written to Redis (one `SADD`) per page
    /// of a streamed hydration. Defaults to `10_000`.
    public var hydrationPageSize: Int = 10_000
    /// A check every flush runs in its transaction on the entries it applied (`FlushAudit`: the
    /// tests' audit table makes applying an entry twice fail the flush). `nil` (the default): none.
    package var flushAudit: FlushAudit? = nil
    /// Whether every flush also writes a change event (`counter_like_events`) for each like row it
    /// inserts or deletes, in the same transaction. Defaults to `false`: an existing deployment
    /// starts paying for the outbox (its rows, its pruning) only when it asks for events.
    public var events: Bool = false
    /// Which reactions the deployment counts: `likesOnly` (the default) is the service as it
    /// always was, one kind, `like`; otherwise the kinds, one or many per user, and the caps.
    public var reactions: ReactionModel = .likesOnly

    public init() {}
}
