import Persistence
import RedisDriver
import ShardRouter

/// Streaming large posts from PostgreSQL into Redis, and unloading posts from Redis, as plain
/// values: the SQL of a streamed load, its pages and publication, the transactions that delete
/// a post's keys, and which posts failed. (A small post is loaded by the write of the batch
/// that first writes it: `BatchWrite`.) No I/O.
enum PostHydration {
    /// The cursor of a streamed hydration (one per connection, inside its transaction): the
    /// likers of post `$1`, read a page at a time with `fetchLikers`.
    static let declareLikersCursor = "DECLARE counter_hydration NO SCROLL CURSOR FOR SELECT user_id FROM likes WHERE post_id = $1"

    /// The next `pageSize` likers from `declareLikersCursor`'s cursor (a count is no parameter
    /// in `FETCH`: it is the configured page size, an integer).
    static func fetchLikers(pageSize: Int) -> String { "FETCH \(max(1, pageSize)) FROM counter_hydration" }

    /// With reactions of other kinds: the cursor of a streamed hydration's other kinds (in the
    /// same transaction as `declareLikersCursor`): each user of post `$1` holding any, with its
    /// kinds as `ReactionValues.kindsValue` spells them (sorted bytewise, comma-separated).
    static let declareReactorsCursor = """
        DECLARE counter_hydration_reactions NO SCROLL CURSOR FOR
        SELECT user_id, string_agg(kind, ',' ORDER BY kind COLLATE "C") FROM reactions WHERE post_id = $1 GROUP BY user_id
        """

    /// The next `pageSize` users from `declareReactorsCursor`'s cursor.
    static func fetchReactors(pageSize: Int) -> String { "FETCH \(max(1, pageSize)) FROM counter_hydration_reactions" }

    /// One page of a streamed hydration's other kinds: each user's kinds set in the loading hash,
    /// whose expiry restarts.
    static func loadingReactionsPage(_ reactors: [(user: Int64, kinds: String)], post: Int64, loading: String) -> SlotCommands {
        SlotCommands(
            slot: HashSlot(post: post),
            commands: [
                .hset(loading, reactors.map { ($0.user as RedisArgument, $0.kinds as RedisArgument) }),
                .expire(loading, seconds: loadingExpirySeconds),
            ])
    }

    /// How long a streamed hydration's loading set lives without being written to: long enough
    /// for any load, short enough that one left by a loader that died goes away.
    static let loadingExpirySeconds = 600

    /// One page of a streamed hydration: `users` added to the loading set, whose expiry restarts.
    static func loadingPage(_ users: [Int64], post: Int64, loading: String) -> SlotCommands {
        SlotCommands(slot: HashSlot(post: post), commands: [.sadd(loading, users), .expire(loading, seconds: loadingExpirySeconds)])
    }

    /// Publishes a streamed hydration, all or nothing: checks the slot's epoch (when the writer
    /// holds one), checks that the loading set holds exactly the likers loaded (a failover or an
    /// expiry may have taken it), lays a warm post's hash over it (a user the hash knows is as
    /// the hash says: its changes since the post turned warm; any other user has no change since,
    /// so the rows loaded are right for them) and checks that the result holds the hash's count,
    /// then makes it the likers set, without expiry, drops the hash and marks the post hot.
    /// Refuses with `FENCED …`, `GONE …` (the post is no longer warm, or its hash has no count:
    /// Redis lost or reset it meanwhile, and the rows loaded may predate changes it had),
    /// `INCOMPLETE …` or `MISMATCH …`, and the post is unchanged then (the loading set may have
    /// the hash laid over it: it is discarded).
    /// KEYS: the slot's epoch key, the loading set, the likers set, the marker, the warm hash.
    /// ARGV: the epoch held (empty for a sole writer, which has no fence), the likers loaded.
    static let publishScript = [publishChecks(liked: "warm[i + 1] == '1'"), publishReplacingLikers, publishEnd].joined(separator: "\n")

