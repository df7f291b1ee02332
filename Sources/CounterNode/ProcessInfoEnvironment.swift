import Foundation

/// The process's environment variables.
public enum ProcessInfoEnvironment {
    public static var current: [String: String] { ProcessInfo.processInfo.environment }
}
