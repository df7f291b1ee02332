import CounterCore
import Foundation
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter

/// The I/O a shard's actions name, against Redis and PostgreSQL: each call performs one action
/// and returns the event that brings its result back (`nil` for actions that bring none). It
/// decides nothing and keeps no state: what to do with a result is `ShardStateMachine`'s.
struct ShardIO: Sendable {
    let index: Int
    /// The batches' reads and writes, and writes between batches (resets, epoch keys).
    let batchRedis: RedisClient
    /// The flusher's reads, trims and dead letters, so a batch never waits behind a log read.
    let flushRedis: RedisClient
    /// Large posts' pages and publications, so the batches' connection never waits behind a page.
    let hydrationRedis: RedisClient
    let pool: PostgresPool
    let layout: RedisKeyLayout
    let configuration: WritePathConfiguration
    /// Where refused writes are counted (a metric).
    let ownership: OwnedSlots
    /// Where each commit's lag (acknowledgement → commit, per change) is recorded.
    let lag: WriteBehindLag
    /// Rung after every flush transaction that commits (the change events' long polls listen).
    let commits: LoopAlarm
    let log: NodeLog

    typealias Event = ShardStateMachine.Event

    /// Performs `action`; its result, as the event the machine takes.
    func perform(_ action: ShardStateMachine.Action) async -> Event? {
        switch action {
        case .answer, .answerBatch, .reply, .log, .setTimer, .cancelTimer:
            return nil
        case .batchRedis(let groups, let epochs):
            let (results, fenced, openings) = await SlotWriter.execute(
                groups, epochs: epochs, redis: batchRedis, layout: layout, counting: ownership)
            return .batchRedisReplied(results, fenced: fenced, openings: openings)
        case .awaitReplication(let slots, let replicas, let timeout, let writtenOn):
            return .replicationAwaited(
                await ReplicaWait.wait(on: slots, replicas: replicas, timeout: timeout, writtenOn: writtenOn, redis: batchRedis))
        case .findPosts(let lookup, let take):
            return .batchPostsFound(take: take, await findPosts(lookup))
        case .loadWarmPost(let post):
            let promotion = WarmPostPromotion(
                post: post, pool: pool, redis: hydrationRedis, layout: layout,
                pageSize: configuration.hydrationPageSize, reactions: !configuration.reactions.isLikesOnly)
            do {
                return .warmPostLoaded(promotion, .success(try await promotion.load()))
            } catch {
                return .warmPostLoaded(promotion, .failure(error))
            }
        case .publishPromotion(let promotion, let loaded, let epoch):
            do {
                try await promotion.publish(loaded: loaded, epoch: epoch)
                return .promotionPublished(post: promotion.post, .success(()))
            } catch {
                return .promotionPublished(post: promotion.post, .failure(error))
            }
        case .discardPromotion(let promotion):
            await promotion.discard()
            return nil
        case .raiseEpochKeys(let epochs, let forClaim, let then):
            let ordered = epochs.sorted { $0.key < $1.key }
            let raised = await SlotEpochKeys.raise(ordered.map { (HashSlot(rawValue: $0.key)!, $0.value) }, layout: layout, redis: batchRedis)
            then?.run()
            guard forClaim else { return nil }
            var results: [UInt16: Result<Int64, RedisError>] = [:]
            for ((slot, _), result) in zip(ordered, raised) { results[slot] = result }
            return .epochKeysRaised(results)
        case .rescanLogs(let slots, let listing):
            var summaries = await rescan(slots)
            let listed = listing.sorted().filter { if case .success = summaries[$0] { return true } else { return false } }
            for (slot, ids) in await entryIDs(of: listed) {
                summaries[slot] = summaries[slot]!.flatMap { summary in
                    ids.map {
                        var listed = summary
                        listed.entries = $0
                        return listed
                    }.mapError { $0 as Error }
                }
            }
            return .logsRescanned(summaries)
        case .readFlushProgress(let slots):
            return .flushProgressRead(await flushProgress(of: slots))
        case .listSlotPosts(let slots):
            return .slotPostsListed(await posts(inSlots: slots))
        case .readLogs(let slots, let changesPerSlot):
            let (reads, failure) = await readLogs(slots, changesPerSlot: changesPerSlot)
            return .logsRead(reads, failure: failure)
        case .addDeadLetters(let letters, let reason):
            return .deadLettersAdded(await addDeadLetters(letters, reason: reason))
        case .applyFlush(let transaction):
            return .flushTransactionEnded(await apply(transaction))
        case .trimLogs(let newest, let epochs):
            let ordered = newest.sorted { $0.key < $1.key }
            let groups = ordered.map { slot, newest in
                SlotCommands(slot: HashSlot(rawValue: slot)!, commands: [.xtrim(logKey(slot), olderThan: newest.successor)])
            }
            let (results, fenced, _) = await SlotWriter.execute(groups, epochs: epochs, redis: flushRedis, layout: layout, counting: ownership)
            var removed: [UInt16: Result<Int, RedisError>] = [:]
            for ((slot, _), result) in zip(ordered, results) {
                removed[slot] = result.map { Int($0.first?.integer ?? 0) }
            }
            return .logsTrimmed(removed, fenced: fenced)
        case .readLogLengths(let question):
            return .logLengthsRead(question, await logLengths(Array(question.appendedWhenAsked.keys)))
        case .probePosts(let probe, let pending):
            return .postsProbed(
                await probe.read(keys: PostKeys(redis: batchRedis, layout: layout), records: PostRecords(pool: pool), pending: pending))
        case .unloadPosts(let posts, let epochs, let purpose):
            let (results, fenced, _) = await SlotWriter.execute(
                PostHydration.transactions(unloading: posts, layout: layout), epochs: epochs,
                redis: batchRedis, layout: layout, counting: ownership)
            return .postsUnloaded(purpose, failed: Set(PostHydration.failures(of: posts, results).keys), fenced: fenced)
        }
    }

