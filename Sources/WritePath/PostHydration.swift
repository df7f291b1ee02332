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
    static let publishScript = """
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
            elseif warm[i + 1] == '1' then
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
        if redis.call('SCARD', KEYS[2]) == 0 then
          redis.call('DEL', KEYS[3])
        else
          redis.call('RENAME', KEYS[2], KEYS[3])
          redis.call('PERSIST', KEYS[3])
        end
        redis.call('DEL', KEYS[5])
        redis.call('SET', KEYS[4], '1')
        return 'OK'
        """

    /// The end of a streamed hydration of `post` (`publishScript`, by `EVAL`: it runs once per
    /// large post, so its text is sent each time rather than kept by SHA).
    static func publishing(post: Int64, loading: String, loaded: Int, epoch: Int64?, layout: RedisKeyLayout) -> SlotCommands {
        let slot = HashSlot(post: post)
        return SlotCommands(
            slot: slot,
            commands: [
                RedisCommand(
                    "EVAL", publishScript, "5", layout.epoch(of: slot), loading, layout.likers(ofPost: post),
                    layout.hydratedMarker(ofPost: post), layout.warmMembers(ofPost: post), epoch.map { String($0) } ?? "", String(loaded))
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
