import PostgresDriver
import RedisDriver

/// The service's storage as a node's HTTP API reads it beside the write path: the change events,
/// the lists, the operators' checks and dead letters, and the servers' health. The composition
/// root builds it from the drivers' clients, so the API sees storage's types only.
public struct NodeStorage: Sendable {
    /// The change events' outbox on the node's pool: the figures `/metrics` reads.
    public let events: LikeEvents
    /// The outbox on the events' own pool: `GET /v1/events` and its long polls, so a consumer
    /// never waits behind the flushes for a connection.
    public let eventFeed: LikeEvents
    /// The lists of likers and of a user's likes.
    public let lists: LikeLists
    /// Posts' counts and rows, for reconcile (its pages and repairs; Redis is read by the write
    /// path, which owns those keys).
    public let records: PostRecords
    /// The dead letters.
    public let deadLetters: DeadLetterStream
    /// Whether PostgreSQL and Redis answer, and the Redis nodes' figures.
    public let servers: StorageServers

    /// - Parameters:
    ///   - postgres: the node's pool.
    ///   - redis: a client of the node's Redis topology, of the API's own (the caller closes it).
    ///   - layout: the node's key layout.
    ///   - eventsPostgres: the pool `GET /v1/events` reads with; `nil`: `postgres`.
    public init(postgres: PostgresPool, redis: RedisClient, layout: RedisKeyLayout, eventsPostgres: PostgresPool? = nil) {
        events = LikeEvents(pool: postgres)
        eventFeed = LikeEvents(pool: eventsPostgres ?? postgres)
        lists = LikeLists(pool: postgres)
        records = PostRecords(pool: postgres)
        deadLetters = DeadLetterStream(redis: redis, layout: layout)
        servers = StorageServers(postgres: postgres, redis: redis)
    }
}
