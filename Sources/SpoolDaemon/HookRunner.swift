import Foundation
import Logging

/// Runs `--on-item` / `--on-group` commands through `/bin/sh -c`, one at a time and in order, on
/// a queue of their own: a slow hook never stalls a transfer, and a failing one is logged, not fatal.
final class HookRunner: Sendable {
    private let queue = DispatchQueue(label: "spoolfetch-hooks")
    private let logger: Logger
    /// A hook still running after this long is killed.
    static let timeout: Double = 600

    init(logger: Logger) { self.logger = logger }

    /// Runs `command`; `completion` is called on the hook thread once it has ended (whatever its status).
    func run(_ command: String, environment: [String: String], completion: (@Sendable () -> Void)? = nil) {
        let logger = self.logger
        queue.async {
            defer { completion?() }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", command]
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
            let done = DispatchSemaphore(value: 0)
            process.terminationHandler = { _ in done.signal() }
            do {
                try process.run()
            } catch {
                logger.error("hook could not start: \(error)", metadata: ["command": "\(command)"])
                return
            }
            if done.wait(timeout: .now() + Self.timeout) == .timedOut {
                process.terminate()
                done.wait()
                logger.error("hook killed after \(Int(Self.timeout)) s", metadata: ["command": "\(command)"])
                return
            }
            if process.terminationStatus != 0 {
                logger.warning("hook failed", metadata: ["command": "\(command)",
                                                         "status": "\(process.terminationStatus)"])
            }
        }
    }

    /// Blocks until every queued hook has run (at shutdown).
    func waitForAll() { queue.sync {} }
}
