/// When a write is answered.
public enum AcknowledgementMode: String, Sendable, CaseIterable {
    /// After the change is in Redis (default). Loss window: what Redis itself may lose —
    /// with `appendfsync everysec`, up to about one second of writes if the Redis host crashes.
    case redis
    /// As soon as the shard has decided it, before the Redis write. Fastest; a change whose Redis
    /// write then fails, or that is in flight when the node crashes, is lost.
    case memory
    /// After the flush transaction that holds the change commits in PostgreSQL. Still batched:
    /// many callers share one transaction; latency is about one flush cycle.
    case postgres
}
