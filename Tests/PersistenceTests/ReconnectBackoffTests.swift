import Persistence
import Testing

@Suite("Reconnect backoff")
struct ReconnectBackoffTests {
    @Test("delays double from the initial value up to the cap, and start over after a reset")
    func doublesAndCaps() {
        var backoff = ReconnectBackoff(initial: .milliseconds(50), maximum: .milliseconds(300))
        let delays = (0..<5).map { _ in backoff.nextDelay() }
        #expect(delays == [.milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(300), .milliseconds(300)])
        backoff.reset()
        #expect(backoff.nextDelay() == .milliseconds(50))
    }
}

@Suite("Stream entry ids")
struct StreamEntryIDTests {
    @Test("parse, print and order as Redis does")
    func parseAndOrder() throws {
        let id = try #require(StreamEntryID("1700000000000-3"))
        #expect(id.description == "1700000000000-3")
        #expect(StreamEntryID("5-10")! > StreamEntryID("5-9")!)
        #expect(StreamEntryID("6-0")! > StreamEntryID("5-99")!)
        for bad in ["", "5", "5-", "-5", "a-b", "5-5-5"] { #expect(StreamEntryID(bad) == nil) }
    }
}

@Suite("Parameter encoding")
struct PostgresValueTests {
    @Test("RESP encoding of a command is binary-safe and length-prefixed")
    func respEncoding() {
        let command = RedisCommand("SET", "k", "a\r\nb")
        #expect(String(decoding: command.encoded, as: UTF8.self) == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n")
    }
}
