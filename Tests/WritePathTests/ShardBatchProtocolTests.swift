import CounterCore
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import TestSupport
import Testing

@testable import WritePath

@Suite("Shard batch protocol (pure)")
struct ShardBatchProtocolTests {
    typealias Request = ShardDecider.Request
    typealias Answer = BatchStateMachine.Answer

    static let layout = RedisKeyLayout(prefix: "t")

    static func likers(_ post: Int64) -> String { layout.likers(ofPost: post) }
    static func marker(_ post: Int64) -> String { layout.hydratedMarker(ofPost: post) }
    /// What `GET` of a hot post's marker, and of a warm post's, replies.
    static let hot = RedisReply.bulkString(Array("1".utf8))
    static let warm = RedisReply.bulkString(Array("warm".utf8))
    static func slot(_ post: Int64) -> UInt16 { HashSlot(post: post).rawValue }

    static func request(_ operation: LikeOperation, _ post: Int64, _ user: Int64) -> Request {
        Request(operation: operation, postID: post, userID: user)
    }

    /// A Redis model where `members` are loaded (marker and likers set).
    static func hydratedRedis(_ members: [Int64: [Int64]]) -> RedisModel {
        var redis = RedisModel()
        for (post, users) in members {
            redis.strings[marker(post)] = "1"
            if !users.isEmpty { redis.sets[likers(post)] = Set(users.map(String.init)) }
        }
        return redis
    }

    // MARK: - Read

    @Test("the read asks per post for the marker, the count and the batch's distinct users, and reads views from the replies")
    func readCommandsAndViews() throws {
        let read = BatchRead([
            Self.request(.like, 1, 7), Self.request(.toggle, 1, 8), Self.request(.read, 1, 7),
            Self.request(.count, 2, 0), Self.request(.unlike, 3, 9),
        ])
        #expect(read.posts == [1, 2, 3])
        #expect(read.users == [[7, 8], [], [9]])
        let groups = read.commands(layout: Self.layout)
        #expect(
            groups.map(\.commands) == [
                [.get(Self.marker(1)), .scard(Self.likers(1)), .smismember(Self.likers(1), [Int64(7), Int64(8)])],
                [.get(Self.marker(2)), .scard(Self.likers(2))],
                [.get(Self.marker(3)), .scard(Self.likers(3)), .smismember(Self.likers(3), [Int64(9)])],
            ])
        #expect(groups.map(\.slot.rawValue) == [Self.slot(1), Self.slot(2), Self.slot(3)])
        #expect(groups.allSatisfy { !$0.atomic })

        let outcome = read.outcome(of: [
            .success([Self.hot, .integer(5), .array([.integer(1), .integer(0)])]),
            .success([Self.hot, .integer(0)]),
            .success([.null, .integer(0), .array([.integer(0)])]), // no marker
        ])
        #expect(outcome.views == [1: .init(likesCount: 5, members: [7: true, 8: false]), 2: .init(likesCount: 0, members: [:])])
        #expect(outcome.unhydrated == [3])
        #expect(outcome.warm.isEmpty)
        #expect(outcome.failures.isEmpty)

