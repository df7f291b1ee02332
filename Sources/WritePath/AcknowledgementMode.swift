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
    /// After the change is in Redis on its master *and* on `acknowledgementReplicas` of its
    /// replicas (`WAIT` on every master a batch wrote to, after its group commit). A Redis
    /// failover then loses no acknowledged change. A `WAIT` that times out is no
    /// acknowledgement: the batch's writes are answered `503 not_replicated` — the change is
    /// written and logged, and stands unless its master fails before a replica has it.
    case replicated
}
