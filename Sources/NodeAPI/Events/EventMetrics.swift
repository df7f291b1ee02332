import Persistence

/// The change events' outbox in `/metrics`: whether this node writes events, how many are kept,
/// how old the oldest is (against the retention: the alert for pruning that falls behind), and
/// what this node's pruning did. The outbox's figures are read from PostgreSQL at each scrape
/// (two primary-key reads), only on a node with events on.
enum EventMetrics {
    static func render(enabled: Bool, retention: EventRetention?, events: LikeEvents, into text: inout String) async {
        MetricsText.single(
            "counter_events_enabled", "gauge", "1 when this node's flushes write change events (--events true), else 0.",
            enabled ? "1" : "0", into: &text)
        guard enabled else { return }
        MetricsText.single(
            "counter_events_retention_seconds", "gauge", "--event-retention: events older than this are pruned (0: kept).",
            "\(retention?.retention.inSeconds ?? 0)", into: &text)
        if let retention {
            let progress = retention.snapshot
            MetricsText.single(
                "counter_events_pruned_total", "counter", "Events this node's retention pruned since it started.",
                "\(progress.pruned)", into: &text)
            MetricsText.single(
                "counter_events_prune_failures_total", "counter", "Prunes of the events that failed (PostgreSQL unreachable, say).",
                "\(progress.failures)", into: &text)
        }
        guard let clock = try? await events.clock(),
            let oldest = try? await events.oldestAge()
        else { return }
        MetricsText.single(
            "counter_events_newest_id", "gauge", "The newest change event's id (a consumer's lag is this minus its cursor).",
            "\(clock.lastID)", into: &text)
        MetricsText.single(
            "counter_events_stored", "gauge", "Change events kept in the outbox (counter_like_events).",
            "\(clock.stored)", into: &text)
        MetricsText.single(
            "counter_events_pruned_all_total", "counter", "Events pruned from the outbox by any node since it was made.",
            "\(clock.prunedEvents)", into: &text)
        MetricsText.single(
            "counter_events_oldest_age_seconds", "gauge", "How long ago the oldest event kept was committed (0: none kept).",
            "\(oldest)", into: &text)
    }
}