        // A warm marker: the post's hash is read next, with the same users.
        let warm = read.outcome(of: [
            .success([Self.warm, .integer(0), .array([.integer(0), .integer(0)])]),
            .success([Self.hot, .integer(0)]), .success([.null, .integer(0), .array([.integer(0)])]),
        ])
        #expect(warm.warm == [1] && warm.warmUsers == [[7, 8]] && warm.views.keys.sorted() == [2] && warm.unhydrated == [3])
        let warmRead = WarmRead(posts: warm.warm, users: warm.warmUsers)
        #expect(warmRead.commands(layout: Self.layout).map(\.commands) == [[.hmget(Self.layout.warmMembers(ofPost: 1), ["n", Int64(7), Int64(8)])]])
        let known = warmRead.outcome(of: [.success([.array([.bulkString(Array("12".utf8)), .bulkString(Array("0".utf8)), .null])])])
        #expect(known.views == [1: .init(likesCount: 12, members: [7: false])])
        #expect(known.unknown == [.init(post: 1, user: 8)])
        // A hash without its count is refused, not read as an empty post.
        let broken = warmRead.outcome(of: [.success([.array([.null, .null, .null])])])
        #expect(broken.views.isEmpty && (broken.failures[1] as? RedisError)?.code == .unexpectedReply)
    }

    @Test("a wrong SMISMEMBER flag count, an error reply or a failed node fails only its own post")
    func readFailures() throws {
        let read = BatchRead([
            Self.request(.like, 1, 7), Self.request(.like, 1, 8), Self.request(.like, 2, 7),
            Self.request(.like, 3, 7), Self.request(.like, 4, 7),
        ])
        let outcome = read.outcome(of: [
            .success([.integer(1), .integer(5), .array([.integer(1)])]), // one flag for two users
            .success([.integer(1), .error("WRONGTYPE Operation against a key holding the wrong kind of value"), .array([.integer(0)])]),
            .failure(RedisError(code: .connectionFailed, message: "refused")),
            .success([.integer(1), .integer(2), .array([.integer(1)])]),
        ])
        #expect((outcome.failures[1] as? RedisError)?.code == .unexpectedReply)
        #expect((outcome.failures[1] as? RedisError)?.message == "SMISMEMBER returned 1 flags for 2 users")
        #expect((outcome.failures[2] as? RedisError)?.code == .server)
        #expect((outcome.failures[3] as? RedisError)?.code == .connectionFailed)
        #expect(outcome.views == [4: .init(likesCount: 2, members: [7: true])])
        #expect(outcome.unhydrated.isEmpty)

        // Through the machine: the failed posts' requests are answered at once; the good post goes on.
        let requests = [Self.request(.like, 1, 7), Self.request(.like, 4, 8), Self.request(.toggle, 1, 9)]
        var machine = BatchStateMachine(requests: requests, acknowledgement: .redis, layout: Self.layout)
        guard case .read = machine.start() else {
            Issue.record("a batch starts with a read")
            return
        }
        let action = machine.redisReplied([
            .success([.integer(1), .integer(5), .array([.integer(1)])]), // post 1: two users, one flag
            .success([.integer(1), .integer(2), .array([.integer(0)])]),
        ])
        let settled = machine.takeSettled()
        #expect(settled.answers.map(\.request) == [0, 2])
        #expect(settled.answers.allSatisfy { (try? $0.result.get()) == nil })
        #expect(settled.answers.allSatisfy { if case .failure(let error) = $0.result { error.code == .unavailable } else { false } })
        guard case .write(let transactions) = action else {
            Issue.record("post 4 is written")
            return
        }
        #expect(transactions.map(\.slot.rawValue) == [Self.slot(4)])
    }

    @Test("a small cold post the batch writes is decided on its likers from the lookup and loaded by the write itself, in its slot's transaction")
    func coldPostLoadedByItsWrite() throws {
        var machine = BatchStateMachine(
            requests: [Self.request(.like, 1, 7), Self.request(.read, 1, 5)], acknowledgement: .redis,
            layout: Self.layout, warmThreshold: 10)
        _ = machine.start()
        guard case .findPosts(let lookup) = machine.redisReplied([.success([.null, .integer(0), .array([.integer(0), .integer(0)])])]),
            lookup.posts == [1]
        else {
            Issue.record("an unloaded post is looked for in PostgreSQL")
            return
        }
        // Written: its likers come back whole when it is small; its users' memberships are
        // asked too, for when it is large (then it turns warm).
        #expect(lookup.loading == [1] && lookup.loadBelow == 10 && lookup.pairs == [.init(post: 1, user: 7), .init(post: 1, user: 5)])
        guard case .write(let groups) = machine.postsFound(.init(counts: [1: 2], likers: [1: [5, 6]])) else {
            Issue.record("then written")
            return
        }
        #expect(groups.count == 1 && groups[0].atomic)
        let likers = Self.likers(1)
        #expect(
            Array(groups[0].commands.prefix(4)) == [
                .del([likers]), .sadd(likers, [Int64(5), Int64(6)]), .set(Self.marker(1), "1"),
                .sadd(likers, [Int64(7)]),
            ])
        guard
            case .finish(let completion) = machine.redisReplied([
                .success([
                    .integer(0), .integer(2), .status("OK"), .integer(1),
                    .bulkString(Array("5-0".utf8)),
                ])
            ])
        else {
            Issue.record("nothing left to do")
            return
        }
        #expect(
            completion.answers.map(\.result) == [
                .success(LikeState(postID: 1, userID: 7, isLiked: true, likesCount: 3)),
                .success(LikeState(postID: 1, userID: 5, isLiked: true, likesCount: 3)),
            ])
        #expect(completion.touched == [1])
        #expect(completion.statistics.coldReads == 1)
    }

    @Test("a large post not in Redis is decided on its count and its users' memberships and turns warm with the write; the rest goes on")
    func largePostTurnsWarm() throws {
        let requests = [Self.request(.like, 1, 7), Self.request(.like, 2, 8), Self.request(.toggle, 1, 9), Self.request(.like, 3, 7)]
        var machine = BatchStateMachine(requests: requests, acknowledgement: .redis, layout: Self.layout, warmThreshold: 10)
        _ = machine.start()
        let unloaded = RedisReply.array([.integer(0)])
        guard
            case .findPosts(let lookup) = machine.redisReplied([
                .success([.null, .integer(0), .array([.integer(0), .integer(0)])]), .success([.null, .integer(0), unloaded]),
                .success([Self.hot, .integer(4), .array([.integer(0)])]),
            ])
        else {
            Issue.record("unloaded posts are looked for")
            return
        }
        #expect(Set(lookup.posts) == [1, 2])
        #expect(Set(lookup.pairs) == [.init(post: 1, user: 7), .init(post: 1, user: 9), .init(post: 2, user: 8)])
        // Both written: both asked to come back whole, below the threshold.
        #expect(lookup.loading.sorted() == [1, 2] && lookup.loadBelow == 10)
        // Post 1 is large (10 likers, of whom 9; its likers do not come back); post 2 is small.
        guard case .write(let groups) = machine.postsFound(.init(counts: [1: 10, 2: 3], likers: [1: [9], 2: [1, 2, 3]])) else {
            Issue.record("all three posts are written here")
            return
        }
        let settled = machine.takeSettled()
        #expect(settled.answers.isEmpty && settled.missingPosts.isEmpty)
        #expect(Set(groups.map(\.slot.rawValue)) == [Self.slot(1), Self.slot(2), Self.slot(3)])
        // The small post is loaded by its write; the large one turns warm: marker, count and the
        // memberships the batch knows, no likers set.
        let small = try #require(groups.first { $0.slot.rawValue == Self.slot(2) })
        #expect(small.commands.contains(.set(Self.marker(2), "1")))
        let large = try #require(groups.first { $0.slot.rawValue == Self.slot(1) })
        let hash = Self.layout.warmMembers(ofPost: 1)
        #expect(
            Array(large.commands.prefix(3)) == [
                .del([Self.likers(1), hash]), .set(Self.marker(1), "warm"),
                .hset(hash, [("n", Int64(10)), (Int64(7), "1"), (Int64(9), "0")]),
            ])
        #expect(large.commands.count == 4) // and the log entry
        guard
            case .finish(let completion) = machine.redisReplied(
                groups.map { group in
                    .success(group.commands.dropLast().map { _ in RedisReply.integer(1) } + [.bulkString(Array("5-0".utf8))])
                })
        else {
            Issue.record("nothing left to do")
            return
        }
        #expect(
            completion.answers.map(\.result) == [
                .success(LikeState(postID: 1, userID: 7, isLiked: true, likesCount: 11)),
                .success(LikeState(postID: 2, userID: 8, isLiked: true, likesCount: 4)),
                .success(LikeState(postID: 1, userID: 9, isLiked: false, likesCount: 10)),
                .success(LikeState(postID: 3, userID: 7, isLiked: true, likesCount: 5)),
            ])
        #expect(Set(completion.touched) == [1, 2, 3])
    }

    @Test("a streamed hydration's pages grow its own loading set; its publication is one script on the post's slot")
    func streamedHydrationCommands() {
        let loading = Self.layout.loadingLikers(ofPost: 1, attempt: 42)
        #expect(loading == Self.likers(1) + ":loading:42")
        #expect(loading.contains("{\(HashSlot(post: 1).hashTag)}")) // the post's slot
        #expect(
            PostHydration.loadingPage([5, 6], post: 1, loading: loading).commands == [
                .sadd(loading, [Int64(5), Int64(6)]), .expire(loading, seconds: 600),
            ])
        let published = PostHydration.publishing(post: 1, loading: loading, loaded: 2, epoch: 7, layout: Self.layout)
        #expect(published.slot == HashSlot(post: 1))
        #expect(
            published.commands == [
                RedisCommand(
                    "EVAL", PostHydration.publishScript, "5", Self.layout.epoch(of: HashSlot(post: 1)),
                    loading, Self.likers(1), Self.marker(1), Self.layout.warmMembers(ofPost: 1), "7", "2")
            ])
        // A sole writer holds no epoch: the script skips the check.
        #expect(
            PostHydration.publishing(post: 1, loading: loading, loaded: 0, epoch: nil, layout: Self.layout).commands
                == [
                    RedisCommand(
                        "EVAL", PostHydration.publishScript, "5", Self.layout.epoch(of: HashSlot(post: 1)),
                        loading, Self.likers(1), Self.marker(1), Self.layout.warmMembers(ofPost: 1), "", "0")
                ])
        #expect(PostHydration.fetchLikers(pageSize: 10_000) == "FETCH 10000 FROM counter_hydration")
    }

    // MARK: - Hydration

    @Test("a post with 25,000 likers is loaded by its write in SADDs of 4,000 users and its marker, before its changes")
    func hydrationChunks() throws {
        let users = (1...25_000).map { Int64($0) }
        let changes = [LikeChange(userID: 30_000, postID: 1, liked: true), LikeChange(userID: 1, postID: 2, liked: true)]
        let commands = BatchWrite.loadCommands(changes, loading: [1: users, 2: []], layout: Self.layout)
        #expect(FencedScript.maximumArgumentsPerCommand == 4_000)
        #expect(
            commands == [.del([Self.likers(1)])]
                + stride(from: 0, to: 25_000, by: 4_000).map { .sadd(Self.likers(1), Array(users[$0..<min($0 + 4_000, 25_000)])) }
                + [.set(Self.marker(1), "1")]
                // A post without likers: emptied and marked.
                + [.del([Self.likers(2)]), .set(Self.marker(2), "1")])
        // Posts not being loaded add nothing.
        #expect(BatchWrite.loadCommands(changes, loading: [:], layout: Self.layout).isEmpty)

        // Through the machine: loaded once, and the batch builds on it.
        var redis = RedisModel()
        let postgres = PostgresModel(posts: [1], likes: [1: users])
        let run = Self.run([Self.request(.like, 1, 30_000), Self.request(.read, 1, 5)], redis: &redis, postgres: postgres)
        #expect(run.steps == [.read, .findPosts, .write])
        #expect(
            run.answers == [
                0: .success(LikeState(postID: 1, userID: 30_000, isLiked: true, likesCount: 25_001)),
                1: .success(LikeState(postID: 1, userID: 5, isLiked: true, likesCount: 25_001)),
            ])
        #expect(redis.members(Self.likers(1)).count == 25_001)
        #expect(redis.strings[Self.marker(1)] == "1")
    }

    @Test("posts PostgreSQL does not have are refused as unknown and reported; the rest go on")
    func missingPosts() throws {
        var redis = Self.hydratedRedis([1: [7]])
        let postgres = PostgresModel(posts: [1, 3], likes: [3: [8]])
        let requests = [Self.request(.like, 2, 7), Self.request(.toggle, 1, 7), Self.request(.like, 3, 7), Self.request(.read, 2, 9)]
        let run = Self.run(requests, redis: &redis, postgres: postgres)
        #expect(run.missingPosts == [2])
        #expect(
            run.answers == [
                0: .failure(.unknownPost(2)),
                1: .success(LikeState(postID: 1, userID: 7, isLiked: false, likesCount: 0)),
                2: .success(LikeState(postID: 3, userID: 7, isLiked: true, likesCount: 2)),
                3: .failure(.unknownPost(2)),
            ])
        // Refused at once, before the write; nothing of post 2 reaches Redis.
        #expect(run.early.map(\.request) == [0, 3])
        #expect(redis.sets[Self.likers(2)] == nil && redis.strings[Self.marker(2)] == nil)
        #expect(run.completion.statistics == .init(committedChanges: 2, coldWrites: 1)) // post 3 was written cold

        // When every unloaded post is missing, the batch goes straight on to the decision.
        var machine = BatchStateMachine(
            requests: [Self.request(.like, 2, 7), Self.request(.like, 1, 8)], acknowledgement: .redis,
            layout: Self.layout)
        _ = machine.start()
        _ = machine.redisReplied([
            .success([.null, .integer(0), .array([.integer(0)])]),
            .success([.integer(1), .integer(1), .array([.integer(0)])]),
        ])
        guard case .write = machine.postsFound(.init()) else {
            Issue.record("post 1 is written")
            return
        }
        #expect(machine.takeSettled().missingPosts == [2])
    }

    // MARK: - Cold posts

    @Test("a cold post the batch only reads is answered from PostgreSQL's rows and never loaded into Redis")
    func coldReadsNeverHydrate() throws {
        var redis = Self.hydratedRedis([1: [7]])
        let postgres = PostgresModel(posts: [1, 2, 3], likes: [2: [7, 8, 9], 3: []])
        let requests = [
            Self.request(.read, 2, 7), Self.request(.count, 2, 0), Self.request(.read, 2, 5), Self.request(.read, 1, 7),
            Self.request(.read, 3, 7), Self.request(.count, 4, 0), Self.request(.read, 2, 7),
        ]
        let run = Self.run(requests, redis: &redis, postgres: postgres)
        #expect(run.steps == [.read, .findPosts])
        // One lookup: every cold post for existence and count, each asked membership once.
        #expect(run.lookups.map(\.posts) == [[2, 3, 4]])
        #expect(run.lookups.first?.pairs == [.init(post: 2, user: 7), .init(post: 2, user: 5), .init(post: 3, user: 7)])
        #expect(
            run.answers == [
                0: .success(LikeState(postID: 2, userID: 7, isLiked: true, likesCount: 3)),
                1: .success(LikeState(postID: 2, userID: 0, isLiked: false, likesCount: 3)),
                2: .success(LikeState(postID: 2, userID: 5, isLiked: false, likesCount: 3)),
                3: .success(LikeState(postID: 1, userID: 7, isLiked: true, likesCount: 1)),
                4: .success(LikeState(postID: 3, userID: 7, isLiked: false, likesCount: 0)),
                5: .failure(.unknownPost(4)),
                6: .success(LikeState(postID: 2, userID: 7, isLiked: true, likesCount: 3)),
            ])
        #expect(run.missingPosts == [4])
        // Nothing of the cold posts reached Redis.
        for post: Int64 in [2, 3, 4] { #expect(redis.sets[Self.likers(post)] == nil && redis.strings[Self.marker(post)] == nil) }
        #expect(redis.streams.isEmpty)
        #expect(run.completion.statistics.hotReads == 1)
        #expect(run.completion.statistics.coldReads == 5)
    }

    @Test("a cold post with a million likers is read without being loaded: its size does not matter to a read")
    func coldGiantRead() throws {
        var redis = RedisModel()
        let run = Self.run(
            [Self.request(.read, 1, 7), Self.request(.count, 1, 0)], redis: &redis,
            postgres: PostgresModel(posts: [1], likes: [1: Array(1...1_000)]), warmThreshold: 100)
        #expect(run.steps == [.read, .findPosts])
        #expect(
            run.answers == [
                0: .success(LikeState(postID: 1, userID: 7, isLiked: true, likesCount: 1_000)),
                1: .success(LikeState(postID: 1, userID: 0, isLiked: false, likesCount: 1_000)),
            ])
        #expect(redis.strings.isEmpty && redis.sets.isEmpty)
    }

    @Test("a cold post the batch also writes is loaded whole, by the write; its reads are answered from the same rows")
    func coldPostWrittenIsLoaded() throws {
        var redis = RedisModel()
        let postgres = PostgresModel(posts: [1, 2], likes: [1: [5], 2: [5]])
        let run = Self.run(
            [Self.request(.read, 1, 5), Self.request(.toggle, 1, 7), Self.request(.read, 2, 5)],
            redis: &redis, postgres: postgres)
        #expect(run.steps == [.read, .findPosts, .write])
        // The written post comes whole (it is small); its users' memberships are asked too (for
        // a large one, which would turn warm), and the read-only post's reader.
        #expect(run.lookups.first?.pairs == [.init(post: 1, user: 5), .init(post: 1, user: 7), .init(post: 2, user: 5)])
        #expect(run.lookups.first?.loading == [1])
        #expect(
            run.answers == [
                0: .success(LikeState(postID: 1, userID: 5, isLiked: true, likesCount: 1)),
                1: .success(LikeState(postID: 1, userID: 7, isLiked: true, likesCount: 2)),
                2: .success(LikeState(postID: 2, userID: 5, isLiked: true, likesCount: 1)),
            ])
        #expect(redis.members(Self.likers(1)) == [5, 7])
        #expect(redis.sets[Self.likers(2)] == nil && redis.strings[Self.marker(2)] == nil)
        // Both reads were answered from PostgreSQL's rows (post 1's before its write loaded it).
        #expect(run.completion.statistics.hotReads == 0 && run.completion.statistics.coldReads == 2)
    }

    @Test("the cold lookup's rows: posts with their counts, likes among the pairs asked; a row of neither kind is refused")
    func coldLookupRows() throws {
        let lookup = ColdLookup(posts: [1, 2], pairs: [.init(post: 1, user: 7), .init(post: 1, user: 7), .init(post: 2, user: 8)])
        #expect(lookup.pairs == [.init(post: 1, user: 7), .init(post: 2, user: 8)])
        #expect(lookup.parameters == [.int64Array([1, 2]), .int64Array([1, 2]), .int64Array([7, 8])])
        #expect(lookup.query == ColdLookup.postsPart + "\nUNION ALL\n" + ColdLookup.pairsPart(2, 3))
        // Without memberships to ask, `likes` is not read.
        #expect(ColdLookup(posts: [1]).query == ColdLookup.postsPart && ColdLookup(posts: [1]).parameters == [.int64Array([1])])
        // Posts loaded whole come after the pairs, with the size limit.
        let loading = ColdLookup(posts: [1, 2], pairs: [.init(post: 1, user: 7)], loading: [2], loadBelow: 500)
        #expect(loading.query == ColdLookup.postsPart + "\nUNION ALL\n" + ColdLookup.pairsPart(2, 3) + "\nUNION ALL\n" + ColdLookup.loadingPart(4, 5))
        #expect(loading.parameters == [.int64Array([1, 2]), .int64Array([1]), .int64Array([7]), .int64Array([2]), .int64(500)])
        #expect(ColdLookup(posts: [2], loading: [2], loadBelow: 9).query == ColdLookup.postsPart + "\nUNION ALL\n" + ColdLookup.loadingPart(2, 3))
        let rows = PostgresRows(
            columns: ["id", "likes_count", "int8"], rows: [["1", "4", nil], ["2", "0", nil], ["1", nil, "7"]],
            affectedRows: 0)
        let found = try ColdLookup.found(in: rows)
        #expect(found.counts == [1: 4, 2: 0])
        #expect(found.likers == [1: [7]])
        #expect(found.view(of: 1, users: [7, 9]) == .init(likesCount: 4, members: [7: true, 9: false]))
        #expect(found.view(of: 3, users: []) == nil)
        #expect(throws: PostgresError.self) {
            try ColdLookup.found(in: PostgresRows(columns: ["id", "likes_count", "int8"], rows: [["1", nil, nil]], affectedRows: 0))
        }
    }

    @Test("PostgreSQL failing while posts are loaded fails the batch's open requests, counted once")
    func postgresFailure() throws {
        var redis = Self.hydratedRedis([1: []])
        let run = Self.run(
            [Self.request(.like, 1, 7), Self.request(.like, 2, 7)], redis: &redis,
            postgres: PostgresModel(posts: [1, 2], likes: [:]), postgresDown: true)
        #expect(run.steps == [.read, .findPosts])
        #expect(run.answers.count == 2)
        #expect(run.answers.values.allSatisfy { if case .failure(let error) = $0 { error.code == .unavailable } else { false } })
        #expect(run.completion.statistics == .init(postgresErrors: 1))
        #expect(redis.streams.isEmpty)
    }

    // MARK: - Write

    @Test("membership is written once per post and direction, in the state of each user's last change")
    func membershipCommands() {
        let layout = RedisKeyLayout(prefix: "t")
        let commands = BatchWrite.membershipCommands(
            [
                LikeChange(userID: 7, postID: 1, liked: true),
                LikeChange(userID: 8, postID: 1, liked: false),
                LikeChange(userID: 7, postID: 1, liked: false), // 7's last change on post 1: unlike
                LikeChange(userID: 9, postID: 2, liked: true),
                LikeChange(userID: 10, postID: 1, liked: true),
                LikeChange(userID: 9, postID: 1, liked: true),
            ], layout: layout)
        let expected: [RedisCommand] = [
            .sadd(layout.likers(ofPost: 1), [Int64(10), Int64(9)]),
            .srem(layout.likers(ofPost: 1), [Int64(7), Int64(8)]),
            .sadd(layout.likers(ofPost: 2), [Int64(9)]),
        ]
        #expect(commands == expected)
        #expect(BatchWrite.membershipCommands([], layout: layout).isEmpty)
    }

    @Test("EXEC's replies give each change its entry id; the flusher learns count and newest per slot")
    func entryIDs() throws {
        try #require(Self.slot(1) != Self.slot(2))
        let changes = [
            LikeChange(userID: 7, postID: 1, liked: true), LikeChange(userID: 9, postID: 2, liked: true),
            LikeChange(userID: 8, postID: 1, liked: true), LikeChange(userID: 7, postID: 1, liked: false),
        ]
        let write = BatchWrite(changes, layout: Self.layout)
        let log1 = Self.layout.changeLog(of: HashSlot(post: 1))
        let log2 = Self.layout.changeLog(of: HashSlot(post: 2))
        #expect(write.transactions.map(\.slot.rawValue) == [Self.slot(1), Self.slot(2)])
        #expect(write.transactions.allSatisfy { $0.atomic })
        // One packed entry per slot, its changes in decision order.
        #expect(
            write.transactions[0].commands == [
                .sadd(Self.likers(1), [Int64(8)]), .srem(Self.likers(1), [Int64(7)]),
                .xadd(log1, fields: [("c", "1+7+8-7")]),
            ])
        #expect(
            write.transactions[1].commands == [
                .sadd(Self.likers(2), [Int64(9)]), .xadd(log2, fields: [("u", Int64(9)), ("p", Int64(2)), ("l", "1")]),
            ])

        func id(_ text: String) -> RedisReply { .bulkString(Array(text.utf8)) }
        let outcome = write.outcome(of: [
            .success([.integer(1), .integer(0), id("101-0")]),
            .success([.integer(1), id("100-2")]),
        ])
        #expect(outcome.entryIDs == ["101-0", "100-2", "101-0", "101-0"].map { StreamEntryID($0) })
        #expect(outcome.appended.mapValues(\.count) == [Self.slot(1): 3, Self.slot(2): 1])
        #expect(outcome.appended.mapValues(\.newest) == [Self.slot(1): StreamEntryID("101-0")!, Self.slot(2): StreamEntryID("100-2")!])
        #expect(outcome.failures.isEmpty && outcome.uncertainSlots.isEmpty)
        #expect(outcome.committed == 4)

        // An XADD refused inside EXEC: the changes it held have no entry, and their post fails.
        let refused = write.outcome(of: [
            .success([.integer(1), .integer(0), .error("ERR no")]),
            .success([.integer(1), id("100-2")]),
        ])
        #expect(refused.entryIDs == [nil, "100-2", nil, nil].map { $0.flatMap(StreamEntryID.init) })
        #expect((refused.failures[1] as? CounterError)?.message == "Redis refused the write of post 1")
        #expect(refused.appended.mapValues(\.count) == [Self.slot(2): 1])
        #expect(refused.committed == 1 && refused.lost == 3)
    }

    @Test("a slot's changes beyond ChangeLogEntry.maximumChangesPerEntry go in further entries, in order")
    func largeBatchSplitsEntries() throws {
        let perEntry = ChangeLogEntry.maximumChangesPerEntry
        let changes = (1...Int64(perEntry + 5)).map { LikeChange(userID: $0, postID: 1, liked: true) }
        let write = BatchWrite(changes, layout: Self.layout)
        #expect(write.transactions.count == 1)
        let entries = write.transactions[0].commands.filter { $0.name == "XADD" }
        #expect(
            entries == [
                ChangeLogEntry.append(changes[..<perEntry], to: Self.layout.changeLog(of: HashSlot(post: 1))),
                ChangeLogEntry.append(changes[perEntry...], to: Self.layout.changeLog(of: HashSlot(post: 1))),
            ])
        func id(_ text: String) -> RedisReply { .bulkString(Array(text.utf8)) }
        let membership = write.transactions[0].commands.count - 2
        let outcome = write.outcome(of: [.success(Array(repeating: .integer(1), count: membership) + [id("7-0"), id("7-1")])])
        #expect(outcome.entryIDs.prefix(perEntry).allSatisfy { $0 == StreamEntryID("7-0") })
        #expect(outcome.entryIDs.suffix(5).allSatisfy { $0 == StreamEntryID("7-1") })
        #expect(outcome.appended[Self.slot(1)]?.count == perEntry + 5)
        #expect(outcome.appended[Self.slot(1)]?.newest == StreamEntryID("7-1"))
    }

    @Test("a replayed change keeps its first acknowledgement's time: alone in an entry with `t`, between the runs of the others, in decision order")
    func replayedChangeKeepsItsTime() throws {
        let log = Self.layout.changeLog(of: HashSlot(post: 1))
        let changes = [
            LikeChange(userID: 7, postID: 1, liked: true),
            LikeChange(userID: 8, postID: 1, liked: true, acknowledgedAt: 1_700_000_000_456),
            LikeChange(userID: 9, postID: 1, liked: true), LikeChange(userID: 7, postID: 1, liked: false),
        ]
        let write = BatchWrite(changes, layout: Self.layout)
        #expect(write.transactions.count == 1)
        #expect(
            write.transactions[0].commands.filter { $0.name == "XADD" } == [
                .xadd(log, fields: [("u", Int64(7)), ("p", Int64(1)), ("l", "1")]),
                .xadd(log, fields: [("u", Int64(8)), ("p", Int64(1)), ("l", "1"), ("t", Int64(1_700_000_000_456))]),
                .xadd(log, fields: [("c", "1+9-7")]),
            ])
        func id(_ text: String) -> RedisReply { .bulkString(Array(text.utf8)) }
        let membership = write.transactions[0].commands.count - 3
        let outcome = write.outcome(of: [.success(Array(repeating: .integer(1), count: membership) + [id("5-0"), id("5-1"), id("5-2")])])
        #expect(outcome.entryIDs == ["5-0", "5-1", "5-2", "5-2"].map { StreamEntryID($0) })
        #expect(outcome.appended[Self.slot(1)]?.count == 4)
        #expect(outcome.appended[Self.slot(1)]?.newest == StreamEntryID("5-2"))
        // The decider gives a replayed request's change its time.
        var views: [Int64: ShardDecider.PostView] = [1: .init(likesCount: 0, members: [8: false])]
        let decision = ShardDecider.decide(
            [ShardDecider.Request(operation: .like, postID: 1, userID: 8, acknowledgedAt: 1_700_000_000_456)], views: &views)
        #expect(decision.changes == [changes[1]])
    }

    @Test(
        "a slot whose node failed fails only its posts; one whose connection broke is also uncertain",
        arguments: [
            RedisModel.Fault.nodeDown, .lostBeforeRunning, .lostAfterRunning,
        ])
    func writeFailureOfOneSlot(fault: RedisModel.Fault) throws {
        try #require(Self.slot(1) != Self.slot(2))
        var redis = Self.hydratedRedis([1: [], 2: []])
        let requests = [Self.request(.like, 1, 7), Self.request(.like, 2, 7), Self.request(.like, 2, 8)]
        let run = Self.run(requests, redis: &redis, postgres: PostgresModel()) { step, group in
            step == .write && group.slot.rawValue == Self.slot(2) ? fault : nil
        }
        #expect(run.answers[0] == .success(LikeState(postID: 1, userID: 7, isLiked: true, likesCount: 1)))
        for index in [1, 2] {
            guard case .failure(let error)? = run.answers[index] else {
                Issue.record("post 2 fails")
                continue
            }
            #expect(error.code == .unavailable)
            #expect(error.retryAfterSeconds == 1)
        }
        #expect(run.completion.uncertainSlots == (fault == .nodeDown ? [] : [Self.slot(2)]))
        #expect(Set(run.completion.appended.keys) == [Self.slot(1)])
        #expect(run.completion.statistics == .init(redisErrors: 1, committedChanges: 1))
        #expect(redis.members(Self.likers(2)) == (fault == .lostAfterRunning ? [7, 8] : []))
    }

    // MARK: - Answers per acknowledgement mode

    @Test("redis: answered after the write, once the flusher knows of it")
    func redisAcknowledgement() throws {
        var redis = Self.hydratedRedis([1: [7]])
        let run = Self.run(
            [Self.request(.toggle, 1, 7), Self.request(.toggle, 1, 8), Self.request(.count, 1, 0)],
            acknowledgement: .redis, redis: &redis, postgres: PostgresModel())
        #expect(run.early.isEmpty)
        #expect(
            run.completion.answers == [
                Answer(request: 0, result: .success(LikeState(postID: 1, userID: 7, isLiked: false, likesCount: 0))),
                Answer(request: 1, result: .success(LikeState(postID: 1, userID: 8, isLiked: true, likesCount: 1))),
                Answer(request: 2, result: .success(LikeState(postID: 1, userID: 0, isLiked: false, likesCount: 1))),
            ])
        #expect(run.completion.afterApplied == nil)
        #expect(run.completion.appended[Self.slot(1)]?.count == 2)
    }

    @Test("memory: answered at the decision, before the write; a failed write is counted as lost")
    func memoryAcknowledgement() throws {
        var machine = BatchStateMachine(
            requests: [Self.request(.like, 1, 7), Self.request(.like, 1, 8)], acknowledgement: .memory,
            layout: Self.layout)
        _ = machine.start()
        let action = machine.redisReplied([.success([.integer(1), .integer(4), .array([.integer(0), .integer(1)])])])
        guard case .write = action else {
            Issue.record("the change is written")
            return
        }
        #expect(
            machine.takeSettled().answers == [
                Answer(request: 0, result: .success(LikeState(postID: 1, userID: 7, isLiked: true, likesCount: 5))),
                Answer(request: 1, result: .success(LikeState(postID: 1, userID: 8, isLiked: true, likesCount: 5))),
            ])
        guard case .finish(let completion) = machine.redisReplied([.failure(RedisError(code: .connectionFailed, message: "down"))]) else {
            Issue.record("the batch ends")
            return
        }
        #expect(machine.takeSettled().answers.isEmpty)
        #expect(completion.answers.isEmpty && completion.afterApplied == nil)
        #expect(completion.statistics == .init(redisErrors: 1, lostMemoryAcknowledgements: 1))
    }

    @Test("postgres: write failures are answered at once, successes once the flusher applied the newest entries")
    func postgresAcknowledgement() throws {
        try #require(Self.slot(1) != Self.slot(2))
        var redis = Self.hydratedRedis([1: [], 2: []])
        let requests = [Self.request(.like, 1, 7), Self.request(.like, 2, 7), Self.request(.read, 1, 8)]
        let run = Self.run(requests, acknowledgement: .postgres, redis: &redis, postgres: PostgresModel()) { step, group in
            step == .write && group.slot.rawValue == Self.slot(2) ? .nodeDown : nil
        }
        #expect(run.completion.answers.map(\.request) == [1])
        let waiting = try #require(run.completion.afterApplied)
        #expect(waiting.marks == run.completion.appended.mapValues(\.newest))
        #expect(waiting.marks.keys.sorted() == [Self.slot(1)])
        #expect(waiting.marks[Self.slot(1)] == redis.streams[Self.layout.changeLog(of: HashSlot(post: 1))]?.last?.id)
        #expect(
            waiting.answers == [
                Answer(request: 0, result: .success(LikeState(postID: 1, userID: 7, isLiked: true, likesCount: 1))),
                Answer(request: 2, result: .success(LikeState(postID: 1, userID: 8, isLiked: false, likesCount: 1))),
            ])

        // Nothing written: nothing to wait for.
        let reads = Self.run([Self.request(.read, 1, 7)], acknowledgement: .postgres, redis: &redis, postgres: PostgresModel())
        #expect(reads.steps == [.read])
        #expect(reads.completion.afterApplied == nil)
        #expect(reads.completion.answers == [Answer(request: 0, result: .success(LikeState(postID: 1, userID: 7, isLiked: true, likesCount: 1)))])
    }

    @Test("an empty batch finishes at once")
    func emptyBatch() {
        var machine = BatchStateMachine(requests: [], acknowledgement: .redis, layout: Self.layout)
        guard case .finish(let completion) = machine.start() else {
            Issue.record("nothing to do")
            return
        }
        #expect(completion.answers.isEmpty && completion.appended.isEmpty)
    }

    // MARK: - Model-based

    @Test(
        "random batches against a model Redis, with flushes and evictions between them: its sets, warm hashes and logs match a reference, answers one serial order, cold posts read, loaded and turned warm exactly",
        arguments: [
            (UInt64(1), AcknowledgementMode.redis), (2, .redis), (3, .postgres), (4, .memory), (5, .redis),
        ])
    func modelBased(seed: UInt64, acknowledgement: AcknowledgementMode) throws {
        var random = SeededGenerator(seed: seed)
        var postgres = PostgresModel(posts: [1, 2, 3], likes: [1: [1, 2], 2: [3]])
        let missingPost: Int64 = 4
        var redis = RedisModel()
        var reference = postgres.likes.mapValues { Set($0) }
        for post in postgres.posts where reference[post] == nil { reference[post] = [] }
        var replayed = reference // PostgreSQL's rows with every log entry so far applied
        var logged: [String: Int] = [:] // entries per log before the batch
        var evictions = 0
        var coldLookups = 0
        var warmSeen = 0
        try #require(Set((1...4).map { Self.slot(Int64($0)) }).count == 4, "one post per slot, so a slot's failure is its post's")
        for batch in 0..<400 {
            let requests = (0..<Int.random(in: 1...30, using: &random)).map { _ -> Request in
                let operation = LikeOperation.allCases.randomElement(using: &random)!
                let post = Int64.random(in: 1...4, using: &random)
                return Self.request(operation, post, operation == .count ? 0 : Int64.random(in: 1...6, using: &random))
            }
            // Faults anywhere, except on memory-mode writes, whose answers are given before them.
            // Posts with two likers or more in PostgreSQL turn warm when written cold; the others
            // are loaded whole: both tiers meet every fault.
            let run = Self.run(
                requests, acknowledgement: acknowledgement, redis: &redis, postgres: postgres,
                postgresDown: random.next() % 25 == 0, warmThreshold: 2
            ) { step, _ in
                guard random.next() % 10 == 0, !(acknowledgement == .memory && step == .write) else { return nil }
                return [RedisModel.Fault.nodeDown, .lostBeforeRunning, .lostAfterRunning].randomElement(using: &random)
            }
            let answers = run.answers
            #expect(run.answerCount == requests.count, "batch \(batch): every request is answered exactly once")

            // Per post, all of a batch's requests succeed or all fail; successes replay serially.
            var succeeded: [Int64: Bool] = [:]
            for (index, request) in requests.enumerated() {
                guard let answer = answers[index] else { continue }
                let success = (try? answer.get()) != nil
                #expect(
                    succeeded.updateValue(success, forKey: request.postID) ?? success == success,
                    "batch \(batch): post \(request.postID) partly failed")
                switch answer {
                case .success(let state):
                    #expect(state == Self.apply(request, to: &reference[request.postID]!), "batch \(batch), request \(index)")
                case .failure(let error):
                    // A missing post is refused as unknown, unless its read or PostgreSQL failed first.
                    let expected: Set<CounterError.Code> = request.postID == missingPost ? [.unknownPost, .unavailable] : [.unavailable]
                    #expect(expected.contains(error.code), "batch \(batch), request \(index): \(error)")
                    // Its write ran though the connection broke: the effect is there, unanswered.
                    if run.lostWrites.contains(Self.slot(request.postID)) { _ = Self.apply(request, to: &reference[request.postID]!) }
                }
            }

            // Redis holds the reference for loaded posts, and for warm ones their count and every
            // membership their hash knows; an unloaded one was never changed.
            for post in postgres.posts.sorted() {
                if redis.strings[Self.marker(post)] == "1" {
                    #expect(redis.members(Self.likers(post)) == reference[post], "batch \(batch): likers of post \(post)")
                } else if redis.strings[Self.marker(post)] == "warm" {
                    warmSeen += 1
                    let hash = redis.hashes[Self.layout.warmMembers(ofPost: post)] ?? [:]
                    #expect(hash["n"] == String(reference[post]!.count), "batch \(batch): count of warm post \(post)")
                    for (field, value) in hash where field != "n" {
                        #expect((value == "1") == reference[post]!.contains(Int64(field)!), "batch \(batch): warm post \(post), user \(field)")
                    }
                    #expect(redis.sets[Self.likers(post)] == nil)
                } else {
                    #expect(reference[post] == Set(postgres.likes[post] ?? []), "batch \(batch): post \(post) changed unloaded")
                }
            }
            #expect(redis.strings[Self.marker(missingPost)] == nil && redis.sets[Self.likers(missingPost)] == nil)
            #expect(run.missingPosts.allSatisfy { $0 == missingPost })

            // The logs replayed onto PostgreSQL's rows give the reference (what the flusher will do).
            for (log, entries) in redis.streams {
                for entry in entries[logged[log, default: 0]...] {
                    for change in try #require(ChangeLogEntry.changes(from: entry)) {
                        if change.liked { replayed[change.postID]!.insert(change.userID) } else { replayed[change.postID]!.remove(change.userID) }
                    }
                }
            }
            #expect(replayed == reference, "batch \(batch): logs")

            // The flusher hears of exactly the entries written, and of the slots whose write broke.
            var written: Set<UInt16> = []
            for (log, entries) in redis.streams where entries.count > logged[log, default: 0] {
                let newEntries = entries[logged[log, default: 0]...]
                let slot = HashSlot(post: try #require(ChangeLogEntry.changes(from: entries[entries.count - 1])?.first).postID).rawValue
                written.insert(slot)
                if run.lostWrites.contains(slot) {
                    #expect(run.completion.appended[slot] == nil, "batch \(batch): a lost write is not noted")
                } else {
                    // One packed entry per slot per batch, holding every change the flusher is told of.
                    #expect(newEntries.count == 1, "batch \(batch): one entry per slot")
                    let changes = try newEntries.reduce(0) { $0 + (try #require(ChangeLogEntry.changes(from: $1))).count }
                    #expect(run.completion.appended[slot]?.count == changes, "batch \(batch): appended")
                    #expect(run.completion.appended[slot]?.newest == entries[entries.count - 1].id, "batch \(batch): newest")
                }
            }
            #expect(Set(run.completion.appended.keys).isSubset(of: written))
            #expect(run.lostWrites.isSubset(of: run.completion.uncertainSlots))
            #expect(run.completion.statistics.lostMemoryAcknowledgements == 0)
            logged = redis.streams.mapValues(\.count)

            // Now and then the flusher catches up (PostgreSQL gets every logged change), and
            // then, nothing of them pending, loaded posts are evicted as the shard does it: the
            // next batches read them cold and load them again with their first write.
            if random.next() % 5 == 0 {
                postgres.likes = replayed.mapValues { $0.sorted() }
                let loaded = postgres.posts.filter { redis.strings[Self.marker($0)] != nil }.sorted()
                let evicted = loaded.filter { _ in random.next() % 2 == 0 }
                evictions += evicted.count
                _ = redis.execute(PostHydration.transactions(unloading: evicted, layout: Self.layout))
                for post in evicted {
                    #expect(
                        redis.strings[Self.marker(post)] == nil && redis.sets[Self.likers(post)] == nil
                            && redis.hashes[Self.layout.warmMembers(ofPost: post)] == nil)
                }
            }
            coldLookups += run.lookups.count
        }
        #expect(
            evictions > 20 && coldLookups > 20 && warmSeen > 20,
            "evictions \(evictions), cold lookups \(coldLookups), warm posts seen \(warmSeen): the run must meet cold and warm posts")
    }

    /// Applies `request` to a post's likers, as one serial step; returns its answer.
    static func apply(_ request: Request, to members: inout Set<Int64>) -> LikeState {
        guard request.operation != .count else {
            return LikeState(postID: request.postID, userID: request.userID, isLiked: false, likesCount: Int64(members.count))
        }
        let wanted = request.operation.wantedState(current: members.contains(request.userID))
        if wanted { members.insert(request.userID) } else { members.remove(request.userID) }
        return LikeState(postID: request.postID, userID: request.userID, isLiked: wanted, likesCount: Int64(members.count))
    }
}

