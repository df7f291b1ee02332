import CounterCore
import Testing

@Suite("Durations and sizes as operators write them (pure)")
struct SettingTextTests {
    @Test(
        "durations: a whole number with ms, s, m, h or d, or bare seconds; anything else is refused",
        arguments: [
            ("500ms", Duration?.some(.milliseconds(500))), ("60s", .seconds(60)), ("10m", .seconds(600)), ("2h", .seconds(7_200)),
            ("5d", .seconds(432_000)), ("90", .seconds(90)), ("0", .seconds(0)),
            ("1.5s", nil), ("-1s", nil), ("s", nil), ("d", nil), ("", nil), ("10 m", nil), ("5w", nil), ("١٠s", nil), ("9999999999s", nil),
        ])
    func durations(text: String, expected: Duration?) {
        #expect(Duration.parsingSetting(text) == expected)
    }

    @Test("a duration is written back in the largest exact unit, and read back as itself")
    func durationText() {
        for duration: Duration in [.milliseconds(250), .seconds(1), .seconds(90), .seconds(600), .seconds(7_200), .seconds(86_400 * 7)] {
            #expect(Duration.parsingSetting(duration.settingText) == duration, "\(duration.settingText)")
        }
        #expect(Duration.seconds(600).settingText == "10m")
        #expect(Duration.seconds(86_400 * 7).settingText == "7d")
        #expect(Duration.seconds(90_000).settingText == "25h")
        #expect(Duration.milliseconds(1_500).settingText == "1500ms")
    }

    @Test(
        "sizes: bytes, or kb, mb, gb (binary, any case)",
        arguments: [
            ("1048576", Int?.some(1 << 20)), ("512kb", 512 << 10), ("256MB", 256 << 20), ("4gb", 4 << 30), ("4g", 4 << 30), ("10b", 10),
            ("1.5gb", nil), ("-1mb", nil), ("mb", nil), ("", nil), ("4 gb", nil), ("4tb", nil),
        ])
    func sizes(text: String, expected: Int?) {
        #expect(ByteSize.parse(text) == expected)
        if let expected { #expect(ByteSize.parse(ByteSize.text(expected)) == expected) }
    }
}
