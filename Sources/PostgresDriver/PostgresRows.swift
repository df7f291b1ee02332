/// The rows a statement returned, copied out of libpq's result in text format.
public struct PostgresRows: Sendable, Sequence {
    /// Column names in order.
    public let columns: [String]
    /// Row values in text format; `nil` is SQL NULL.
    public let rows: [[String?]]
    /// Rows the statement affected (for INSERT/UPDATE/DELETE), from the command tag.
    public let affectedRows: Int

    /// Rows as given (libpq's results are read into this; tests build them by hand).
    public init(columns: [String], rows: [[String?]], affectedRows: Int = 0) {
        self.columns = columns
        self.rows = rows
        self.affectedRows = affectedRows
    }

    public var count: Int { rows.count }
    public var isEmpty: Bool { rows.isEmpty }

    public func makeIterator() -> some IteratorProtocol<PostgresRow> {
        rows.lazy.map { PostgresRow(columns: columns, values: $0) }.makeIterator()
    }

    /// The first row, if any.
    public var first: PostgresRow? { rows.first.map { PostgresRow(columns: columns, values: $0) } }
}

/// One row, read by column position.
public struct PostgresRow: Sendable {
    public let columns: [String]
    public let values: [String?]

    /// The value at `column` as text, or `nil` for NULL.
    public func string(_ column: Int) -> String? { values[column] }

    /// The value at `column` as an integer.
    /// - Throws: `PostgresError(.unexpectedResult)` when it is NULL or not an integer.
    public func int64(_ column: Int) throws(PostgresError) -> Int64 {
        guard let text = values[column], let value = Int64(text) else {
            throw PostgresError(
                code: .unexpectedResult,
                message: "column \(columns[column]) is \(values[column] ?? "NULL"), not an integer")
        }
        return value
    }

    /// The value at `column` as an integer, or `nil` for NULL.
    public func optionalInt64(_ column: Int) throws(PostgresError) -> Int64? {
        values[column] == nil ? nil : try int64(column)
    }

    /// The value at `column` as a boolean (`t`/`f`).
    public func bool(_ column: Int) throws(PostgresError) -> Bool {
        switch values[column] {
        case "t": return true
        case "f": return false
        default:
            throw PostgresError(
                code: .unexpectedResult,
                message: "column \(columns[column]) is \(values[column] ?? "NULL"), not a boolean")
        }
    }
}
