import CounterNode
import Glibc

// The whole command line lives in the CounterNode library, where tests can reach it.
let status = await NodeCommand.run(
    arguments: Array(CommandLine.arguments.dropFirst()),
    environment: ProcessInfoEnvironment.current)
exit(status.rawValue)