    /// The part of the publication that refuses: the epoch, the tier, the loading set's size,
    /// the warm hash laid over it and the count; `liked` is the Lua test of a liked value.
    private static func publishChecks(liked: String) -> String {
        """
        if ARGV[1] ~= '' then
          local held = redis.call('GET', KEYS[1])
          if held ~= ARGV[1] then
            return redis.error_reply('FENCED slot epoch is ' .. (held or 'missing') .. ', the writer holds ' .. ARGV[1])
          end
        end
        if redis.call('GET', KEYS[4]) ~= 'warm' or redis.call('HEXISTS', KEYS[5], 'n') == 0 then
          return redis.error_reply('GONE the post is no longer warm in Redis')
        end
        local held = redis.call('SCARD', KEYS[2])
        if held ~= tonumber(ARGV[2]) then
          return redis.error_reply('INCOMPLETE the loading set holds ' .. held .. ' likers, not ' .. ARGV[2])
        end
        local warm = redis.call('HGETALL', KEYS[5])
        do
          local count = -1
          for i = 1, #warm, 2 do
            if warm[i] == 'n' then
              count = tonumber(warm[i + 1])
            elseif \(liked) then
              redis.call('SADD', KEYS[2], warm[i])
            else
              redis.call('SREM', KEYS[2], warm[i])
            end
          end
          local merged = redis.call('SCARD', KEYS[2])
          if merged ~= count then
            return redis.error_reply('MISMATCH the likers loaded with the warm hash laid over them are ' .. merged .. ', the count is ' .. count)
          end
        end
        """
    }

    /// The loading set made the likers set (or, empty, none).
    private static let publishReplacingLikers = """
        if redis.call('SCARD', KEYS[2]) == 0 then
          redis.call('DEL', KEYS[3])
        else
          redis.call('RENAME', KEYS[2], KEYS[3])
          redis.call('PERSIST', KEYS[3])
        end
        """

    /// The warm hash dropped and the post marked hot.
    private static let publishEnd = """
        redis.call('DEL', KEYS[5])
        redis.call('SET', KEYS[4], '1')
        return 'OK'
        """

    /// `publishScript` for a deployment with other kinds than `like`: before anything is
    /// replaced, the warm hash's kinds are laid over the loading hash of other kinds too (a
    /// value `1:love,tada` sets the user's kinds, a value without kinds removes them), and the
    /// kinds it then holds, counted, must be the post's counts (`reaction_counts`, exact for a
    /// warm post) — else `MISMATCH`; then it replaces the post's hash of other kinds as well.
    /// (The count walks every user holding another kind: it runs once per promoted post.)
    /// KEYS: as `publishScript`, then the loading hash, the counts hash and the kinds hash.
    /// ARGV: as `publishScript`.
    static let publishWithReactionsScript = [
        // A warm value is `1` or `0`, then `:` and the user's other kinds when it holds any.
        publishChecks(liked: "string.sub(warm[i + 1], 1, 1) == '1'"), publishReactionChecks, publishReplacingLikers,
        """
        if redis.call('HLEN', KEYS[6]) == 0 then
          redis.call('DEL', KEYS[8])
        else
          redis.call('RENAME', KEYS[6], KEYS[8])
          redis.call('PERSIST', KEYS[8])
        end
        """,
        publishEnd,
    ].joined(separator: "\n")

