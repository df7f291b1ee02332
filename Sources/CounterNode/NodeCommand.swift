import CounterCore
import Foundation
import OperatorCommands
import Persistence
import PostgresDriver
import UserTokens
import WritePath

/// `counter-node`'s command line: picks the subcommand, reads the configuration, runs it.
public enum NodeCommand {
    /// Exit statuses, as `--help` documents them.
    public typealias ExitStatus = OperatorCommands.ExitStatus
    /// Where a command writes: results to `standard`, problems to `error`.
    public typealias Output = CommandOutput

    /// Runs `arguments` (without the program name) and returns the exit status.
    public static func run(arguments: [String], environment: [String: String], output: Output = .console) async -> ExitStatus {
        let print = output.standard
        let printError = output.error
        guard let subcommand = arguments.first, !subcommand.hasPrefix("-") || subcommand == "--help" || subcommand == "-h" else {
            printError("missing subcommand\n\n\(usage)")
            return .usage
        }
        if subcommand == "--help" || subcommand == "-h" || subcommand == "help" {
            print(usage)
            return .success
        }
        guard ["migrate", "serve", "user-token"].contains(subcommand) || OperatorCommand.subcommands.contains(subcommand) else {
            printError("unknown subcommand \"\(subcommand)\"\n\n\(usage)")
            return .usage
        }
        var rest = Array(arguments.dropFirst())
        // `migrate --events-publication`: also the publication for logical replication.
        let eventsPublication = subcommand == "migrate" && rest.contains("--events-publication")
        if eventsPublication { rest.removeAll { $0 == "--events-publication" } }
        if rest.contains("--help") || rest.contains("-h") {
            print(usage)
            return .success
        }
        let configuration: NodeConfiguration
        let operands: [String]
        do {
            (configuration, operands) = try NodeConfiguration.parse(arguments: rest, environment: environment)
        } catch {
            printError("\(error.message)\n(see counter-node --help)")
            return .usage
        }
        if OperatorCommand.subcommands.contains(subcommand) {
            let command: OperatorCommand
            do {
                command = try OperatorCommand(
                    subcommand: subcommand, operands: operands, nodeURL: configuration.nodeURL,
                    adminToken: configuration.tokens.admin, output: output)
            } catch {
                printError("\(error.message)\n(see counter-node --help)")
                return .usage
            }
            return await command.run()
        }
        if subcommand == "user-token" { return userToken(configuration, operands: operands, output: output) }
        if let unknown = operands.first {
            printError("unknown argument \"\(unknown)\" for \(subcommand)\n(see counter-node --help)")
            return .usage
        }
        if subcommand == "migrate" { return await migrate(configuration, eventsPublication: eventsPublication, output: output) }
        return await NodeServer.run(configuration, output: output)
    }

    static func migrate(_ configuration: NodeConfiguration, eventsPublication: Bool = false, output: Output) async -> ExitStatus {
        let pool = PostgresPool(configuration: configuration.postgres)
        do {
            let report = try await SchemaMigrator.migrate(pool, progress: { output.standard($0) })
            if report.applied.isEmpty {
                output.standard("schema is current (version \(report.currentVersion)); nothing to do")
            } else {
                output.standard(
                    "applied migrations \(report.applied.map(String.init).joined(separator: ", ")); schema is at version \(report.currentVersion)")
            }
            if eventsPublication {
                let publication = try await LikeEvents(pool: pool).createPublication()
                output.standard(
                    publication.created
                        ? "created the publication \(LikeEvents.publication) (inserts into counter_like_events) for logical replication"
                        : "the publication \(LikeEvents.publication) exists already; nothing to do")
                if publication.walLevel != "logical" {
                    output.error(
                        "note: wal_level is \(publication.walLevel): a replication slot needs wal_level = logical (postgresql.conf, then a restart)")
                }
            }
            await pool.close()
            return .success
        } catch {
            await pool.close()
            output.error("migrate failed: \(error)")
            return .failure
        }
    }

