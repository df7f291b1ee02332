import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// What goes into a shard's machine and what comes out: its events (a caller's request, an
/// action's result, time passing) and its actions (what `Shard` performs), with their payloads.
extension ShardStateMachine {
    /// What happens to the shard: a caller's request, a result of an action, or time passing.
    enum Event: Sendable {
        /// Operations to decide.
        case operations([ShardOperation])
        /// Answer once every operation queued so far has been decided and written (or failed).
        case queuedOperationsDone(ShardReply<Void>)
        /// Answer once everything appended so far is in PostgreSQL.
        case flushAll(ShardReply<Result<Void, Error>>)
        /// Make everything appended so far due for flushing now, without waiting for it.
        case requestFlushAll
        /// Read every log of the shard's slots (a sole writer's start after a crash); answer once read.
        case recover(ShardReply<Result<Void, Error>>)
        /// Slots won under these epochs: serve them once their logs are drained. Answers the
        /// slots now served.
        case claim([UInt16: Int64], ShardReply<Result<Set<UInt16>, Error>>)
        /// Served slots to hand off: hold new operations, let the batch in flight end, flush.
        case release(Set<UInt16>, ShardReply<Result<Void, Error>>)
        /// Serve again slots whose hand-off failed.
        case resume(Set<UInt16>)
        /// The hand-off changed the owners in PostgreSQL to these epochs: raise the epoch keys
        /// and stop deciding; also stop for `alsoDropping`.
        case handedOff([UInt16: Int64], alsoDropping: Set<UInt16>, ShardReply<Void>)
        /// Stop deciding for these slots (another node owns them).
        case drop(Set<UInt16>, ShardReply<Void>)
        /// Reset these posts' Redis keys so the next touch loads them from PostgreSQL (unless
        /// their slot has changes waiting); answers the posts reset.
        case resync([Int64], ShardReply<Set<Int64>>)
        /// Forget that these posts were found missing.
        case recheckExistence([Int64])
        /// Look at posts for an operator (`PostProbe`), between two batches; answers what was read.
        case probe(PostProbe, ShardReply<Result<PostProbeResult, Error>>)
        /// These slots' logs may hold entries nobody noted (a write's outcome is unknown): read
        /// them again before the next flush.
        case logsUncertain(Set<UInt16>)
        /// The slots with changes waiting, and how many each.
        case pendingBySlot(ShardReply<[UInt16: Int]>)
        /// The changes acknowledged that PostgreSQL may not have yet, of a post or of a user.
        case pendingLikes(PendingQuestion, ShardReply<PendingAnswer>)
        /// The shard's statistics now.
        case statistics(ShardReply<ShardStats>)
        /// Refuse new operations, answer those queued, then flush everything (`drain`) or only
        /// what is under way, and finish.
        case stop(drain: Bool)
        /// A timer's deadline came (`setTimer`); the shell forgot the timer as it fired.
        case timerFired(Timer)

