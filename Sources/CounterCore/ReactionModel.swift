/// How a deployment counts reactions: which kinds exist, whether a user holds one kind of a
/// post or several, and the caps. Chosen per deployment (`--reactions`,
/// `--reactions-per-user`, `--reaction-kinds-per-post`, `--reaction-summary-kinds`); every node
/// of a deployment must hold the same one.
///
/// The default (`likesOnly`) is the service as it always was: one kind, `like`.
public struct ReactionModel: Sendable, Hashable, CustomStringConvertible {
    /// Which kinds a request may name.
    public enum Kinds: Sendable, Hashable {
        /// These, and no other (in the order given: the order `--help` and errors list them).
        case fixed([ReactionKind])
        /// Any valid name (custom emoji shortcodes), at most `kindsPerPost` distinct on a post.
        case open
    }

    /// How many kinds one user may hold on one post.
    public enum PerUser: String, Sendable, Hashable, CaseIterable {
        /// At most one: a new kind replaces the old in one decision (Facebook, LinkedIn, Misskey).
        case one
        /// Each kind its own toggle (Slack, GitHub, Discord).
        case many
    }

    public var kinds: Kinds
    public var perUser: PerUser
    /// Most distinct kinds a post may hold in an open set (a new kind beyond it is refused).
    public var kindsPerPost: Int
    /// Most kinds a feed's summary gives per post (the largest counts first).
    public var summaryKinds: Int

    /// Discord's cap on distinct emoji per message, the default cap here.
    public static let defaultKindsPerPost = 20
    public static let defaultSummaryKinds = 20

    public init(kinds: Kinds, perUser: PerUser, kindsPerPost: Int = defaultKindsPerPost, summaryKinds: Int = defaultSummaryKinds) {
        self.kinds = kinds
        self.perUser = perUser
        self.kindsPerPost = kindsPerPost
        self.summaryKinds = summaryKinds
    }

    /// The service as it always was: the one kind `like` (`one` and `many` mean the same then).
    public static let likesOnly = ReactionModel(kinds: .fixed([.like]), perUser: .one)

    /// Whether this is `likesOnly`: no reaction but `like`, every route, table and event as before.
    public var isLikesOnly: Bool {
        guard case .fixed(let list) = kinds else { return false }
        return list.count == 1 && list[0].isLike
    }

    /// Whether a request may name `kind` (the cap per post aside).
    public func allows(_ kind: ReactionKind) -> Bool {
        switch kinds {
        case .fixed(let list): return list.contains(kind)
        case .open: return true
        }
    }

    /// Whether one user holds at most one kind of a post.
    public var isOnePerUser: Bool { perUser == .one && !isLikesOnly }

    /// The settings as one line (`like,love one 20/20`, `open many 20/20`): what nodes compare
    /// to know they agree, and what the log prints.
    public var description: String {
        let kindsText: String
        switch kinds {
        case .fixed(let list): kindsText = list.map(\.name).joined(separator: ",")
        case .open: kindsText = "open"
        }
        return "\(kindsText) \(perUser.rawValue) \(kindsPerPost)/\(summaryKinds)"
    }

    /// The settings as the nodes of a deployment compare them: `like` for likes only (whatever
    /// the per-user and cap settings, which mean nothing then), else `description`.
    public var agreementText: String { isLikesOnly ? "like" : description }

    /// The kinds `text` lists (`like,love,haha`), or `open`; `nil` with the reason for anything
    /// else (a bad name, a name twice, an empty list).
    public static func parseKinds(_ text: String) -> Result<Kinds, ReactionSettingError> {
        if text == "open" { return .success(.open) }
        var list: [ReactionKind] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let kind = ReactionKind(part) else {
                return .failure(ReactionSettingError(message: "'\(part)' is not a reaction kind: a name is 1-32 characters of a-z, 0-9 and _"))
            }
            guard !list.contains(kind) else {
                return .failure(ReactionSettingError(message: "reaction kind '\(kind)' is listed twice"))
            }
            list.append(kind)
        }
        guard !list.isEmpty else { return .failure(ReactionSettingError(message: "no reaction kind listed")) }
        return .success(.fixed(list))
    }
}

/// Why a reaction setting was refused.
public struct ReactionSettingError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String

    public init(message: String) {
        self.message = message
    }

    public var description: String { message }
}