    /// The warm hash's kinds laid over the loading hash of other kinds, then counted against
    /// the post's counts.
    private static let publishReactionChecks = """
        do
          local warm = redis.call('HGETALL', KEYS[5])
          for i = 1, #warm, 2 do
            if warm[i] ~= 'n' then
              local kinds = string.sub(warm[i + 1], 3)
              if kinds == '' then
                redis.call('HDEL', KEYS[6], warm[i])
              else
                redis.call('HSET', KEYS[6], warm[i], kinds)
              end
            end
          end
          local counted = {}
          for _, value in ipairs(redis.call('HVALS', KEYS[6])) do
            for kind in string.gmatch(value, '[^,]+') do counted[kind] = (counted[kind] or 0) + 1 end
          end
          local held = redis.call('HGETALL', KEYS[7])
          local kinds = 0
          for i = 1, #held, 2 do
            kinds = kinds + 1
            if counted[held[i]] ~= tonumber(held[i + 1]) then
              return redis.error_reply('MISMATCH the loaded holders of ' .. held[i] .. ' are ' .. (counted[held[i]] or 0) .. ', its count is ' .. held[i + 1])
            end
          end
          for _ in pairs(counted) do kinds = kinds - 1 end
          if kinds ~= 0 then
            return redis.error_reply('MISMATCH the loaded kinds are not the kinds counted')
          end
        end
        """

    /// The end of a streamed hydration of `post` (`publishScript`, by `EVAL`: it runs once per
    /// large post, so its text is sent each time rather than kept by SHA).
    /// - Parameter loadingReactions: with other kinds than `like`, the loading hash of the
    ///   post's other kinds (`publishWithReactionsScript`); `nil` with likes only.
    static func publishing(
        post: Int64, loading: String, loadingReactions: String? = nil, loaded: Int, epoch: Int64?, layout: RedisKeyLayout
    ) -> SlotCommands {
        let slot = HashSlot(post: post)
        guard let loadingReactions else {
            return SlotCommands(
                slot: slot,
                commands: [
                    RedisCommand(
                        "EVAL", publishScript, "5", layout.epoch(of: slot), loading, layout.likers(ofPost: post),
                        layout.hydratedMarker(ofPost: post), layout.warmMembers(ofPost: post), epoch.map { String($0) } ?? "", String(loaded))
                ])
        }
        return SlotCommands(
            slot: slot,
            commands: [
                RedisCommand(
                    "EVAL", publishWithReactionsScript, "8", layout.epoch(of: slot), loading, layout.likers(ofPost: post),
                    layout.hydratedMarker(ofPost: post), layout.warmMembers(ofPost: post), loadingReactions,
                    layout.reactionCounts(ofPost: post), layout.reactions(ofPost: post), epoch.map { String($0) } ?? "", String(loaded))
            ])
    }

    /// Most users one `SADD` carries, so a post with millions of likers is loaded in commands
    /// of bounded size (Redis reads each command whole before running it, and a fenced write's
    /// script unpacks each command's arguments, which Lua limits).
    static let usersPerCommand = FencedScript.maximumArgumentsPerCommand

    /// Per post, one transaction that deletes its hydration marker, its likers set, its warm
    /// hash and its other kinds' hashes (those by `UNLINK`: a large one is freed in the
    /// background, not while Redis waits),
    /// so the post is cold: PostgreSQL answers its reads, and its next write loads it again or
    /// turns it warm (or finds it missing there).
    static func transactions(unloading posts: [Int64], layout: RedisKeyLayout) -> [SlotCommands] {
        posts.map { post in
            SlotCommands(
                slot: HashSlot(post: post),
                commands: [
                    .del([layout.hydratedMarker(ofPost: post)]),
                    RedisCommand(
                        "UNLINK", layout.likers(ofPost: post), layout.warmMembers(ofPost: post), layout.reactions(ofPost: post),
                        layout.reactionCounts(ofPost: post)),
                ],
                atomic: true)
        }
    }

    /// The posts whose transaction (from `transactions(unloading:…)`,
    /// one result per post in `posts` order) failed, with why.
    static func failures(of posts: [Int64], _ results: [Result<[RedisReply], RedisError>]) -> [Int64: Error] {
        var failures: [Int64: Error] = [:]
        for (index, post) in posts.enumerated() {
            guard index < results.count else {
                failures[post] = RedisError(code: .unexpectedReply, message: "no reply to the transaction of post \(post)")
                continue
            }
            if case .failure(let error) = results[index] { failures[post] = error }
        }
        return failures
    }
}