    private func logKey(_ slot: UInt16) -> String {
        layout.changeLog(of: HashSlot(rawValue: slot)!)
    }

    // MARK: - A batch's PostgreSQL

    private func findPosts(_ lookup: ColdLookup) async -> Result<ColdLookup.Found, Error> {
        do {
            return .success(try ColdLookup.found(in: try await pool.query(lookup.query, lookup.parameters)))
        } catch {
            return .failure(error)
        }
    }

    // MARK: - The flusher's Redis

    /// Reads the length of every slot's log, 4,096 slots per call (one pipeline per Redis
    /// node), then the newest entry of the logs that are not empty, to estimate the changes they
    /// hold (entries of a log hold one change each when its slot is quiet, up to 1,000 when busy).
    private func rescan(_ slots: [UInt16]) async -> [UInt16: Result<ShardStateMachine.LogSummary, Error>] {
        var summaries: [UInt16: Result<ShardStateMachine.LogSummary, Error>] = [:]
        summaries.reserveCapacity(slots.count)
        for start in stride(from: 0, to: slots.count, by: 4_096) {
            let part = Array(slots[start..<min(start + 4_096, slots.count)])
            var nonEmpty: [(slot: UInt16, length: Int)] = []
            for (slot, length) in zip(part, await lengths(part)) {
                switch length {
                case .success(0): summaries[slot] = .success(.init(changes: 0, newest: nil))
                case .success(let length): nonEmpty.append((slot, length))
                case .failure(let error): summaries[slot] = .failure(error)
                }
            }
            guard !nonEmpty.isEmpty else { continue }
            let newest = await flushRedis.execute(
                nonEmpty.map { slot, _ in
                    SlotCommands(slot: HashSlot(rawValue: slot)!, commands: [.xrevrange(logKey(slot), count: 1)])
                })
            for ((slot, length), result) in zip(nonEmpty, newest) {
                summaries[slot] = Result {
                    let entry = try result.get()[0].streamEntries().first
                    let perEntry = entry.flatMap { ChangeLogEntry.changes(from: $0)?.count } ?? 1
                    return ShardStateMachine.LogSummary(changes: length * max(1, perEntry), newest: entry?.id)
                }
            }
        }
        return summaries
    }

    /// PostgreSQL's recorded progress of the logs of `slots` (those without one left out).
    private func flushProgress(of slots: [UInt16]) async -> Result<[UInt16: StreamEntryID], Error> {
        do {
            var slotOf: [String: UInt16] = [:]
            for slot in slots { slotOf[logKey(slot)] = slot }
            let rows = try await pool.query(
                "SELECT log, last_entry_ms, last_entry_seq FROM counter_flush_progress WHERE log = ANY($1::text[])",
                [.textArray(Array(slotOf.keys))])
            var progress: [UInt16: StreamEntryID] = [:]
            for row in rows {
                guard let log = row.string(0), let slot = slotOf[log] else { continue }
                progress[slot] = StreamEntryID(milliseconds: UInt64(try row.int64(1)), sequence: UInt64(try row.int64(2)))
            }
            return .success(progress)
        } catch {
            return .failure(error)
        }
    }

