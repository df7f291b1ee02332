/// A workload's request (HTTP/1.1 bytes, as `ScenarioWorkload.http` makes them) as HTTP/2 header
/// fields and a body: the request line becomes `:method`, `:scheme`, `:authority` (from `Host`)
/// and `:path` (the target as sent); the other fields keep their values under lower-case names,
/// without those HTTP/2 forbids (`Connection`, `Keep-Alive`, `Proxy-Connection`,
/// `Transfer-Encoding`, `Upgrade`; RFC 9113 section 8.2.2). Pure, so a test holds it to the bytes.
///
/// Every name and value is a range of `bytes`: the request's own bytes, followed by the
/// lower-case names and the pseudo-header names, so one conversion allocates two arrays.
struct HTTP2RequestFields {
    private(set) var bytes: [UInt8]
    private(set) var fields: [(name: Range<Int>, value: Range<Int>)] = []
    /// The body, in `bytes`.
    private(set) var body: Range<Int> = 0..<0

    private static let forbidden: [[UInt8]] = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"].map {
        Array($0.utf8)
    }
    private static let host = Array("host".utf8)

    /// `nil` when `request` is not a whole HTTP/1 request head (request line, fields, empty line).
    init?(http1 request: [UInt8]) {
        bytes = request
        bytes.reserveCapacity(request.count + 64)
        guard let lineEnd = Self.lineEnd(request, from: 0) else { return nil }
        let line = 0..<lineEnd
        guard let firstSpace = request[line].firstIndex(of: 32),
            let secondSpace = request[(firstSpace + 1)..<lineEnd].firstIndex(of: 32),
            firstSpace > 0, secondSpace > firstSpace + 1
        else { return nil }
        var authority = 0..<0
        var others: [(name: Range<Int>, value: Range<Int>)] = []
        var start = lineEnd + 2
        while true {
            guard let end = Self.lineEnd(request, from: start) else { return nil }
            if end == start {
                start = end + 2
                break
            }
            guard let colon = request[start..<end].firstIndex(of: UInt8(ascii: ":")), colon > start else { return nil }
            var valueStart = colon + 1
            while valueStart < end && (request[valueStart] == 32 || request[valueStart] == 9) { valueStart += 1 }
            var valueEnd = end
            while valueEnd > valueStart && (request[valueEnd - 1] == 32 || request[valueEnd - 1] == 9) { valueEnd -= 1 }
            let name = appendLowercased(request[start..<colon])
            let lowered = bytes[name]
            if lowered.elementsEqual(Self.host) {
                authority = valueStart..<valueEnd
            } else if !Self.forbidden.contains(where: { lowered.elementsEqual($0) }) {
                others.append((name, valueStart..<valueEnd))
            }
            start = end + 2
        }
        body = start..<request.count
        fields.reserveCapacity(4 + others.count)
        fields.append((append(":method"), 0..<firstSpace))
        fields.append((append(":scheme"), append("http")))
        fields.append((append(":authority"), authority.isEmpty ? append("localhost") : authority))
        fields.append((append(":path"), (firstSpace + 1)..<secondSpace))
        fields += others
    }

    /// The index of the CR of the first CRLF at or after `from`.
    private static func lineEnd(_ bytes: [UInt8], from: Int) -> Int? {
        var index = from
        while index + 1 < bytes.count {
            if bytes[index] == 13 && bytes[index + 1] == 10 { return index }
            index += 1
        }
        return nil
    }

    private mutating func append(_ text: StaticString) -> Range<Int> {
        let start = bytes.count
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
        return start..<bytes.count
    }

    private mutating func appendLowercased(_ name: ArraySlice<UInt8>) -> Range<Int> {
        let start = bytes.count
        for byte in name { bytes.append(byte >= 65 && byte <= 90 ? byte + 32 : byte) }
        return start..<bytes.count
    }
}