        /// Results of the batch's Redis groups (`.batchRedis`), one per group, and the slots
        /// Redis fenced.
        /// `openings`: which opening of each master's connection carried them.
        case batchRedisReplied([Result<[RedisReply], RedisError>], fenced: [FencedSlot], openings: RedisOpenings = RedisOpenings())
        /// `.awaitReplication` ended: whether every master's replicas confirmed the writes
        /// (and, if not, why).
        case replicationAwaited(ReplicationOutcome)
        /// Whether the node may decide (its cluster lease is known to hold).
        case deciding(Bool)
        /// The Redis master of `slots` failed over (`+Repair`).
        case redisFailedOver([UInt16])
        /// PostgreSQL answers again after an outage (a failover's new primary, a restart): the
        /// flushes need not wait out the backoff their failures built up.
        case postgresReachable
        /// `.readFlushProgress`: PostgreSQL's recorded progress of those logs (slots without one
        /// left out).
        case flushProgressRead(Result<[UInt16: StreamEntryID], Error>)
        /// `.listSlotPosts`: the posts Redis holds of each slot.
        case slotPostsListed([UInt16: Result<[Int64], RedisError>])
        /// `.findPosts`: which cold posts exist, their counts, the memberships asked.
        case batchPostsFound(take: UInt64, Result<ColdLookup.Found, Error>)
        /// `.loadWarmPost` ended: how many likers were loaded into the promotion's loading set.
        case warmPostLoaded(WarmPostPromotion, Result<Int, Error>)
        /// `.publishPromotion` ended.
        case promotionPublished(post: Int64, Result<Void, Error>)
        /// `.raiseEpochKeys` for a claim: what each key holds now.
        case epochKeysRaised([UInt16: Result<Int64, RedisError>])
        /// `.rescanLogs`: each slot's log as read now.
        case logsRescanned([UInt16: Result<LogSummary, Error>])
        /// `.readLogs`: what each slot's log gave (absent: its node failed), and the first failure.
        case logsRead([UInt16: LogRead], failure: Error?)
        /// `.addDeadLetters` ended.
        case deadLettersAdded(Result<Void, Error>)
        /// `.applyFlush`: how the transaction ended.
        case flushTransactionEnded(FlushTransaction.Outcome)
        /// `.trimLogs`: entries removed per slot, and the slots Redis fenced.
        case logsTrimmed([UInt16: Result<Int, RedisError>], fenced: [FencedSlot])
        /// `.readLogLengths`: each slot's log length (absent: it could not be read).
        case logLengthsRead(LogLengthQuestion, [UInt16: Int])
        /// `.probePosts` ended.
        case postsProbed(Result<PostProbeResult, Error>)
        /// `.unloadPosts` ended: the posts whose keys could not be deleted, and the slots fenced.
        case postsUnloaded(UnloadPurpose, failed: Set<Int64>, fenced: [FencedSlot])
        /// A sweep's walk of Redis's hydration markers begins: posts evicted from now on until
        /// `.discoveryEnded` may still be in what the walk read before their deletion, and are
        /// not taken from it.
        case discoveryBegan
        /// A sweep found these posts hot in Redis (from before this process, or unknown to it).
        case discovered([Int64])
        /// The walk that `.discoveryBegan` announced is over (whole or not).
        case discoveryEnded
        /// A complete read of the dead-letter stream, begun at that instant, found refused
        /// changes of these posts of this shard (`DeadLetterPins`).
        case deadLettersRead(Set<Int64>, startedAt: ContinuousClock.Instant)
        /// Redis is above its memory target where these slots live (`nil`: everywhere): evict
        /// up to `count` of the least recently touched posts of them, idle or not.
        case shrink(slots: Set<UInt16>?, count: Int)
    }

    /// What the shard's shell does. Each I/O action names the event that brings its result; the
    /// answers, replies, log lines and timers bring none.
    enum Action: Sendable {
        /// Answer these operations.
        case answer([(ShardOperation, Result<LikeState, CounterError>)])
        /// Answer a batch's operations (by the answers' request indexes), without pairing them
        /// up first: the hot path's answers.
        case answerBatch([ShardOperation], [BatchStateMachine.Answer])
        /// Deliver a reply to a caller.
        case reply(ShardDelivery)
        /// Write a log line.
        case log(ShardLogLine)
        /// Deliver `timerFired(timer)` at `at`, replacing the timer's previous deadline.
        case setTimer(Timer, at: ContinuousClock.Instant)
        /// Forget the timer.
        case cancelTimer(Timer)

