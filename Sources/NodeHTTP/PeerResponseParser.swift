import Foundation

/// Reads one HTTP/1.1 answer from the bytes a peer sent: the status, the headers (names in lower
/// case) and a body framed by `Content-Length`, or, without one, by the end of the connection.
/// Pure: the peer client feeds it what has arrived so far.
enum PeerResponseParser {
    enum Parsed: Equatable {
        /// More bytes are needed.
        case incomplete
        /// The head is complete but names no length: the body runs to the end of the connection.
        case untilClose(status: Int, headers: [String: String], bodyStart: Int)
        /// A whole answer, the bytes it took, and whether the connection may carry another request.
        case complete(status: Int, headers: [String: String], body: [UInt8], used: Int, keepAlive: Bool)
        /// Not an answer this client can read.
        case malformed(String)
    }

    /// Longest head accepted; a peer's heads are a few hundred bytes.
    static let maximumHeadLength = 16_384
    /// Longest body accepted; a peer's largest answers (feed pages) are far smaller.
    static let maximumBodyLength = 64 << 20

    static func parse(_ bytes: [UInt8]) -> Parsed {
        guard let headEnd = headEnd(bytes) else {
            return bytes.count > maximumHeadLength ? .malformed("answer head longer than \(maximumHeadLength) bytes") : .incomplete
        }
        let head = String(decoding: bytes[0..<headEnd - 4], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard !lines.isEmpty else { return .malformed("empty answer head") }
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let status = Int(parts[1]), (100...599).contains(status) else {
            return .malformed("bad status line \"\(statusLine.prefix(80))\"")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { return .malformed("bad header line \"\(line.prefix(80))\"") }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingSpaces
            if let earlier = headers[name] {
                // Two lengths that disagree cannot be framed safely; equal ones are one length.
                if name == "content-length" {
                    guard earlier == value else { return .malformed("two different Content-Length values") }
                    continue
                }
                headers[name] = earlier + ", " + value
            } else {
                headers[name] = value
            }
        }
        if headers["transfer-encoding"] != nil { return .malformed("Transfer-Encoding answers are not read by the peer client") }
        let connectionTokens = (headers["connection"] ?? "").lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let keepAlive = parts[0] == "HTTP/1.1" && !connectionTokens.contains("close")
        // The client never sends `Expect`, so an interim answer is not one it can read.
        if (100..<200).contains(status) { return .malformed("interim answer \(status)") }
        let bodyless = status == 204 || status == 304
        if bodyless { return .complete(status: status, headers: headers, body: [], used: headEnd, keepAlive: keepAlive) }
        guard let lengthText = headers["content-length"] else {
            return .untilClose(status: status, headers: headers, bodyStart: headEnd)
        }
        guard let length = Int(lengthText), length >= 0 else { return .malformed("bad Content-Length \"\(lengthText.prefix(40))\"") }
        guard length <= maximumBodyLength else { return .malformed("Content-Length \(length) is beyond \(maximumBodyLength) bytes") }
        guard bytes.count - headEnd >= length else { return .incomplete }
        return .complete(
            status: status, headers: headers, body: Array(bytes[headEnd..<headEnd + length]), used: headEnd + length, keepAlive: keepAlive)
    }

    /// The index just past the blank line that ends the head.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = 3
        let limit = min(bytes.count, maximumHeadLength + 4)
        while index < limit {
            if bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 { return index + 1 }
            index += 1
        }
        return nil
    }
}

extension Substring {
    fileprivate var trimmingSpaces: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
