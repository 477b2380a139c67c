import Foundation
import SpoolMetrics
import Logging
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolTransfer

/// Where item events go in and actions come out: each event goes to the item's lifecycle, and
/// each action it returns is carried out by the part that owns it (scheduler, transfer driver,
/// space gate, publish pipeline, item endings). The decisions are all in `ItemLifecycle`.
extension Engine {
    /// Hands `event` to the item's lifecycle and carries out the actions; returns them.
    @discardableResult
    func send(_ event: ItemEvent, to record: ItemRecord) -> [ItemAction] {
        let now = Date()
        var context = LifecycleContext(now: now, stopping: stopping, jitter: jitter.next(),
                                       canRefreshURL: hooks.refreshHook != nil && record.refreshedInAttempt != record.attempts
                                           && record.sourceIndex == 0)
        if record.summary.hasMirrors {
            context.nextSource = record.sources?.hasNext ?? true
            context.hostDownLong = hostDownLong(record, now: now)
        }
        // The phase it leaves: its actions may still need what it held (the part a stopped
        // transfer keeps, the one a verified body is published from). It is let go, and a part
        // no phase holds any more closed, when this call returns.
        let leaving = record.lifecycle.state
        let actions = record.lifecycle.handle(event, policy: policy, context: context)
        if !actions.isEmpty { table.note(record) }
        for action in actions { perform(action, for: record, leaving: leaving) }
        if !actions.isEmpty { status.markDirty() }
        return actions
    }

    private func perform(_ action: ItemAction, for record: ItemRecord, leaving: ItemLifecycle.State) {
        switch action {
        case .schedule:
            scheduler.submit(ScheduledItem(key: record.key, hostKey: record.hostKey,
                                           priority: SchedulingPriority(record.priority),
                                           earliestStart: record.earliestStart,
                                           discretionary: record.discretionary))
        case .unschedule:
            scheduler.remove(record.key)
        case .releaseSlot:
            scheduler.finished(record.key)
        case .startTransfer:
            // The item's URL, name and headers come back from the request file only now.
            let item: RequestItem
            do { item = try record.load(keepingOpenIn: requestFile) } catch {
                couldNotStart(record, StartProblem(errno: error.errno), "\(error)")
                return
            }
            if holdForURLExpiry(record, item, now: Date()) { return }
            // Read at each start (a rotated secret is used at once) and never kept.
            var credentials: [RequestHeader] = []
            if let name = item.credentials {
                do throws(PrivateFile.Refused) {
                    credentials = try PrivateFile.credentialHeaders(directory: configuration.credentialsDir, name: name)
                } catch {
                    send(.refusedBeforeRequest(code: "credentials", message: error.description), to: record)
                    return
                }
            }
            if let upload = item.upload {
                startUpload(record, item, upload, credentials: credentials)
                return
            }
            do {
                try driver.start(record, item, credentials: credentials)
            } catch {
                couldNotStart(record, StartProblem(errno: error.errno), "\(error)")
            }
        case .stopTransfer:
            driver.stop(record, part: leaving.part)
        case .refreshURL(let reason):
            askForFreshURL(record, reason: reason)
        case .nextSource:
            moveToNextSource(record, part: leaving.part)
        case .retry(let at, let holdHost):
            // The server asked for a pause (429/503): back off the whole host, not just this item.
            if holdHost { scheduler.holdHost(record.hostKey, until: at) }
            scheduler.retry(record.key, notBefore: at)
            logger.info("transfer failed; will retry", metadata: [
                "item": "\(record.id)", "url": "\(urls.shown(record.loaded?.url.string ?? ""))", "error": "\(record.lastFailure.map { "\($0)" } ?? "")",
                "attempt": "\(record.attempts)", "retry-in": "\(String(format: "%.1f", max(0, at.timeIntervalSinceNow)))s"])
        case .waitForSpace(let reason):
            space.wait(record, reason: reason, running: driver.running.values)
            metrics.metrics.spaceWait()
        case .leaveSpaceQueue:
            space.leave(record)
        case .discardPartial:
            record.discardPartial()
        case .saveResumeState:
            driver.saveResumeState(record, part: leaving.part)
        case .publish(let digest):
            publish(record, digest: digest, part: leaving.part)
        case .retryPublish(let at):
            guard case .publishing(let job?) = record.lifecycle.state else { return }
            logger.warning("publishing failed; will try again at \(RFC3339.format(at))", metadata: ["item": "\(record.id)"])
            publishing.retry(job, at: at)
        case .fail(let code, let message):
            fail(record, code: code, message: message, wasPublishing: leaving.phase == .publishing)
        case .ended:
            itemEnded(record)
        case .hostUnreachable(let error):
            hostUnreachable(record, error: error)
        }
    }

    private func couldNotStart(_ record: ItemRecord, _ problem: StartProblem, _ message: String) {
        if problem == .shortOfResources {
            logger.warning("could not open the item's files (out of descriptors or memory); it waits and tries again",
                           metadata: ["item": "\(record.id)", "error": "\(message)"])
        }
        send(.couldNotStart(problem, message: message), to: record)
    }

