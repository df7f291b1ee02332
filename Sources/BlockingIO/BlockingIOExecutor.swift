import Foundation

/// A serial executor that runs its jobs on one dedicated thread of its own.
///
/// libpq and hiredis make blocking calls. A connection actor whose executor is one of these runs
/// those calls on its own thread, so they never block Swift's cooperative thread pool, and the
/// connection handle is only ever touched from that thread.
// @unchecked Sendable: the job queue is guarded by `condition`; the thread is started once in init.
public final class BlockingIOExecutor: SerialExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false
    private let name: String

    /// Starts the thread; it runs until `shutdown()`.
    /// - Parameter name: the thread's name as `ps -L` and debuggers show it (at most 15 bytes).
    public init(name: String) {
        self.name = name
        let thread = Thread { [self] in self.runJobs() }
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Lets the thread end once the jobs already queued have run. Jobs queued afterwards still run.
    public func shutdown() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    private func runJobs() {
        Thread.current.name = String(name.prefix(15))
        var batch: [UnownedJob] = []
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty && stopping {
                condition.unlock()
                return
            }
            swap(&batch, &jobs)
            condition.unlock()
            for job in batch { job.runSynchronously(on: asUnownedSerialExecutor()) }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
