import CounterCore
import RedisDriver
import Testing

@Suite("Stream entry ids")
struct StreamEntryIDTests {
    @Test("parse, print and order as Redis does")
    func parseAndOrder() throws {
        let id = try #require(StreamEntryID("1700000000000-3"))
        #expect(id.description == "1700000000000-3")
        #expect(StreamEntryID("5-10")! > StreamEntryID("5-9")!)
        #expect(StreamEntryID("6-0")! > StreamEntryID("5-99")!)
        for bad in ["", "5", "5-", "-5", "a-b", "5-5-5", "-", "5--5", " 5-5", "18446744073709551616-0", "5-+1"] {
            #expect(StreamEntryID(bad) == nil, "\(bad)")
        }
        #expect(StreamEntryID("18446744073709551615-0") == StreamEntryID(milliseconds: .max, sequence: 0))
        let entry = StreamEntry(
            id: id,
            fields: [
                "a": Array("-42".utf8), "b": Array("x1".utf8), "c": [], "d": Array("-".utf8),
                "e": Array("9223372036854775807".utf8), "f": Array("9223372036854775808".utf8),
                "g": Array("-9223372036854775808".utf8),
            ])
        #expect(entry.integer("a") == -42)
        #expect(entry.integer("e") == .max)
        #expect(entry.integer("g") == .min)
        for bad in ["b", "c", "d", "f", "missing"] { #expect(entry.integer(bad) == nil, "\(bad)") }
    }
}

@Suite("Parameter encoding")
struct PostgresValueTests {
    @Test("RESP encoding of a command is binary-safe and length-prefixed")
    func respEncoding() {
        let command = RedisCommand("SET", "k", "a\r\nb")
        #expect(String(decoding: command.encoded, as: UTF8.self) == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n")
    }

    @Test("durations read as seconds")
    func durationSeconds() {
        #expect(Duration.milliseconds(1_500).inSeconds == 1.5)
        #expect(Duration.seconds(3).inSeconds == 3)
        #expect(Duration.microseconds(250).inSeconds == 0.00025)
        #expect(Duration.zero.inSeconds == 0)
    }

    @Test("Integers are written as their decimal digits, whatever their size and sign")
    func integerEncoding() {
        for value: Int64 in [0, 7, 10, 99, 100, 12_345, -1, -10, .max, .min, 1_000_000_000_000_000_000] {
            let text = String(value)
            let command = RedisCommand("X", value)
            #expect(String(decoding: command.encoded, as: UTF8.self) == "*2\r\n$1\r\nX\r\n$\(text.utf8.count)\r\n\(text)\r\n")
        }
        let many = RedisCommand("SADD", ["k"] + (0..<12).map { Int($0) as RedisArgument })
        #expect(String(decoding: many.encoded, as: UTF8.self).hasPrefix("*14\r\n$4\r\nSADD\r\n"))
    }
}
