import Foundation
import SpoolCore

/// The one queue for slow file-system work (publishing, group ends, rejections): it runs off the
/// engine thread, so one slow disk never stalls the transfers, and reports back through the inbox.
///
/// It counts the jobs whose answer has not come back, in one place: `submit` counts a job in,
/// and its answer comes back wrapped (`EngineMessage.ioDone`), which the loop counts out before it
/// routes the answer — no room balances the count by hand. A drain or a stop waits for them.
final class IOQueue {
    private let queue = DispatchQueue(label: "spoolfetch-io")
    private let inbox: Inbox
    /// Jobs submitted whose result message the engine has not handled yet (engine thread only).
    private(set) var outstanding = 0

    init(inbox: Inbox) { self.inbox = inbox }

    /// Runs `work` on the I/O queue and posts its result message to the engine.
    func submit(_ work: @escaping @Sendable () -> EngineMessage) {
        outstanding += 1
        let inbox = self.inbox
        queue.async { inbox.post(.ioDone(work())) }
    }

    /// The answer of a job `submit` ran, as the loop receives it: counted out, then routed.
    func answer(_ message: EngineMessage) -> EngineMessage {
        outstanding -= 1
        return message
    }
}
