/// How a transaction body wants its transaction to end, with what it found: commit, or roll
/// back — a decision, not an error, so a caller that rolls back on purpose (a flush that found a
/// post missing) throws nothing.
public enum TransactionDecision<Value: Sendable>: Sendable {
    /// Commit, then hand `Value` back.
    case commit(Value)
    /// Roll back, then hand `Value` back.
    case rollBack(Value)

    /// The value, however the transaction ended.
    public var value: Value {
        switch self {
        case .commit(let value), .rollBack(let value): return value
        }
    }
}