// MARK: - Driving a batch against models

/// PostgreSQL as a batch sees it: which posts exist, and their likers.
struct PostgresModel {
    var posts: Set<Int64> = []
    var likes: [Int64: [Int64]] = [:]
    /// With reactions: the rows of other kinds, per post and user.
    var reactions: [Int64: [Int64: Set<ReactionKind>]] = [:]

    /// What `ColdLookup.query` returns on these tables.
    func lookUp(_ lookup: ColdLookup) -> ColdLookup.Found {
        var found = ColdLookup.Found()
        for post in lookup.posts where posts.contains(post) {
            found.counts[post] = Int64(likes[post]?.count ?? 0)
            if lookup.reactions {
                var counts: [ReactionKind: Int64] = [:]
                for kinds in (reactions[post] ?? [:]).values { for kind in kinds { counts[kind, default: 0] += 1 } }
                if !counts.isEmpty { found.kindCounts[post] = counts }
            }
        }
        for pair in lookup.pairs where posts.contains(pair.post) {
            if (likes[pair.post] ?? []).contains(pair.user) { found.likers[pair.post, default: []].append(pair.user) }
            if lookup.reactions, let kinds = reactions[pair.post]?[pair.user], !kinds.isEmpty {
                found.reactors[pair.post, default: [:]][pair.user] = kinds.sorted()
            }
        }
        for post in lookup.loading where posts.contains(post) {
            let others = lookup.reactions ? (reactions[post] ?? [:]).values.reduce(0) { $0 + $1.count } : 0
            guard Int64((likes[post]?.count ?? 0) + others) < lookup.loadBelow else { continue }
            if let users = likes[post], !users.isEmpty { found.likers[post, default: []] += users }
            if lookup.reactions, let users = reactions[post], !users.isEmpty {
                for (user, kinds) in users { found.reactors[post, default: [:]][user] = kinds.sorted() }
            }
        }
        return found
    }
}

