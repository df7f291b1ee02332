/// A request body's numbers rewritten as plain integers where they are whole. JSON Schema's
/// `integer` is a value, not a spelling: `8019.0` and `8.019e3` are the integer 8019, and the API
/// document's ids and counts are integers — so the API takes them as such. The rewrite works on
/// the digits (never through a `Double`), so `9007199254740993.0` stays exactly that id.
///
/// Pure: bytes in, an outcome out. Numbers inside strings are left alone, and so is a number
/// that is not valid JSON (the decoder then refuses the body for that).
enum WholeNumbers {
    enum Outcome: Equatable {
        /// Every number was written as a plain integer already (or the body has none).
        case unchanged
        /// The body with each whole number written as a plain integer; a whole number beyond
        /// 20 digits is written as 21 digits, out of a 64-bit integer's range either way.
        case rewritten([UInt8])
        /// A number with a fraction (`1.5`, `5e-1`): not an id or a count in any spelling.
        case fraction
    }

    static func normalized(_ body: [UInt8]) -> Outcome {
        var output: [UInt8]?
        var index = 0
        var inString = false
        var escaped = false
        while index < body.count {
            let byte = body[index]
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                output?.append(byte)
                index += 1
                continue
            }
            guard byte == UInt8(ascii: "-") || isDigit(byte) else {
                if byte == UInt8(ascii: "\"") { inString = true }
                output?.append(byte)
                index += 1
                continue
            }
            var end = index
            while end < body.count, isNumberByte(body[end]) { end += 1 }
            let token = body[index..<end]
            switch integerSpelling(of: token) {
            case .plain:
                output?.append(contentsOf: token)
            case .whole(let digits):
                if output == nil { output = Array(body[..<index]) }
                output!.append(contentsOf: digits)
            case .fraction:
                return .fraction
            }
            index = end
        }
        return output.map(Outcome.rewritten) ?? .unchanged
    }

    private enum Spelling {
        /// A plain integer, or not a valid JSON number: kept as it is.
        case plain
        case whole([UInt8])
        case fraction
    }

    /// What a number token (`-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`) is.
    private static func integerSpelling(of token: ArraySlice<UInt8>) -> Spelling {
        var index = token.startIndex
        let negative = token[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        let integerStart = index
        while index < token.endIndex, isDigit(token[index]) { index += 1 }
        let integerDigits = token[integerStart..<index]
        guard !integerDigits.isEmpty, integerDigits.count == 1 || integerDigits.first != UInt8(ascii: "0") else { return .plain }
        var fractionDigits = token[index..<index]
        if index < token.endIndex, token[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < token.endIndex, isDigit(token[index]) { index += 1 }
            fractionDigits = token[start..<index]
            guard !fractionDigits.isEmpty else { return .plain }
        }
        var exponent = 0
        var hasExponent = false
        if index < token.endIndex, token[index] == UInt8(ascii: "e") || token[index] == UInt8(ascii: "E") {
            hasExponent = true
            index += 1
            var exponentNegative = false
            if index < token.endIndex, token[index] == UInt8(ascii: "+") || token[index] == UInt8(ascii: "-") {
                exponentNegative = token[index] == UInt8(ascii: "-")
                index += 1
            }
            let start = index
            while index < token.endIndex, isDigit(token[index]) {
                // Capped: beyond a million the value is out of range (or a fraction) all the same.
                exponent = min(exponent * 10 + Int(token[index] - UInt8(ascii: "0")), 1_000_000)
                index += 1
            }
            guard index > start else { return .plain }
            if exponentNegative { exponent = -exponent }
        }
        guard index == token.endIndex else { return .plain }
        guard !fractionDigits.isEmpty || hasExponent else { return .plain }

        // The value is digits × 10^scale.
        var digits = Array(integerDigits) + Array(fractionDigits)
        let scale = exponent - fractionDigits.count
        guard let firstNonZero = digits.firstIndex(where: { $0 != UInt8(ascii: "0") }) else { return .whole([UInt8(ascii: "0")]) }
        digits.removeFirst(firstNonZero)
        if scale < 0 {
            let dropped = -scale
            guard dropped < digits.count, digits.suffix(dropped).allSatisfy({ $0 == UInt8(ascii: "0") }) else { return .fraction }
            digits.removeLast(dropped)
        } else if scale > 0 {
            digits.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: min(scale, max(0, 21 - digits.count))))
        }
        return .whole((negative ? [UInt8(ascii: "-")] : []) + digits)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func isNumberByte(_ byte: UInt8) -> Bool {
        isDigit(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E")
            || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-")
    }
}
