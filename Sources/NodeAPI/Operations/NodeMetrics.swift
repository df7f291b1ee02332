import CounterCore

/// `GET /metrics`: every family the node exposes, in Prometheus's text format. Reads what the
/// node already holds — the readiness is the last check's verdict (`ReadinessProbe.isReady`), not
/// a check of its own; only the change events' outbox figures are read from PostgreSQL
/// (`EventMetrics`, on a node with events on).
enum NodeMetrics {
    static func render(_ api: CounterAPI, into text: inout String) async {
        let service = api.service
        api.chain.metrics.render(into: &text)
        MetricsText.renderShards(await service.stats(), into: &text)
        MetricsText.renderLag(service.writeBehindLag.snapshot(), into: &text)
        MetricsText.renderRedis(api.storage.servers.redisReport(), into: &text)
        ProcessMetrics.render(into: &text)
        let ready = await api.readiness.isReady()
        MetricsText.single(
            "counter_ready", "gauge",
            "1 when the last readiness check passed (the one /readyz answers with: PostgreSQL and Redis answer, the backlog is young enough, the node serves its slots; run on /readyz and every \(Int(ReadinessSchedule.interval.inSeconds)) s), else 0.",
            ready ? "1" : "0", into: &text)
        MetricsText.single(
            "counter_flush_max_age_seconds", "gauge", "The configured --flush-max-age: about the longest a change should wait for PostgreSQL.",
            "\(service.configuration.flushMaxAge.inSeconds)", into: &text)
        if let users = api.users, users.configuration.isEnabled { UserMetrics.render(users, into: &text) }
        await EventMetrics.render(enabled: service.configuration.events, retention: api.retention, events: api.storage.events, into: &text)
        if let member = api.member, let forwarder = api.forwarding.forwarder {
            ClusterMetrics.render(member: member, ownership: service.ownership, forwarder: forwarder, into: &text)
        }
    }
}
