import Foundation

/// A non-blocking, close-on-exec pipe a loop thread waits on, so another thread can wake it by
/// writing a byte.
enum WakeUpPipe {
    /// Its read and write ends.
    /// - Throws: `HTTPServerError` when no pipe can be made (out of descriptors, say).
    static func make() throws -> (read: Int32, write: Int32) {
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else {
            throw HTTPServerError(message: "cannot make a wake-up pipe: \(String(cString: strerror(errno)))")
        }
        for descriptor in descriptors {
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        }
        return (descriptors[0], descriptors[1])
    }
}
