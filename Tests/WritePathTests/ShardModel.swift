import Foundation
import Persistence
import RedisDriver
import ShardRouter
@testable import WritePath

/// Redis and PostgreSQL as a shard's flushes see them, in memory: each slot's log and epoch key,
/// the dead letters; the `likes` rows, each log's recorded progress, the slot table's epochs, and
/// an audit of every entry a commit applied. `perform` answers a shard's actions as the real
/// servers would (fences and the flush transaction's epoch check included), so a test can drive
/// `ShardStateMachine` step by step and meddle between any two steps.
final class ShardModel {
    struct Entry {
        let id: StreamEntryID
        let changes: [LikeChange]
    }

    let layout: RedisKeyLayout
    /// Redis: each slot's log, oldest first; each slot's epoch key.
    var logs: [UInt16: [Entry]] = [:]
    var epochKeys: [UInt16: Int64] = [:]
    var deadLetters: [DeadLetter] = []
    /// PostgreSQL: the slot table's epochs, the likes rows, each log's progress, and how many
    /// times each entry was applied.
    var slotEpochs: [UInt16: Int64] = [:]
    var likes: Set<LikePair> = []
    var progress: [UInt16: StreamEntryID] = [:]
    var applied: [StreamEntryID: Int] = [:]
    /// Every entry ever appended, and those trimmed from a log.
    var appended: [StreamEntryID] = []
    var trimmed: Set<StreamEntryID> = []
    private var nextMilliseconds: UInt64 = 1_000

    init(layout: RedisKeyLayout) {
        self.layout = layout
    }

    /// Appends one entry of `changes` to `slot`'s log, as a batch would.
    @discardableResult
    func append(_ changes: [LikeChange], slot: UInt16) -> StreamEntryID {
        nextMilliseconds += 1
        let id = StreamEntryID(milliseconds: nextMilliseconds, sequence: 0)
        logs[slot, default: []].append(Entry(id: id, changes: changes))
        appended.append(id)
        return id
    }

    /// Another node takes `slot`: PostgreSQL and Redis give it a later epoch.
    func takeOver(_ slot: UInt16, epoch: Int64) {
        slotEpochs[slot] = epoch
        epochKeys[slot] = max(epochKeys[slot] ?? 0, epoch)
    }

    /// The next owner (or the next start) applies what the logs still hold past the recorded
    /// progress, as a drain does.
    func drainEverything() {
        for (slot, entries) in logs {
            for entry in entries where progress[slot].map({ entry.id > $0 }) ?? true {
                apply(entry)
                progress[slot] = entry.id
            }
            logs[slot] = []
        }
    }

    private func apply(_ entry: Entry) {
        applied[entry.id, default: 0] += 1
        for change in entry.changes {
            let pair = LikePair(change)
            if change.liked { likes.insert(pair) } else { likes.remove(pair) }
        }
    }

    private func streamEntry(_ entry: Entry) -> StreamEntry {
        let packed = ChangeLogEntry.pack(entry.changes)
        return StreamEntry(id: entry.id, fields: [ChangeLogEntry.packedField: packed])
    }

    /// A log's `entries` read as the flusher reads them: in slices sized by `LogRead`, up to
    /// `changesPerSlot` changes.
    static func read(_ entries: [StreamEntry], changesPerSlot: Int) -> LogRead {
        var read = LogRead()
        var rest = entries[...]
        while !rest.isEmpty {
            let asked = read.nextSliceSize(changesPerSlot: changesPerSlot)
            let slice = Array(rest.prefix(asked))
            rest = rest.dropFirst(slice.count)
            if !read.take(slice, asked: asked, changesPerSlot: changesPerSlot) { break }
        }
        return read
    }

