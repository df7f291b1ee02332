import RedisDriver
import ShardRouter
import TestSupport
import Testing

@Suite("A Redis still loading its data")
struct RedisLoadingTests {
    @Test("it is waited for while it answers LOADING, then served with all its data; a caller that stops waiting gets the LOADING error")
    func waitsWhileLoading() async throws {
        let server = try await LoadingRedis(keys: 3_000, microsecondsPerKey: 2_000)
        defer { server.stop() }
        let client = RedisClient(configuration: RedisConfiguration(host: "127.0.0.1", port: server.port))

        // Told to stop at once: the LOADING refusal comes back, nothing waited.
        var waitedWhenStopping = 0
        do {
            try await client.waitWhileLoading(shouldStop: { true }) { _, _ in waitedWhenStopping += 1 }
            Issue.record("the server had answered LOADING, so giving up should throw it")
        } catch {
            #expect(error.isLoading, "\(error)")
        }
        #expect(waitedWhenStopping == 0)

        // Waiting: told of each LOADING answer, back once the server serves.
        var waits: [Duration] = []
        try await client.waitWhileLoading(interval: .milliseconds(50)) { waited, error in
            #expect(error.isLoading)
            waits.append(waited)
        }
        #expect(!waits.isEmpty)
        #expect(try await client.send(RedisCommand("DBSIZE"), slot: HashSlot(rawValue: 0)!).integer == Int64(server.keys))
        await client.close()
    }
}