    /// Every entry id the logs of `slots` hold (slots being repaired after a failover): a page
    /// of 10,000 of every log in one pipeline, then the next pages of the logs that have more.
    private func entryIDs(of slots: [UInt16]) async -> [UInt16: Result<[StreamEntryID], RedisError>] {
        var ids: [UInt16: Result<[StreamEntryID], RedisError>] = [:]
        var reading = slots.map { (slot: $0, start: "-") }
        while !reading.isEmpty {
            let pages = await flushRedis.execute(
                reading.map { slot, start in
                    SlotCommands(slot: HashSlot(rawValue: slot)!, commands: [.xrange(logKey(slot), start: start, count: 10_000)])
                })
            var more: [(slot: UInt16, start: String)] = []
            for ((slot, _), result) in zip(reading, pages) {
                let page: [StreamEntry]
                do throws(RedisError) {
                    page = try result.get()[0].streamEntries()
                } catch {
                    ids[slot] = .failure(error)
                    continue
                }
                ids[slot] = .success(((try? ids[slot]?.get()) ?? []) + page.map(\.id))
                if page.count == 10_000, let last = page.last { more.append((slot, last.id.successor.description)) }
            }
            reading = more
        }
        return ids
    }

    /// The posts Redis holds of each of `slots` (hot or warm: their markers), by
    /// `CLUSTER GETKEYSINSLOT` on their masters — a Redis Cluster's, where failovers happen.
    private func posts(inSlots slots: [UInt16]) async -> [UInt16: Result<[Int64], RedisError>] {
        let results = await flushRedis.execute(
            slots.map { slot in
                SlotCommands(slot: HashSlot(rawValue: slot)!, commands: [RedisCommand("CLUSTER", "GETKEYSINSLOT", Int64(slot), Int64(1_000_000))])
            })
        var posts: [UInt16: Result<[Int64], RedisError>] = [:]
        for (slot, result) in zip(slots, results) {
            posts[slot] = result.flatMap { replies in
                do throws(RedisError) {
                    let keys = (try replies[0].throwingServerError().array ?? []).compactMap(\.string)
                    return .success(keys.compactMap { HotSetPlan.post(ofMarker: $0, layout: self.layout) }.sorted())
                } catch {
                    return .failure(error)
                }
            }
        }
        return posts
    }

    /// Each slot's log length, one `XLEN` per slot in one pipeline (per Redis node).
    private func lengths(_ slots: [UInt16]) async -> [Result<Int, Error>] {
        let results = await flushRedis.execute(
            slots.map { slot in
                SlotCommands(slot: HashSlot(rawValue: slot)!, commands: [.xlen(logKey(slot))])
            })
        return results.map { result in
            Result { Int(try result.get()[0].throwingServerError().integer ?? 0) }
        }
    }

    private func logLengths(_ slots: [UInt16]) async -> [UInt16: Int] {
        var lengths: [UInt16: Int] = [:]
        for (slot, result) in zip(slots, await self.lengths(slots)) {
            if case .success(let length) = result { lengths[slot] = length }
        }
        return lengths
    }

    /// The oldest whole entries of each slot's log, up to the first that brings them to
    /// `changesPerSlot` changes (so a slot gives at most that many plus one entry's, up to
    /// `ChangeLogEntry.maximumChangesPerEntry`) or to the log's end, read in slices of at most
    /// `LogRead.slice` entries sized by the changes per entry seen so far, one round trip (per
    /// Redis node) per slice round. A slot whose node failed is absent, and the first such
    /// failure is returned.
    private func readLogs(_ slots: [UInt16], changesPerSlot: Int) async -> (reads: [UInt16: LogRead], failure: Error?) {
        var reads: [UInt16: LogRead] = [:]
        for slot in slots { reads[slot] = LogRead() }
        var failure: Error?
        var open = slots
        while !open.isEmpty {
            let asked = open.map { reads[$0]!.nextSliceSize(changesPerSlot: changesPerSlot) }
            let groups = zip(open, asked).map { slot, count -> SlotCommands in
                let start = reads[slot]!.entries.last.map { "(" + $0.id.description } ?? "-"
                return SlotCommands(slot: HashSlot(rawValue: slot)!, commands: [.xrange(logKey(slot), start: start, count: count)])
            }
            var stillOpen: [UInt16] = []
            for ((slot, count), result) in zip(zip(open, asked), await flushRedis.execute(groups)) {
                do {
                    let slice = try result.get()[0].streamEntries()
                    if reads[slot]!.take(slice, asked: count, changesPerSlot: changesPerSlot) { stillOpen.append(slot) }
                } catch {
                    reads[slot] = nil
                    failure = failure ?? error
                }
            }
            open = stillOpen
        }
        return (reads, failure)
    }

