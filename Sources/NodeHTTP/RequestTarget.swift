/// A request target as the client sent it (origin form, `/path?query`), split but never
/// percent-decoded: an id is checked on the bytes the client sent, so `1%00`, `%31` or `1+` are
/// refused as ids instead of being decoded into another one.
struct RequestTarget: Equatable {
    /// Up to the first `?`.
    var path: String
    /// After the first `?` (without it); empty when there is none.
    var rawQuery: String
    /// The query's `name=value` pairs as sent (a name without `=` has the value ""; for a
    /// repeated name the last wins; empty names are left out).
    var arguments: [String: String]

    init(path: String, rawQuery: String = "", arguments: [String: String] = [:]) {
        self.path = path
        self.rawQuery = rawQuery
        self.arguments = arguments
    }

    /// Splits `raw`. A target without `?` (every hot route) costs one scan and no allocation
    /// beyond the path. The query is split on its bytes (`&`, then the first `=`), never on
    /// characters: no grapheme breaking on a route read thousands of times a second, and an
    /// ASCII separator is a separator whatever follows it.
    init(_ raw: String) {
        guard let mark = raw.utf8.firstIndex(of: UInt8(ascii: "?")) else {
            self.init(path: raw)
            return
        }
        let query = raw[raw.utf8.index(after: mark)...]
        var arguments: [String: String] = [:]
        for pair in query.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            if let equals = pair.firstIndex(of: UInt8(ascii: "=")) {
                guard equals != pair.startIndex else { continue }
                arguments[String(Substring(pair[..<equals]))] = String(Substring(pair[pair.index(after: equals)...]))
            } else {
                arguments[String(Substring(pair))] = ""
            }
        }
        self.init(path: String(raw[..<mark]), rawQuery: String(query), arguments: arguments)
    }
}
