import CounterNode
import Glibc
import TestSupport

// `counter-node serve` whose every flush also records the log entries it applies in an audit
// table (`AuditTable`, named by `--audit-table`), in the flush's transaction: an entry applied
// twice then fails its flush. The several-nodes tests run their nodes so (`ClusterHarness`); the
// node itself has no such setting.

let usage = "usage: AuditedNode serve --audit-table NAME [counter-node serve's options]"
let output = NodeCommand.Output.console
var arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.first == "serve", let flag = arguments.firstIndex(of: "--audit-table"), flag + 1 < arguments.count else {
    output.error(usage)
    exit(NodeCommand.ExitStatus.usage.rawValue)
}
let table = arguments[flag + 1]
arguments.removeSubrange(flag...flag + 1)
do {
    var (configuration, operands) = try NodeConfiguration.parse(
        arguments: Array(arguments.dropFirst()),
        environment: ProcessInfoEnvironment.current)
    guard operands.isEmpty else {
        output.error("unknown argument \"\(operands[0])\" for serve\n\(usage)")
        exit(NodeCommand.ExitStatus.usage.rawValue)
    }
    configuration.writePath.flushAudit = try AuditTable(name: table).flushAudit
    exit(await NodeServer.run(configuration, output: output).rawValue)
} catch {
    output.error("\(error)\n\(usage)")
    exit(NodeCommand.ExitStatus.usage.rawValue)
}
