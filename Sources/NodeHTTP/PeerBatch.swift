/// Several requests to one peer in one HTTP request, and their answers in one answer: the body
/// format of a forwarded batch (`PeerClient`'s batching, answered by the route the node gives it).
/// Pure; a batch is length-prefixed binary, so no byte of a request or an answer needs escaping.
///
/// Requests: a version byte (`1`), the count (`u32`), then per request its method (`u8` length),
/// target (`u32` length: path and query as sent), headers (a `u8` count; each name with a `u8`
/// length, value with a `u32` length) and body (`u32` length). Answers: the version byte, the
/// count, then per answer its status (`u16`), headers (as above, the content type among them) and
/// body. Integers are big-endian.
public enum PeerBatch {
    /// The content type of a batch and of its answer.
    public static let contentType = "application/vnd.counter.forwarded-batch"
    /// Most requests one batch carries.
    public static let maximumCount = 256
    static let version: UInt8 = 1

    /// One answer of a batch.
    public struct Answer: Sendable, Equatable {
        public var status: Int
        /// Names as the owner gave them (`Content-Type`, `Retry-After`, …).
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]

        public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        public static func == (left: Answer, right: Answer) -> Bool {
            left.status == right.status && left.body == right.body
                && left.headers.map(\.name) == right.headers.map(\.name) && left.headers.map(\.value) == right.headers.map(\.value)
        }
    }

    /// Why a batch's body cannot be read.
    public struct Malformed: Error, Equatable {
        public let reason: String
    }

    // MARK: - Requests

    /// `request`'s part of a batch (without the batch's version and count).
    package static func part(of request: PeerClient.Request) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16 + request.method.utf8.count + request.target.utf8.count + request.body.count + 64 * request.headers.count)
        appendShort(request.method, to: &bytes)
        appendLong(Array(request.target.utf8), to: &bytes)
        appendHeaders(request.headers, to: &bytes)
        appendLong(request.body, to: &bytes)
        return bytes
    }

    /// A batch of the given parts (`part(of:)`), in their order.
    package static func body(ofParts parts: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = [version]
        bytes.reserveCapacity(5 + parts.reduce(0) { $0 + $1.count })
        appendUInt32(UInt32(parts.count), to: &bytes)
        for part in parts { bytes.append(contentsOf: part) }
        return bytes
    }

    /// The requests of a batch, as the handler sees requests: the target split as the server
    /// splits it (never percent-decoded), `Authorization` taken out of the headers, the other
    /// names in lower case.
    public static func requests(from body: [UInt8]) -> Result<[HTTPRequest], Malformed> {
        Result { () throws(Malformed) in
            var reader = Reader(bytes: body)
            let count = try reader.header()
            var requests: [HTTPRequest] = []
            requests.reserveCapacity(count)
            for index in 0..<count {
                let method = try reader.short("method of request \(index)")
                guard !method.isEmpty, method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else {
                    throw Malformed(reason: "request \(index) has no method in capitals")
                }
                let raw = try reader.long("target of request \(index)")
                guard let target = String(validating: raw, as: UTF8.self), target.utf8.first == UInt8(ascii: "/"),
                    !raw.contains(0)
                else { throw Malformed(reason: "request \(index) has a target that is not a path") }
                var authorization: String?
                var headers: [String: String] = [:]
                for (name, value) in try reader.headers("request \(index)") {
                    let lower = name.lowercased()
                    if lower == "authorization" { authorization = value } else { headers[lower] = value }
                }
                let requestBody = try reader.long("body of request \(index)")
                let split = RequestTarget(target)
                requests.append(
                    HTTPRequest(
                        method: method, path: split.path, query: split.arguments, rawQuery: split.rawQuery,
                        authorization: authorization, headers: headers, body: requestBody))
            }
            try reader.end()
            return requests
        }
    }

    // MARK: - Answers

    /// The answer of a batch: `answers` in the order of its requests.
    public static func body(of answers: [Answer]) -> [UInt8] {
        var bytes: [UInt8] = [version]
        appendUInt32(UInt32(answers.count), to: &bytes)
        for answer in answers {
            bytes.append(UInt8(truncatingIfNeeded: answer.status >> 8))
            bytes.append(UInt8(truncatingIfNeeded: answer.status))
            appendHeaders(answer.headers, to: &bytes)
            appendLong(answer.body, to: &bytes)
        }
        return bytes
    }

    /// The answers in a batch's answer, which must hold `expected` of them.
    public static func answers(from body: [UInt8], expected: Int) -> Result<[Answer], Malformed> {
        Result { () throws(Malformed) in
            var reader = Reader(bytes: body)
            let count = try reader.header()
            guard count == expected else { throw Malformed(reason: "\(count) answers for \(expected) requests") }
            var answers: [Answer] = []
            answers.reserveCapacity(count)
            for index in 0..<count {
                let status = Int(try reader.byte("status of answer \(index)")) << 8 | Int(try reader.byte("status of answer \(index)"))
                guard (100...599).contains(status) else { throw Malformed(reason: "answer \(index) has status \(status)") }
                let headers = try reader.headers("answer \(index)")
                answers.append(Answer(status: status, headers: headers, body: try reader.long("body of answer \(index)")))
            }
            try reader.end()
            return answers
        }
    }

    // MARK: - Bytes

    private static func appendUInt32(_ value: UInt32, to bytes: inout [UInt8]) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    /// A text of at most 255 bytes (longer is cut: names and methods are short).
    private static func appendShort(_ text: String, to bytes: inout [UInt8]) {
        let utf8 = text.utf8.prefix(255)
        bytes.append(UInt8(utf8.count))
        bytes.append(contentsOf: utf8)
    }

    private static func appendLong(_ value: [UInt8], to bytes: inout [UInt8]) {
        appendUInt32(UInt32(value.count), to: &bytes)
        bytes.append(contentsOf: value)
    }

    private static func appendHeaders(_ headers: [(name: String, value: String)], to bytes: inout [UInt8]) {
        let kept = headers.prefix(255)
        bytes.append(UInt8(kept.count))
        for (name, value) in kept {
            appendShort(name, to: &bytes)
            appendLong(Array(value.utf8), to: &bytes)
        }
    }

    /// Reads a batch's bytes front to back, every length checked against what is left.
    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        /// The version and the count.
        mutating func header() throws(Malformed) -> Int {
            let version = try byte("version")
            guard version == PeerBatch.version else { throw Malformed(reason: "version \(version), not \(PeerBatch.version)") }
            let count = Int(try uint32("count"))
            guard count <= PeerBatch.maximumCount else {
                throw Malformed(reason: "\(count) requests, more than \(PeerBatch.maximumCount)")
            }
            return count
        }

        mutating func byte(_ what: String) throws(Malformed) -> UInt8 {
            guard offset < bytes.count else { throw Malformed(reason: "ends before the \(what)") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func uint32(_ what: String) throws(Malformed) -> UInt32 {
            guard bytes.count - offset >= 4 else { throw Malformed(reason: "ends before the \(what)") }
            defer { offset += 4 }
            return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
        }

        mutating func take(_ count: Int, _ what: String) throws(Malformed) -> [UInt8] {
            guard bytes.count - offset >= count else { throw Malformed(reason: "the \(what) runs past the end") }
            defer { offset += count }
            return Array(bytes[offset..<offset + count])
        }

        mutating func short(_ what: String) throws(Malformed) -> String {
            let raw = try take(Int(try byte(what)), what)
            guard let text = String(validating: raw, as: UTF8.self) else { throw Malformed(reason: "the \(what) is not UTF-8") }
            return text
        }

        mutating func long(_ what: String) throws(Malformed) -> [UInt8] {
            try take(Int(try uint32(what)), what)
        }

        mutating func headers(_ whose: String) throws(Malformed) -> [(name: String, value: String)] {
            let count = Int(try byte("header count of \(whose)"))
            var headers: [(name: String, value: String)] = []
            for _ in 0..<count {
                let name = try short("header name of \(whose)")
                guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }) else {
                    throw Malformed(reason: "\(whose) has a header name that is not a token")
                }
                let raw = try long("header \(name) of \(whose)")
                guard let value = String(validating: raw, as: UTF8.self), !raw.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 })
                else { throw Malformed(reason: "\(whose) has a header \(name) whose value is not one line of text") }
                headers.append((name, value))
            }
            return headers
        }

        func end() throws(Malformed) {
            guard offset == bytes.count else { throw Malformed(reason: "\(bytes.count - offset) bytes after the last part") }
        }
    }
}
