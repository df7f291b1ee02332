import Testing

@testable import NodeAPI

@Suite("Whole numbers in request bodies (pure)")
struct WholeNumbersTests {
    static func normalized(_ text: String) -> WholeNumbers.Outcome {
        WholeNumbers.normalized(Array(text.utf8))
    }

    static func rewritten(_ text: String) -> String? {
        guard case .rewritten(let bytes) = normalized(text) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("plain integers, strings and literals are left as they are")
    func unchanged() {
        for body in [
            #"{"post_ids":[1,2,3],"user_id":7}"#, #"{"a":"1.5","b":"7e3"}"#, #"{"a":true,"b":null,"c":-12}"#,
            #"{"a":"\"1.0\\"}"#, "", "[0]", #"{"ids":["1700000000000-0"]}"#,
        ] {
            #expect(Self.normalized(body) == .unchanged, "\(body)")
        }
    }

    @Test(
        "whole numbers in any spelling become their digits, exactly",
        arguments: [
            ("[1.0]", "[1]"), ("[1e3]", "[1000]"), ("[1E+3]", "[1000]"), ("[8.019e3]", "[8019]"), ("[10e-1]", "[1]"),
            ("[100.00]", "[100]"), ("[1.50e1]", "[15]"), ("[0.0]", "[0]"), ("[-0.0]", "[0]"), ("[-7.0]", "[-7]"),
            ("[9007199254740993.0]", "[9007199254740993]"), ("[9223372036854775807.0]", "[9223372036854775807]"),
            (#"{"post_ids":[1, 2.0 ,3],"user_id":7e0}"#, #"{"post_ids":[1, 2 ,3],"user_id":7}"#),
            (#"{"s":"2.0","n":2.0}"#, #"{"s":"2.0","n":2}"#),
        ])
    func whole(body: String, expected: String) {
        #expect(Self.rewritten(body) == expected)
    }

    @Test("a whole number too large for 64 bits stays too large, however large its exponent")
    func huge() {
        #expect(Self.rewritten("[1e19]") == "[10000000000000000000]")
        #expect(Self.rewritten("[1e999999999999]") == "[" + "1" + String(repeating: "0", count: 20) + "]")
        #expect(Self.rewritten("[12345678901234567890123.0]") == "[12345678901234567890123]")
    }

    @Test(
        "a fraction is refused, however it is spelled",
        arguments: ["[1.5]", "[5e-1]", "[1e-1]", "[15e-1]", "[0.001]", "[1e-999999999999]", "[7.000001]"])
    func fraction(body: String) {
        #expect(Self.normalized(body) == .fraction)
    }

    @Test(
        "numbers that are not valid JSON are left for the decoder to refuse",
        arguments: ["[1.]", "[.5]", "[01.0]", "[1e]", "[1.0.0]", "[--1]", "[1e+]", "[-]"])
    func malformed(body: String) {
        #expect(Self.normalized(body) == .unchanged)
    }
}
