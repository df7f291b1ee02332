import Foundation

/// counter-bench: the load-test harness. Today it measures the persistence layer on its own;
/// the HTTP scenarios and the seed-sql baseline come with the node.
@main
enum CounterBench {
    static func main() async {
        let status = await BenchCommand.run(
            arguments: Array(CommandLine.arguments.dropFirst()),
            environment: ProcessInfo.processInfo.environment)
        exit(status)
    }
}