extension ShardBatchProtocolTests {
    /// The I/O steps of a batch, for checking their order.
    enum Step: Equatable {
        case read, findPosts, write
    }

    /// What one batch did.
    struct BatchRun {
        var steps: [Step] = []
        /// Answers handed out before the end (`takeSettled()`), in order.
        var early: [Answer] = []
        var missingPosts: [Int64] = []
        /// The PostgreSQL lookups of cold posts, in order.
        var lookups: [ColdLookup] = []
        /// Slots whose write ran although it was reported lost.
        var lostWrites: Set<UInt16> = []
        var completion = BatchStateMachine.Completion()

        /// Every answer, early, at the end and after the flush (as the flusher would release them).
        var all: [Answer] { early + completion.answers + (completion.afterApplied?.answers ?? []) }
        var answers: [Int: Result<LikeState, CounterError>] {
            Dictionary(all.map { ($0.request, $0.result) }) { first, _ in first }
        }
        var answerCount: Int { all.count }
    }

    /// Runs `requests` as one batch to its end, the way the shard does, against the models;
    /// `fault` may break any Redis group, `postgresDown` fails every PostgreSQL query.
    static func run(
        _ requests: [Request], acknowledgement: AcknowledgementMode = .redis, redis: inout RedisModel,
        postgres: PostgresModel, postgresDown: Bool = false, warmThreshold: Int64 = .max,
        fault: (Step, SlotCommands) -> RedisModel.Fault? = { _, _ in nil }
    ) -> BatchRun {
        var machine = BatchStateMachine(
            requests: requests, acknowledgement: acknowledgement, layout: layout,
            warmThreshold: warmThreshold)
        var run = BatchRun()
        var action = machine.start()
        while true {
            let settled = machine.takeSettled()
            run.early += settled.answers
            run.missingPosts += settled.missingPosts
            switch action {
            case .read(let groups):
                run.steps.append(.read)
                action = machine.redisReplied(redis.execute(groups) { fault(.read, $0) })
            case .write(let groups):
                run.steps.append(.write)
                action = machine.redisReplied(
                    redis.execute(groups) { group in
                        let broken = fault(.write, group)
                        if broken == .lostAfterRunning { run.lostWrites.insert(group.slot.rawValue) }
                        return broken
                    })
            case .findPosts(let lookup):
                run.steps.append(.findPosts)
                run.lookups.append(lookup)
                action =
                    postgresDown
                    ? machine.postgresFailed(PostgresError(code: .connectionFailed, message: "model: down"))
                    : machine.postsFound(postgres.lookUp(lookup))
            case .finish(let completion):
                run.completion = completion
                return run
            }
        }
    }
}