    /// The event `action` brings back, or `nil` for an action that brings none.
    func perform(_ action: ShardStateMachine.Action) -> ShardStateMachine.Event? {
        switch action {
        case .answer(let answers):
            for (operation, result) in answers { operation.answer(result) }
            return nil
        case .answerBatch(let operations, let answers):
            for answer in answers { operations[answer.request].answer(answer.result) }
            return nil
        case .reply(let delivery):
            delivery.run()
            return nil
        case .log:
            return nil
        case .readFlushProgress(let slots):
            var found: [UInt16: StreamEntryID] = [:]
            for slot in slots { found[slot] = progress[slot] }
            return .flushProgressRead(.success(found))
        case .listSlotPosts(let slots):
            return .slotPostsListed(Dictionary(uniqueKeysWithValues: slots.map { ($0, .success([])) }))
        case .awaitReplication:
            return .replicationAwaited(ReplicationOutcome(confirmed: true, detail: "model"))
        case .raiseEpochKeys(let epochs, let forClaim, let then):
            var results: [UInt16: Result<Int64, RedisError>] = [:]
            for (slot, epoch) in epochs {
                epochKeys[slot] = max(epochKeys[slot] ?? 0, epoch)
                results[slot] = .success(epochKeys[slot]!)
            }
            then?.run()
            return forClaim ? .epochKeysRaised(results) : nil
        case .rescanLogs(let slots, let listing):
            var summaries: [UInt16: Result<ShardStateMachine.LogSummary, Error>] = [:]
            for slot in slots {
                let entries = logs[slot] ?? []
                summaries[slot] = .success(.init(changes: entries.count * max(1, entries.last?.changes.count ?? 1), newest: entries.last?.id,
                                                 entries: listing.contains(slot) ? entries.map(\.id) : nil))
            }
            return .logsRescanned(summaries)
        case .readLogs(let slots, let changesPerSlot):
            var reads: [UInt16: LogRead] = [:]
            for slot in slots { reads[slot] = Self.read((logs[slot] ?? []).map(streamEntry), changesPerSlot: changesPerSlot) }
            return .logsRead(reads, failure: nil)
        case .addDeadLetters(let letters, _):
            deadLetters += letters
            return .deadLettersAdded(.success(()))
        case .applyFlush(let transaction):
            let stale = transaction.epochs.filter { slotEpochs[$0.key] != $0.value }.keys.sorted()
            if !stale.isEmpty { return .flushTransactionEnded(.staleSlots(stale)) }
            // Entries past each log's progress are applied, whole; progress moves to the newest.
            var byEntry: [StreamEntryID: (slot: UInt16, changes: [LikeChange])] = [:]
            for change in transaction.entries { byEntry[change.entryID, default: (change.slot, [])].changes.append(change.change) }
            for (id, entry) in byEntry.sorted(by: { $0.key < $1.key }) where progress[entry.slot].map({ id > $0 }) ?? true {
                apply(Entry(id: id, changes: entry.changes))
                progress[entry.slot] = max(progress[entry.slot] ?? id, id)
            }
            return .flushTransactionEnded(.committed(at: Date()))
        case .trimLogs(let newest, let epochs):
            var removed: [UInt16: Result<Int, RedisError>] = [:]
            var fenced: [ShardStateMachine.FencedSlot] = []
            for (slot, last) in newest {
                if let epoch = epochs?[slot], epochKeys[slot] != epoch {
                    fenced.append(.init(slot: slot, epoch: epoch))
                    removed[slot] = .failure(RedisError(code: .fenced, message: "FENCED"))
                    continue
                }
                let before = logs[slot] ?? []
                let kept = before.filter { $0.id > last }
                for entry in before where entry.id <= last { trimmed.insert(entry.id) }
                logs[slot] = kept
                removed[slot] = .success(before.count - kept.count)
            }
            return .logsTrimmed(removed, fenced: fenced)
        case .readLogLengths(let question):
            var lengths: [UInt16: Int] = [:]
            for slot in question.appendedWhenAsked.keys { lengths[slot] = logs[slot]?.count ?? 0 }
            return .logLengthsRead(question, lengths)
        case .unloadPosts(_, _, let purpose):
            return .postsUnloaded(purpose, failed: [], fenced: [])
        case .batchRedis, .findPosts, .loadLargePost, .publishLargePost, .discardLargePost:
            fatalError("the flush model has no batches: \(action)")
        }
    }
}

