/// A route's query arguments as sent (nothing percent-decoded), checked the same way everywhere:
/// unknown names refused, whole numbers in plain digits. Pure.
enum QueryArguments {
    /// Refuses the first name of `query` (in order) that is not in `known`, naming what the route takes.
    static func refuseUnknown(_ query: [String: String], known: [String], route: String) throws(RequestError) {
        if query.keys.allSatisfy(known.contains) { return }
        for name in query.keys.sorted() where !known.contains(name) {
            throw RequestError(
                code: .invalidArgument,
                message: "unknown query argument \"\(name)\"; \(route) takes \(known.joined(separator: ", "))")
        }
    }

    /// `text` as a whole number within `range`, in plain ASCII digits only (no sign, no spaces).
    static func wholeNumber(_ text: String, in range: ClosedRange<Int64>) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            let value = Int64(text), range.contains(value)
        else { return nil }
        return value
    }
}
