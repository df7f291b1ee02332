import CounterClient
import CounterWire
import Foundation

// counter-events-example: follows a CounterService node's change events and prints the
// notifications a backend would send ("user 7 liked post 42"), keeping its cursor in a file so a
// restart goes on where it stopped. The shape an app's backend copies: read a page, handle every
// event, then store the page's next_after — so an event is handled at least once (after a crash
// between handling and storing, again: make handling idempotent by the event id), never skipped.
//
//   counter-events-example [--node URL] [--token TOKEN] [--cursor-file PATH] [--until-caught-up]
//
// The token is the node's events token (--events-token) or its admin token; COUNTER_EVENTS_TOKEN
// is read when --token is not given.

struct Options {
    var node = URL(string: "http://127.0.0.1:8080")!
    var token = ProcessInfo.processInfo.environment["COUNTER_EVENTS_TOKEN"]
    var cursorFile = ".data/events-cursor"
    var untilCaughtUp = false

    static let usage = """
        usage: counter-events-example [--node URL] [--token TOKEN] [--cursor-file PATH] [--until-caught-up]
          --node URL           the node to follow (default http://127.0.0.1:8080)
          --token TOKEN        its events token or admin token (default: $COUNTER_EVENTS_TOKEN; none on loopback)
          --cursor-file PATH   where the last event handled is kept (default .data/events-cursor)
          --until-caught-up    exit once no event is left to read, instead of waiting for more
        """

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            if flag == "--help" || flag == "-h" {
                print(Self.usage)
                exit(0)
            }
            if flag == "--until-caught-up" {
                untilCaughtUp = true
                continue
            }
            guard let value = rest.popFirst() else { throw UsageError("\(flag) needs a value") }
            switch flag {
            case "--node":
                guard let url = URL(string: value), url.scheme == "http" || url.scheme == "https" else {
                    throw UsageError("--node must be a URL like http://127.0.0.1:8080")
                }
                node = url
            case "--token": token = value
            case "--cursor-file": cursorFile = value
            default: throw UsageError("unknown option \(flag)")
            }
        }
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The cursor file: the id of the last event handled, in decimal; none yet is 0.
struct CursorFile {
    let path: String

    func read() throws -> Int64 {
        guard let data = FileManager.default.contents(atPath: path) else { return 0 }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let value = Int64(text), value >= 0 else { throw UsageError("\(path) holds \"\(text)\", not an event id") }
        return value
    }

    /// Written whole or not at all: a crash mid-write leaves the previous cursor.
    func write(_ after: Int64) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        let temporary = path + ".new"
        try Data("\(after)\n".utf8).write(to: URL(fileURLWithPath: temporary))
        guard rename(temporary, path) == 0 else { throw UsageError("cannot write \(path): \(String(cString: strerror(errno)))") }
    }
}

func notification(_ event: ChangeEvent) -> String {
    event.liked
        ? "event \(event.id): user \(event.userID) liked post \(event.postID) at \(event.likedAt)"
        : "event \(event.id): user \(event.userID) took back their like of post \(event.postID) at \(event.likedAt)"
}

/// What to do after a failed page: wait and ask again, or stop with an exit status.
enum Failure {
    case retry(String)
    case stop(String, status: Int32)

    init(_ error: CounterClientError) {
        switch error {
        case .server(status: 410, let code, let message, _):
            // Retention pruned events this consumer never read: say so and stop; an operator
            // decides (reconcile what was missed, then start from the oldest kept).
            self = .stop("\(code): \(message)", status: 3)
        case .server(let status, let code, let message, _) where status >= 500 || status == 429:
            self = .retry("\(status) \(code): \(message)")
        case .connection(let why, _):
            self = .retry("the node did not answer (\(why))")
        case .timedOut:
            self = .retry("no answer in time")
        default:
            self = .stop("\(error)", status: 1)
        }
    }
}

func say(_ line: String) {
    FileHandle.standardError.write(Data("counter-events-example: \(line)\n".utf8))
}

func follow(_ options: Options) async throws -> Int32 {
    var configuration = CounterServiceClient.Configuration(baseURL: options.node)
    configuration.eventsToken = options.token
    let client = CounterServiceClient(configuration: configuration)
    let cursor = CursorFile(path: options.cursorFile)
    var after = try cursor.read()
    say("following \(options.node) from event \(after) (cursor in \(options.cursorFile))")
    while true {
        let page: EventsPage
        do {
            page = try await client.eventsPage(after: after, limit: 100, wait: options.untilCaughtUp ? .zero : .seconds(30))
        } catch {
            switch Failure(error) {
            case .retry(let why):
                say("\(why); trying again in 1 s")
                try await Task.sleep(for: .seconds(1))
                continue
            case .stop(let why, let status):
                say(why)
                return status
            }
        }
        // Written at once, a line each, also into a pipe.
        for event in page.events { FileHandle.standardOutput.write(Data((notification(event) + "\n").utf8)) }
        if page.nextAfter != after {
            try cursor.write(page.nextAfter)
            after = page.nextAfter
        }
        if options.untilCaughtUp && page.events.isEmpty { return 0 }
    }
}

let status: Int32
do {
    status = try await follow(try Options(Array(CommandLine.arguments.dropFirst())))
} catch {
    say("\(error)")
    status = 2
}
exit(status)
