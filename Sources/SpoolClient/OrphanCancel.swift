import Foundation
import SpoolRequest
import SpoolStore

/// `spoolfetch cancel R` when no running daemon holds R but a dead worker's folder in `active/`
/// does (cron mode: the last `run --due` was killed, or the machine went down). Without this the
/// request could only be ended by starting a daemon that would first fetch it.
///
/// The command takes the dead worker's claims over exactly as a starting worker does
/// (`SpoolStore.adoptOrphans`, which decides who is dead: a live worker's folder is never taken),
/// under the start-up lock so that no worker starts meanwhile. It then ends the request the way
/// a daemon ends a cancelled one: every item not yet published or failed fails with code
/// `cancelled`; items already published stay published (their files and markers are left
/// alone); the group marker is written and the request filed in `failed/` beside its `.error`
/// (`SpoolStore.endGroup`). The group hook runs at the next daemon start (its journal stays).
/// The other requests of that worker stay claimed where they are, for the next worker to adopt.
enum OrphanCancel {
    static func cancel(request: String, id: String, spool: String) throws(OperatorError) -> ControlResult {
        let layout: SpoolLayout
        let registration: WorkerRegistration
        do {
            layout = try SpoolLayout(root: spool)
            registration = try WorkerRegistration(layout: layout)
        } catch { throw .io("\(error)") }
        defer { registration.endStartUp() }
        let store = SpoolStore(layout: layout)
        defer { store.releaseWorkerFolder() }
        let adopted = store.adoptOrphans()
        guard let mine = adopted.first(where: { $0.name == request }) else {
            throw .refused("\(request) is held by a worker that is still alive (in active/); cancel it once that daemon reports it (spoolfetch status), or stop that worker first")
        }
        let claim: ClaimedRequest
        switch store.takeAdopted(mine) {
        case .claim(let c): claim = c
        case .filed: throw ControlClient.ended(id: id, request: request, verb: .cancel, spool: spool)
        case .gone: throw .unknownID(id)
        }
        let file: RequestFile
        do {
            let fd = try claim.openFile()
            defer { close(fd) }
            let bytes = try FileHandle(fileDescriptor: fd, closeOnDealloc: false).readToEnd() ?? Data()
            file = try RequestParser.parse(fileName: request, bytes: [UInt8](bytes))
        } catch { throw .io("cannot read active/…/\(request): \(error)") }

        let journaled = store.readJournals().states
        let drains = SpoolOverview.drainRecords(statusFolder: layout.status.path)
        var items: [GroupItem] = []
        var failures: [ItemFailure] = []
        var cancelled: [String] = []
        for item in file.items {
            let base = SpoolStore.stagingBase(request, index: item.index)
            let own = store.readState(base).flatMap { $0.request == request && $0.index == item.index ? $0 : nil }
            let dead = journaled[base].flatMap { $0.request == request && $0.index == item.index ? $0 : nil }
            let state = [own, dead].compactMap { $0 }.first { s in
                store.publishedFile(of: s).map { layout.final.exists($0) } ?? false
            } ?? own ?? dead
            let url = URLQuery.stripped(item.url.string)
            if let state, let published = store.publishedFile(of: state), layout.final.exists(published) {
                let marker = store.hasMarker(ofPublished: published) ? (store.markerPath(ofPublished: published) as NSString).lastPathComponent : nil
                items.append(GroupItem(index: item.index, url: url, outcome: "published", file: published, marker: marker))
            } else if let state, state.phase == .failed, let failure = state.failure {
                failures.append(failure)
                items.append(GroupItem(index: item.index, url: failure.url, outcome: "failed", code: failure.code, message: failure.message))
            } else {
                var failure = ItemFailure(index: item.index, url: url, name: item.name, code: "cancelled",
                                          message: "cancelled by the operator (no daemon was running: filed by spoolfetch cancel)",
                                          attempts: state?.attempts ?? 0)
                failure.cause = OrphanCause.cause(id: "\(request)#\(item.index)", hostKey: item.url.hostKey,
                                                  attempts: failure.attempts, drains: drains)
                failures.append(failure)
                cancelled.append("\(request)#\(item.index)")
                items.append(GroupItem(index: item.index, url: url, outcome: "failed", code: failure.code, message: failure.message,
                                       cause: failure.cause))
            }
        }
        guard !cancelled.isEmpty else {
            throw .refused("\(request) has no item left to cancel: each was published or failed already; the next daemon files it")
        }
        // Past `listedFailuresLimit` failed items, counted and listed in the items files, as the
        // daemon's group end does.
        let large = failures.count > SpoolStore.listedFailuresLimit
        var marker = GroupMarker(group: file.group, request: request, finishedAt: RFC3339.format(Date()),
                                 items: large ? items.filter { $0.outcome != "failed" } : items)
        var record = ErrorRecord(request: request, code: "items-failed",
                                 message: "\(failures.count) of \(file.items.count) items failed"
                                    + (failures.count < file.items.count ? "; the others were published" : ""),
                                 items: large ? nil : failures)
        var lines: FailedItemLines? = nil
        if large {
            marker.failed = failures.count
            marker.endings = EndingCount.counting(failures)
            record.endings = marker.endings
            let listed = failures
            lines = { writer throws(StoreError) in for failure in listed { try writer.append(failure.jsonBytes()) } }
        }
        do {
            // The journal's lock goes with this process: the next daemon runs the group hook.
            let (markerPath, _) = try store.endGroup(claim, marker: marker, failure: record, failedItems: lines)
            for item in file.items { store.removeStaging(SpoolStore.stagingBase(request, index: item.index)) }
            return ControlResult(ok: true,
                                 message: "cancelled \(cancelled.count) item(s) of \(request), held by a worker that is gone; filed in failed/ (group marker \(markerPath))",
                                 items: Array(cancelled.prefix(SpoolStore.listedFailuresLimit)), state: "cancelled")
        } catch {
            throw .io("could not file \(request) as cancelled: \(error)")
        }
    }
}