    private func addDeadLetters(_ letters: [DeadLetter], reason: String) async -> Result<Void, Error> {
        guard !letters.isEmpty else { return .success(()) }
        let at = String(Int64(Date().timeIntervalSince1970 * 1000))
        let commands = letters.map { RedisCommand.xadd(layout.deadLetters, fields: $0.fields(log: logKey($0.slot), reason: reason, at: at)) }
        do {
            for reply in try await flushRedis.pipeline(commands, slot: layout.deadLettersSlot) { _ = try reply.throwingServerError() }
        } catch {
            return .failure(error)
        }
        let states = Set(letters.compactMap { $0.refusal?.sqlState }).sorted().joined(separator: ",")
        if states.isEmpty {
            log.log(
                .warn, "dead_lettered",
                [
                    "shard": String(index), "changes": String(letters.count), "reason": reason,
                    "stream": layout.deadLetters,
                ])
        } else {
            log.log(
                .warn, "dead_lettered",
                [
                    "shard": String(index), "changes": String(letters.count), "reason": reason,
                    "sqlstate": states, "stream": layout.deadLetters,
                ])
        }
        return .success(())
    }

    // MARK: - The flush transaction

    /// One try of the flush transaction: it first checks that PostgreSQL still gives each slot
    /// the epoch held (for a node of a cluster), applies the entries with their logs' progress
    /// (`LikeBatchApplier`), and commits — or rolls back, saying why: stale slots, posts newly
    /// found missing, changes refused. The commit's lag is recorded here.
    private func apply(_ transaction: FlushTransaction) async -> FlushTransaction.Outcome {
        let deployment = layout.prefix
        let audit = configuration.flushAudit
        let events = configuration.events
        let oneKindPerUser = configuration.reactions.isOnePerUser
        do {
            let decision = try await pool.withTransaction(deciding: { connection -> TransactionDecision<FlushTransaction.Outcome> in
                let stale = try SlotTable.staleSlots(transaction.epochs, deployment: deployment, on: connection)
                if !stale.isEmpty { return .rollBack(.staleSlots(stale)) }
                let outcome = try LikeBatchApplier.apply(
                    transaction.entries, on: connection, audit: audit,
                    skipping: transaction.skipping, isolatingRefusals: true, events: events, oneKindPerUser: oneKindPerUser)
                let newlyMissing = Set(outcome.missingPosts.keys).subtracting(transaction.knownMissing)
                if !newlyMissing.isEmpty { return .rollBack(.missingPosts(newlyMissing)) }
                if !outcome.rejected.isEmpty { return .rollBack(.refused(outcome.rejected)) }
                return .commit(.committed(at: .distantPast))
            })
            switch decision {
            case .commit(.committed):
                let committedAt = Date()
                commits.ring()
                recordLag(of: transaction.entries, committedAt: committedAt)
                return .committed(at: committedAt)
            case .rollBack(.staleSlots(let stale)):
                ownership.noteFenced(stale.count)
                return .staleSlots(stale)
            default:
                return decision.value
            }
        } catch {
            return .failed(error)
        }
    }

    /// Records how long `entries` (applied by a commit at `committedAt`) waited since their
    /// entries were written, one observation per entry weighted by its changes.
    private func recordLag(of entries: [LoggedLikeChange], committedAt: Date) {
        var index = 0
        while index < entries.count {
            let entry = entries[index]
            var end = index + 1
            while end < entries.count && entries[end].entryID == entry.entryID && entries[end].log == entry.log { end += 1 }
            lag.record(changes: end - index, writtenAtMilliseconds: entry.entryID.milliseconds, committedAt: committedAt)
            index = end
        }
    }
}