        /// Send a batch's groups, fenced by `epochs` (`nil`: unfenced) → `batchRedisReplied`.
        case batchRedis([SlotCommands], epochs: [UInt16: Int64]?)
        /// With `--ack replicated`: `WAIT` for `replicas` on the masters of `slots` (the batch's
        /// writes, on the same connections), at most `timeout` → `replicationAwaited`.
        case awaitReplication(slots: [UInt16], replicas: Int, timeout: Duration, writtenOn: RedisOpenings)
        /// Read PostgreSQL's recorded flush progress of these slots' logs → `flushProgressRead`.
        case readFlushProgress([UInt16])
        /// List the posts Redis holds of a slot being repaired (their markers, by
        /// `CLUSTER GETKEYSINSLOT`), all in one pipeline → `slotPostsListed`.
        case listSlotPosts([UInt16])
        /// Run the `ColdLookup` of the batch of `take` → `batchPostsFound` (a child task: the
        /// loop goes on meanwhile, so a batch whose PostgreSQL does not answer can be given up).
        case findPosts(ColdLookup, take: UInt64)
        /// Load a warm post page by page into a loading set of its own → `warmPostLoaded`.
        case loadWarmPost(Int64)
        /// Publish a loaded promotion under `epoch` → `promotionPublished`.
        case publishPromotion(WarmPostPromotion, loaded: Int, epoch: Int64?)
        /// Delete a loading set nobody will publish (no event).
        case discardPromotion(WarmPostPromotion)
        /// Raise epoch keys; for a claim → `epochKeysRaised` (a hand-off's raise brings no event:
        /// `then` is delivered once it is done).
        case raiseEpochKeys([UInt16: Int64], forClaim: Bool, then: ShardDelivery?)
        /// Read each log's length and newest entry → `logsRescanned`.
        case rescanLogs([UInt16], listing: Set<UInt16>)
        /// Read whole entries from each log up to `changesPerSlot` changes → `logsRead`.
        case readLogs([UInt16], changesPerSlot: Int)
        /// Add dead letters → `deadLettersAdded`.
        case addDeadLetters([DeadLetter], reason: String)
        /// Run the flush transaction → `flushTransactionEnded`.
        case applyFlush(FlushTransaction)
        /// Trim each log up to its entry, fenced by `epochs` (`nil`: unfenced) → `logsTrimmed`.
        case trimLogs([UInt16: StreamEntryID], epochs: [UInt16: Int64]?)
        /// Read the logs' lengths → `logLengthsRead`.
        case readLogLengths(LogLengthQuestion)
        /// Read what an operator's probe asks, `pendingSlots` being the slots with changes waiting
        /// as it began → `postsProbed`.
        case probePosts(PostProbe, pendingSlots: Set<UInt16>)
        /// Delete posts' hydration markers and likers sets, fenced by `epochs` → `postsUnloaded`.
        case unloadPosts([Int64], epochs: [UInt16: Int64]?, UnloadPurpose)
    }

    /// A slot whose write Redis refused: the epoch the write carried is no longer the slot's.
    struct FencedSlot: Sendable, Hashable {
        let slot: UInt16
        let epoch: Int64
    }

    /// A log as a rescan read it: about how many changes it holds, and its newest entry.
    struct LogSummary: Sendable, Equatable {
        let changes: Int
        let newest: StreamEntryID?
        /// Every entry id the log holds, for a slot being repaired (listed on request).
        var entries: [StreamEntryID]?
    }

    /// A resync's question of log lengths: what was noted as appended when it was asked.
    struct LogLengthQuestion: Sendable {
        /// Per slot, the newest entry noted as appended when asked.
        let appendedWhenAsked: [UInt16: StreamEntryID?]
    }

    /// Why posts' Redis keys are deleted.
    enum UnloadPurpose: Sendable {
        /// A resync: the posts were quiet.
        case resync
        /// PostgreSQL no longer has them.
        case deleted
        /// PostgreSQL has all of them, and they were idle, or Redis was above its memory target
        /// (eviction).
        case evicted(EvictionReason)
        /// Slots repaired after their Redis master failed over: PostgreSQL has all of them.
        case repaired(Set<UInt16>)
    }
}

/// A log line a shard asks its shell to write.
struct ShardLogLine: Sendable {
    let level: LogLevel
    let event: String
    let fields: [(key: String, value: String)]

    init(_ level: LogLevel, _ event: String, _ fields: [(key: String, value: String)]) {
        self.level = level
        self.event = event
        self.fields = fields
    }
}