    // MARK: Intake

    func claim(_ name: String) {
        guard !stopping else { return }
        switch intake.claim(name) {
        case .claimed(let claim): accept(claim, adopted: false)
        case .rejected:
            summary.rejected += 1
            metrics.metrics.requestRejected()
        case .failed:
            summary.unclaimed += 1
            // Only a drain's last listing asks; a daemon that runs for months keeps no such set.
            if drainWatch.enabled { unclaimable.insert(name) }
        case .none: break
        }
    }

    /// A claimed (or adopted) request: parsed whole, then each item queued — or, when adopted,
    /// recovered from what the spool says about it.
    func accept(_ claim: ClaimedRequest, adopted: Bool) {
        let index: RequestIndex
        var uploads: [Int: OutgoingIdentity] = [:]
        switch intake.parse(claim, checkUploads: !adopted) {
        case .indexed(let indexed, let found): index = indexed; uploads = found
        case .rejected:
            summary.rejected += 1
            metrics.metrics.requestRejected()
            if adopted { ledger.adoptionDropped() }
            return
        case .unreadable:
            summary.unclaimed += 1
            if adopted { ledger.adoptionDropped() }
            return
        }
        if !adopted { metrics.metrics.requestClaimed() }
        let now = Date()
        if !adopted { warnOfURLsExpiringBeforeStart(index, request: claim.name, now: now) }
        let request = table.add(claim: claim, index: index) { _ in
            ItemLifecycle(firstQueued: now)
        }
        if adopted { ledger.adopted(request) }
        let recovery = Recovery(store: store, logger: logger, stagingNames: adoptedStagingNames)
        var confirmed: [ItemState] = []
        for record in request.items {
            if let identity = uploads[record.index] { record.upload.identity = identity }
            guard adopted else { send(.submitted, to: record); continue }
            if recoverUpload(record) { itemEnded(record); continue }
            switch recovery.recover(record, deadStates: ledger.deadStates) {
            case .schedule: send(.submitted, to: record)
            case .ended(let confirm):
                if let confirm { confirmed.append(confirm) }
                itemEnded(record)
            case .publish(let job):
                table.note(record)
                publishing.enqueue(job)
            }
        }
        if !confirmed.isEmpty {
            // Not synced: a power cut may lose it, and those items are then delivered again.
            do {
                let journal = try store.writeJournal(confirmed)
                journal.closeDescriptor()
                ledger.attach(journal, to: request)
            } catch {
                logger.warning("could not journal the items found published; a consumer taking them before a crash would get them again: \(error)",
                               metadata: ["request": "\(claim.name)"])
            }
        }
        logger.debug("claimed a request", metadata: ["request": "\(claim.name)", "items": "\(request.items.count)",
                                                     "group": "\(request.group)"])
        if request.open == 0 { groups.end(request) } else { table.sleepIfWaiting(request) }
    }

    // MARK: Publishing

    /// The body is complete and verified: hand it to the publisher with its marker.
    private func publish(_ record: ItemRecord, digest: String, part: StagingFile?) {
        if record.summary.isUpload { recordUpload(record, digest: digest); return }
        guard let part, let item = record.loaded else { return }
        let finished = Date()
        let facts = record.lastFacts ?? ResponseFacts()
        // The source that served it: a mirror's URL, else the request's (not a refreshed one,
        // which the consumer never saw).
        let source = record.sourceIndex
        let served = source > 0 ? record.currentURL ?? item.url : item.url
        var marker = ItemMarker(
            request: record.request.name, group: record.request.group, index: record.index,
            url: urls.shown(served.string), finalURL: urls.shown(facts.finalURL), name: item.name,
            bytes: record.bytesOnDisk, sha256: digest, httpStatus: facts.httpStatus,
            etag: facts.etag ?? record.etag, lastModified: facts.lastModified ?? record.lastModified,
            contentType: facts.contentType, startedAt: RFC3339.format(record.startedAt ?? finished),
            finishedAt: RFC3339.format(finished), attempts: record.attempts,
            outageSeconds: record.outageSeconds(at: finished), urlQuerySha256: URLPrivacy.querySHA256(served.string),
            source: item.mirrors.isEmpty ? nil : source)
        marker.connections = facts.connections > 1 ? facts.connections : nil
        let state = ItemState(request: record.request.name, index: record.index, url: marker.url,
                              phase: .ready, inode: part.inode, etag: marker.etag, lastModified: marker.lastModified,
                              bytes: record.bytesOnDisk, attempts: record.attempts, startedAt: marker.startedAt,
                              marker: marker)
        let job = PublishJob(part: part, state: state, marker: marker, writesMarker: record.writesItemMarker,
                             replacesExisting: record.replacesExisting)
        record.lifecycle.handOver(job)
        publishing.enqueue(job)
    }

