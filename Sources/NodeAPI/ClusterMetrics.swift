import NodeCluster
import WritePath

/// The cluster figures of `/metrics`: slots owned, writes fenced, takeovers and their duration,
/// hand-offs, requests forwarded and answered `421`.
enum ClusterMetrics {
    static func render(member: ClusterMember, ownership: OwnedSlots, forwarder: Forwarder, into text: inout String) {
        func single(_ name: String, _ type: String, _ help: String, _ value: String) {
            MetricsText.single(name, type, help, value, into: &text)
        }
        let states = ownership.snapshot()
        let owned = states.reduce(0) { if case .serving = $1 { return $0 + 1 } else { return $0 } }
        let moving = states.reduce(0) { count, state in
            switch state {
            case .acquiring, .releasing: return count + 1
            default: return count
            }
        }
        let counters = member.statistics
        single("counter_owned_slots", "gauge", "Slots this node serves.", "\(owned)")
        single("counter_moving_slots", "gauge", "Slots this node is taking over or handing off right now.", "\(moving)")
        single(
            "counter_fenced_writes_total", "counter",
            "Writes refused because this node no longer held the slot's epoch (by Redis, by PostgreSQL, or before sending).",
            "\(ownership.fencedWrites)")
        single("counter_takeovers_total", "counter", "Rounds that took slots over from a node whose lease ran out.", "\(counters.takeovers)")
        single("counter_taken_over_slots_total", "counter", "Slots taken over from nodes whose lease ran out.", "\(counters.takenOverSlots)")
        single(
            "counter_takeover_seconds_total", "counter", "Time from claiming slots to serving them (their logs drained), over all takeovers.",
            "\(counters.takeoverSecondsTotal)")
        single(
            "counter_last_takeover_seconds", "gauge", "Time from claiming slots to serving them, of the last takeover.",
            "\(counters.lastTakeoverSeconds)")
        single("counter_handed_off_slots_total", "counter", "Slots this node handed to other nodes.", "\(counters.handedOffSlots)")
        single("counter_adopted_slots_total", "counter", "Slots other nodes handed to this one.", "\(counters.adoptedSlots)")
        single(
            "counter_dropped_slots_total", "counter", "Slots this node stopped serving because PostgreSQL gave them to another owner or epoch.",
            "\(counters.droppedSlots)")
        single(
            "counter_membership_rounds_failed_total", "counter", "Membership rounds that failed (PostgreSQL or Redis unreachable).",
            "\(counters.failedRounds)")
        let lease = member.lease
        single(
            "counter_deciding", "gauge",
            "1 while this node's lease, as its own clock counts it, lets it decide for its slots; 0 once no renewal got through in time.",
            lease.isValid(at: .now) ? "1" : "0")
        let now = ContinuousClock.now
        single(
            "counter_postgres_unreachable_seconds", "gauge",
            "How long this node's lease renewals have failed (PostgreSQL failing over, restarting or cut off); 0 while they get through.",
            "\(lease.unreachableSince.map { (now - $0).inSeconds } ?? 0)")
        single(
            "counter_postgres_outages_total", "counter",
            "Times lease renewals began to fail and later got through again (PostgreSQL outages this node saw end).",
            "\(lease.outages)")
        single(
            "counter_postgres_outage_seconds_total", "counter", "Time from the first failed renewal to the next that got through, over all outages.",
            "\(lease.outageSecondsTotal)")
        single(
            "counter_slot_moves_held", "gauge",
            "1 while this node takes and hands over no slots: its renewals failed within the last lease, so other nodes' leases may have run out only because PostgreSQL was away for them too.",
            lease.mayMoveSlots(at: now) ? "0" : "1")
        text +=
            "# HELP counter_lease_renewal_seconds Round trip of each lease renewal (and the registration), from sending it to PostgreSQL's answer.\n"
        text += "# TYPE counter_lease_renewal_seconds histogram\n"
        MetricsText.histogramSamples(
            "counter_lease_renewal_seconds", labels: "", bounds: LeaseValidity.bucketBounds,
            buckets: Array(lease.buckets.prefix(LeaseValidity.bucketBounds.count)), count: lease.count,
            sum: lease.sumSeconds, into: &text)
        single("counter_forwarded_requests_total", "counter", "Requests sent on to the node that owns their slot.", "\(forwarder.forwarded)")
        single(
            "counter_misdirected_requests_total", "counter", "Forwarded requests answered 421 here (this node did not own the slot).",
            "\(forwarder.misdirected)")
    }
}
