import Foundation

/// The process's own figures under Prometheus's standard names: CPU seconds used (user and
/// system) and resident memory. The bench reads the CPU counter of every node before and after a
/// run to report CPU per request, wherever the nodes run.
enum ProcessMetrics {
    static func render(into text: inout String) {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        let cpu =
            Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        MetricsText.single(
            "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
            String(format: "%.6f", cpu), into: &text)
        MetricsText.single("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", "\(residentBytes())", into: &text)
    }

    /// Resident pages from `/proc/self/statm` (0 where it cannot be read).
    private static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
