import CounterCore
import Persistence
import RedisDriver
import Synchronization

/// The node's lease, kept apart from the rounds: its renewals in PostgreSQL (every
/// `renewInterval`, every 100 ms after one failed, withheld while no Redis master answers), what
/// they saw of PostgreSQL's outages (`LeaseValidity`), and the watch that tells the shards
/// whether the node may decide. All of it runs off the actor, so a renewal never waits behind a
/// round. `round()` reads the lease through `lease` (`LeaseValidity.mayMoveSlots`).
extension ClusterMember {
    /// Renews the lease every `renewInterval` until cancelled (`nil`) or another process took
    /// the node's id (`Superseded`). Off the actor: a renewal never waits behind a round's work
    /// on it (under load a round's map work kept renewals past a short lease, and a second
    /// process took the id of a live node).
    nonisolated func renewLease(incarnation: Int64) async -> Superseded? {
        do {
            try await renewLeaseUntilCancelled(incarnation: incarnation)
            return nil
        } catch let error as Superseded {
            return error
        } catch {
            return nil
        }
    }

    private nonisolated func renewLeaseUntilCancelled(incarnation: Int64) async throws {
        var lastRenewal = ContinuousClock.now
        var withholding = false
        var lastFailureLogged: ContinuousClock.Instant?
        while !Task.isCancelled {
            // Cut off from Redis (every master out of reach), the node cannot serve: it stops
            // renewing, so its lease runs out and a node that reaches Redis takes its slots.
            let reachable = await Self.reachesRedis(redisPing)
            if reachable == withholding {
                withholding = !reachable
                log.log(
                    reachable ? .info : .warn, reachable ? "lease_renewals_resumed" : "lease_withheld",
                    ["node": configuration.nodeID, "reason": reachable ? "Redis answers again" : "no Redis master answers"])
            }
            if withholding {
                try? await Task.sleep(for: configuration.renewInterval)
                continue
            }
            let asked = ContinuousClock.now
            do {
                let renewal = try await leaseRegistry.renewal(
                    nodeID: configuration.nodeID, incarnation: incarnation,
                    lease: configuration.lease)
                if renewal == .superseded { throw Superseded(nodeID: configuration.nodeID) }
                let now = ContinuousClock.now
                let outage = updateLease { lease -> Duration? in
                    let outage = lease.granted(sentAt: asked, answeredAt: now)
                    // Cut off for longer than the lease: another node may hold the slots now.
                    if renewal == .renewedAfterLapse { lease.lapsed(at: asked) }
                    return outage
                }
                if let outage {
                    lastFailureLogged = nil
                    log.log(
                        .info, "postgres_reachable",
                        [
                            "node": configuration.nodeID, "unreachable_ms": String(outage.inMilliseconds),
                            "lease_kept": String(renewal == .renewed),
                            "slots_move_after_ms": String(configuration.lease.inMilliseconds),
                        ])
                    // The flushers' backoff may have grown long meanwhile: the backlog goes now.
                    await service.retryFlushesNow()
                }
                if renewal == .renewedAfterLapse {
                    log.log(
                        .warn, "lease_renewed_after_lapse",
                        [
                            "node": configuration.nodeID,
                            "deciding": "after the next round",
                        ])
                    roundSoon()
                }
                if now - lastRenewal > configuration.lease / 2 {
                    log.log(
                        .warn, "lease_renewed_late",
                        [
                            "node": configuration.nodeID,
                            "ms_since_last": String((now - lastRenewal).inMilliseconds),
                            "renewal_ms": String((now - asked).inMilliseconds),
                        ])
                }
                lastRenewal = now
            } catch let error as Superseded {
                log.log(.error, "superseded", ["node": configuration.nodeID, "incarnation": String(incarnation)])
                throw error
            } catch {
                // PostgreSQL unreachable (failing over, restarting, cut off): nobody can take the
                // slots without it either, and Redis fencing covers the case where only this node
                // lost it. The renewal is tried again soon, not a whole interval later: the lease
                // must reach the new primary of a failover before it runs out.
                let first = updateLease { $0.failed(sentAt: asked) }
                let now = ContinuousClock.now
                if first {
                    lastFailureLogged = now
                    log.log(
                        .warn, "postgres_unreachable",
                        [
                            "node": configuration.nodeID, "error": "\(error)",
                            "deciding_for_ms": String(max(0, ((lease.validUntil ?? now) - now).inMilliseconds)),
                        ])
                } else if let logged = lastFailureLogged, now - logged >= .seconds(5) {
                    lastFailureLogged = now
                    log.log(
                        .warn, "lease_renewal_failed",
                        [
                            "node": configuration.nodeID, "error": "\(error)",
                            "unreachable_ms": String((now - (lease.unreachableSince ?? now)).inMilliseconds),
                        ])
                }
                try? await Task.sleep(for: min(configuration.renewInterval, Self.renewalRetryInterval))
                continue
            }
            try? await Task.sleep(for: configuration.renewInterval)
        }
    }

    /// How soon a failed renewal is tried again.
    static let renewalRetryInterval: Duration = .milliseconds(100)

    /// Whether some Redis master answers a `PING` (within the client's own timeout: a quarter of
    /// the lease).
    private static func reachesRedis(_ redis: RedisClient) async -> Bool {
        let masters = redis.masters
        guard !masters.isEmpty else { return true }
        return await withTaskGroup(of: Bool.self) { group in
            for master in masters {
                group.addTask { (try? await redis.pipeline([.ping()], toMaster: master)) != nil }
            }
            for await reached in group where reached { return true }
            return false
        }
    }

    /// Until cancelled: when the lease's time as this node counts it runs out (no
    /// renewal got through: PostgreSQL cut off, or too slow), the node stops deciding — its
    /// shards refuse operations on its slots — well before another node may take them; when a
    /// renewal gets through again, it decides again (a slot another node took meanwhile is
    /// fenced, and dropped by the next round). It sleeps until the lease runs out by this node's
    /// clock, or until a renewal or a round changes what the lease says (`leaseChanged`).
    nonisolated func watchLease() async {
        // Unknown at first: the shards are told the lease's state at once (a second watch, on
        // the way out, must not assume what the first last told them).
        var deciding: Bool?
        while !Task.isCancelled {
            let (valid, validUntil) = leaseValidity.withLock { ($0.isValid(at: .now), $0.validUntil) }
            if valid != deciding {
                if deciding == nil {
                    deciding = valid
                    await service.setDeciding(valid)
                    continue
                }
                deciding = valid
                log.log(
                    valid ? .info : .warn, valid ? "lease_regained" : "lease_lapsed",
                    ["node": configuration.nodeID, "deciding": String(valid)])
                await service.setDeciding(valid)
            }
            await leaseChanged.sleep(until: valid ? validUntil : nil)
        }
    }

    /// Changes the lease's validity and wakes the watch.
    @discardableResult
    nonisolated func updateLease<T>(_ change: (inout LeaseValidity) -> T) -> T {
        let result = leaseValidity.withLock { change(&$0) }
        leaseChanged.ring()
        return result
    }
}