    /// `user-token --user U [--lifetime S]`: an HS256 token for user U, signed with
    /// `--user-token-secret` (with `--user-token-issuer`/`--user-token-audience` when set), for
    /// trying the user routes and for load tests. An app's tokens come from its identity provider.
    static func userToken(_ configuration: NodeConfiguration, operands: [String], output: Output) -> ExitStatus {
        var user: Int64?
        var lifetime = 3_600
        var index = 0
        while index < operands.count {
            let operand = operands[index]
            guard index + 1 < operands.count, ["--user", "--lifetime"].contains(operand) else {
                output.error("unknown argument \"\(operand)\" for user-token (usage: user-token --user U [--lifetime SECONDS])")
                return .usage
            }
            let value = operands[index + 1]
            if operand == "--user" {
                guard let parsed = EntityID.parse(value) else {
                    output.error("--user \(value): must be a positive 64-bit integer")
                    return .usage
                }
                user = parsed
            } else {
                guard let seconds = Int(value), (1...31_536_000).contains(seconds) else {
                    output.error("--lifetime \(value): must be a whole number of seconds from 1 to 31536000")
                    return .usage
                }
                lifetime = seconds
            }
            index += 2
        }
        guard let user else {
            output.error("user-token needs --user U")
            return .usage
        }
        guard let secret = configuration.users.secret else {
            output.error("user-token signs with --user-token-secret (or COUNTER_USER_TOKEN_SECRET), which is not set")
            return .usage
        }
        var claims: [String: Any] = [:]
        if let issuer = configuration.users.rules.issuer { claims["iss"] = issuer }
        if let audience = configuration.users.rules.audience { claims["aud"] = audience }
        var named = claims
        named[configuration.users.rules.userClaim] = String(user)
        named["exp"] = Int64(Date().timeIntervalSince1970) + Int64(lifetime)
        named["iat"] = Int64(Date().timeIntervalSince1970)
        output.standard(TokenSigner(secret: secret).token(claims: named))
        return .success
    }

    static let usage = """
        counter-node — the CounterService node

        Usage: counter-node <subcommand> [settings]

        Subcommands:
          migrate        create what is missing of the schema (posts.likes_count, likes, the
                         service's bookkeeping); safe to run again and on an app's database.
                         The newest-first indexes of likes (by post, by user) are built with
                         CREATE INDEX CONCURRENTLY: writes go on while they build, with
                         progress printed; an interrupted build is dropped and redone.
                         --events-publication also creates the publication counter_like_events
                         (the change events' inserts) for logical replication consumers
          serve          run the node: HTTP API, write path, flusher; SIGTERM/SIGINT stop it
                         after flushing everything to PostgreSQL (a second signal exits at once)

          user-token --user U [--lifetime S]
                         print an HS256 token for end user U (valid S seconds, default 3600),
                         signed with --user-token-secret, for trying the user routes and load
                         tests; an app's tokens come from its identity provider

        Operator commands (talk to a running node: --node, --admin-token; add --json for the
        node's JSON instead of text; progress goes to standard error). flush, stats, reconcile
        and dead-letters act on the whole cluster of the node given (every live node, answers
        merged; a node that does not answer, or slots no live node owns, are named and the exit
        status is 7); --this-node acts on that node alone. A node that is the only writer is a
        cluster of one.
          flush [--wait] [--timeout S] [--this-node]
                         flush everything acknowledged so far to PostgreSQL, on every node;
                         --wait returns once PostgreSQL has it (showing the backlog every half
                         second), or after S seconds (default 60) with status 6
          inspect <post> [--user U]
                         the post in Redis and PostgreSQL side by side (count, membership
                         of user U, pending changes, last flush) and a verdict: agree, pending
                         (differences explained by changes waiting for the flusher) or drift
          stats [--this-node]
                         per node and in total: pending changes, oldest pending age, seconds
                         since the last flush, group commits, flushes, retries, dead letters,
                         errors, memory; with --this-node, per shard of that node, and per
                         Redis node: slots served, connected, pipelines, errors,
                         MOVED/ASK/TRYAGAIN/CLUSTERDOWN answers
          reconcile --post P | --all [--repair] [--this-node]
                         recount likes_count from the likes rows and compare Redis with them
                         (each post on the node that owns its slot);
                         --all goes through every post in batches of 1,000 with progress;
                         --repair sets likes_count from the rows, each post locked so it cannot
                         race the flusher, and has Redis reload each post whose Redis count
                         differs from the rows with nothing pending (after a Redis failover
                         lost writes that PostgreSQL already has)
          dead-letters list | replay [--id ID …] | drop --id ID [--id ID …] [--this-node]
                         changes PostgreSQL refused for good, with the reason (one list for the
                         whole cluster); replay puts them back into the write path (all, or the
                         given ids), each on the node that owns its post's slot; drop deletes them
          cluster status | drain NODE [--undo]
                         status: the nodes (incarnation, lease, draining, slots and their
                         ranges, epochs), the map's version and the moves still to come;
                         drain: NODE hands its slots to the others and takes none until
                         --undo (it keeps answering, by forwarding)

        Settings (flags win over environment variables):
        \(NodeConfiguration.settingsHelp)

        Exit status: 0 success; 1 the command failed (see its message); 2 invalid command line or
        setting, nothing done; 3 no node answered at --node; 4 the node refused the admin token;
        5 inspect or reconcile found drift (reconcile: drift left unrepaired); 6 flush --wait
        timed out; 7 a command on the whole cluster left part of it out (named on standard error).
        """
}
