import Foundation

/// Where a command writes: results to `standard`, problems to `error`.
public struct CommandOutput: Sendable {
    public var standard: @Sendable (String) -> Void
    public var error: @Sendable (String) -> Void

    public init(standard: @escaping @Sendable (String) -> Void, error: @escaping @Sendable (String) -> Void) {
        self.standard = standard
        self.error = error
    }

    /// The process's standard output and standard error.
    /// (Written unbuffered: a supervisor reading a pipe sees each line at once.)
    public static let console = CommandOutput(
        standard: { FileHandle.standardOutput.write(Data(($0 + "\n").utf8)) },
        error: { FileHandle.standardError.write(Data("counter-node: \($0)\n".utf8)) })
}