    /// One item's result from a publish batch.
    func published(_ result: PublishResult) {
        guard let record = table.item(forBase: result.base) else { return }
        if result.isPublished, let file = result.finalName {
            if let complete = RFC3339.parse(result.job.marker.finishedAt) {
                metrics.metrics.published(latency: Date().timeIntervalSince(complete))
            }
            if !record.writesItemMarker {
                // Kept for the group marker (only there: a per-file marker already holds them).
                var facts = result.job.marker
                facts.name = file
                record.publishedMarker = facts
            }
            // Under `markers: group` there is no per-file marker: the item's marker path is empty.
            send(.publishSucceeded(file: file, marker: result.markerPath ?? ""), to: record)
            return
        }
        var job = result.job
        job.alreadyPublishedAs = result.finalName
        record.lifecycle.handOver(job)
        // An unnamed part cannot be gone: the job holds it open.
        let partGone = result.finalName == nil && job.part.isNamed && !store.partExists(record.base)
        let permanent = result.error?.isPermanent ?? false
        if result.finalName == nil && !partGone && !permanent {
            // It waits for another try: named, a restart in between publishes it from staging
            // (the batch journal has it) instead of downloading it again.
            do { try store.name(job.part) } catch {
                logger.warning("could not name the partial in staging: \(error)", metadata: ["item": "\(record.id)"])
            }
        }
        send(.publishFailed(partGone: partGone, permanent: permanent, message: result.error.map { "\($0)" } ?? "unknown error"),
             to: record)
    }

    // MARK: Endings

    /// The item failed for good: its failure record (with the last response's status, curl code
    /// and final URL), its part removed, its state written, then the ending.
    private func fail(_ record: ItemRecord, code: String, message: String, wasPublishing: Bool) {
        var curlCode: Int? = nil, curlText: String? = nil
        if case .curl(let c, let t) = record.lastFailure { curlCode = c; curlText = t }
        let status = record.lastFacts?.httpStatus
        let finalURL = record.lastFacts?.finalURL
        let item = record.details
        let url = urls.shown(item?.url.string ?? "")
        let failure = ItemFailure(index: record.index, url: url, name: item?.name ?? "",
                                  code: code, message: message, attempts: record.attempts,
                                  httpStatus: status == 0 ? nil : status, curlCode: curlCode, curlError: curlText,
                                  finalURL: finalURL == item?.url.string ? nil : urls.shown(finalURL),
                                  outageSeconds: record.outageSeconds(at: Date()))
        record.lifecycle.recordFailure(failure)
        fileFailedUpload(record)
        if wasPublishing { publishing.drop(base: record.base) }
        store.removePart(record.base)
        driver.writeState(record, ItemState(request: record.request.name, index: record.index,
                                            url: url, phase: .failed, attempts: record.attempts,
                                            failure: failure))
        logger.warning("item failed: \(message)", metadata: ["item": "\(record.id)", "url": "\(url)",
                                                             "code": "\(code)"])
        itemEnded(record)
    }

    func itemEnded(_ record: ItemRecord) {
        status.itemEnded(StatusReporter.task(record, now: Date(), progress: nil, window: nil, urls: urls))
        let request = record.request
        request.open -= 1
        switch record.phase {
        case .published(let file, _):
            summary.published += 1
            metrics.metrics.itemEnded(outcome: record.endedUnchanged ? "unchanged" : "published",
                                      seconds: record.startedAt.map { Date().timeIntervalSince($0) })
            logger.debug(record.endedUnchanged ? "unchanged (304): nothing published" : "published",
                         metadata: ["item": "\(record.id)", "file": "\(file)"])
        case .failed(let failure):
            summary.failed += 1
            metrics.metrics.itemEnded(outcome: "failed", code: failure.code,
                                      seconds: record.startedAt.map { Date().timeIntervalSince($0) })
        default: break
        }
        hooks.itemEnded(record)
        record.shed()
        if request.open == 0 { groups.end(request) }
    }

    /// The group marker is written and the request filed: forget the request, claim what waited
    /// for its slot, and run the group hook.
    func groupEnded(_ request: RequestRecord, markerPath: String?, journal: HeldLock?) {
        table.remove(request)
        ledger.release(request)
        requestFile.release(request.claim)
        let failed = request.items.filter { if case .failed = $0.phase { return true } else { return false } }.count
        logger.info("group ended", metadata: ["request": "\(request.name)", "group": "\(request.group)",
                                              "items": "\(request.items.count)", "failed": "\(failed)"])
        guard let markerPath, let journal else { return }
        hooks.groupEnded(journal: journal, markerPath: markerPath, group: request.group, request: request.name,
                         items: request.items.count, failed: failed)
    }
}

extension ItemRecord {
    /// `on-exists: replace`, and `skip-unchanged` when the resource changed: the new file takes
    /// the final name in place of the old one (never a `-N` name).
    var replacesExisting: Bool { (details?.onExists ?? request.settings.onExists) != .keepBoth }

    /// Ended with the file already published, a 304 having confirmed it (`skip-unchanged`).
    var endedUnchanged: Bool {
        guard case .published = phase else { return false }
        return lastFacts?.httpStatus == 304
    }
}

extension SchedulingPriority {
    init(_ p: Priority) {
        switch p { case .low: self = .low; case .normal: self = .normal; case .high: self = .high }
    }
}
