internal import CLinux
import Foundation

/// What became of a job.
public struct PublishResult: Sendable {
    /// The job, handed back so a failed one can be tried again.
    public var job: PublishJob
    public var base: String
    /// The data file's name in the final folder, once renamed there.
    public var finalName: String?
    /// Full path of the marker, when published with one.
    public var markerPath: String?
    /// The item is published: its marker is in place, or (a job without a marker) its data is
    /// durable under `finalName`, the final folder's names synced.
    public var isPublished = false
    public var error: StoreError?
    /// The batch journal that records this item (nil when the job failed before the journal
    /// was written, step 2). The engine removes it once every request it mentions has ended
    /// its group.
    public var journal: JournalFile?
    /// When step 8's fsync of the final folder returned: the moment the item's marker (or, under
    /// `markers: group`, its data's name) became durable. The engine measures a publish by it
    /// (the debug line `committed`, `Benchmarks/store-hits`), not by when the batch's result
    /// reaches it, which also waits for step 10.
    public var committedAt: Date?
}

/// Commits finished items in batches, in the order docs/ARCHITECTURE.md gives ("Durability
/// order"): `publish(_:)` runs the steps of a `PublishBatch`, one method each, numbered there and
/// in each method's doc comment alike (`DurabilityOrderTests` holds the two together).
///
/// Durable means `syncfs` once per batch where the filesystem honours it and the batch has more
/// than two files, else `fdatasync` of each file from a few threads (`FileSync`) plus an fsync of
/// the folder whose names changed. The journal outlives the batch: until an item's group has
/// ended it is also what tells a worker adopting the request after a crash that the item is
/// already published (and under which name).
///
/// Runs off the engine thread; one slow disk never stalls the transfers.
public struct Publisher: Sendable {
    public let store: SpoolStore

    public init(store: SpoolStore) { self.store = store }

    public func publish(_ jobs: [PublishJob]) -> [PublishResult] {
        var batch = PublishBatch(jobs, store: store)
        // The journal's descriptor serves the lines of steps 6 and 10; the file outlives it.
        defer { batch.journal?.closeDescriptor() }
        do throws(StoreError) {
            batch.writeUnwrittenBytes()
            try batch.writeJournal()
            batch.writeMarkersAhead()
            try batch.makeJournalAndPartsDurable()
            batch.moveDataIntoFinalFolder()
            batch.journalNamesForThisBoot()
            batch.writeAndSyncMarkers()
            batch.putMarkersInPlace()
            batch.removeCopiedParts()
            batch.journalNamesForGood()
        } catch {
            batch.fail(with: error)
        }
        return batch.members.map(\.result)
    }
}

/// One publish batch: each job's state as it goes through the steps, and the batch's journal.
/// A step either goes on with the jobs that have no error yet, or (`throws`) fails every job
/// of the batch: nothing of it is then published.
struct PublishBatch {
    /// A job and everything the batch knows about it.
    struct Member {
        var result: PublishResult
        /// Its marker while in a temp file of the final folder: from step 3 or 7 until step 8
        /// renames it into place, or until it is found stale or unsyncable and removed.
        var marker: MarkerTemp?

        var job: PublishJob { result.job }
        var isOK: Bool { result.error == nil }
        /// Recorded in the batch journal (step 2): every job whose bytes are all in its part.
        var isJournaled: Bool { result.journal != nil }
        /// Its data still has to reach the final folder: journaled, and not a marker-only retry.
        var movesData: Bool { isJournaled && job.alreadyPublishedAs == nil }
    }

    /// `.NAME.done.tmp` in the final folder, holding the marker of data named `dataName`.
    struct MarkerTemp {
        let name: String
        let dataName: String
        /// Open until step 7 has made the marker durable.
        private(set) var fd: Int32?

        init(name: String, dataName: String, fd: Int32) {
            self.name = name
            self.dataName = dataName
            self.fd = fd
        }

        mutating func closeFile() {
            if let fd { close(fd) }
            fd = nil
        }
    }

    let store: SpoolStore
    private(set) var members: [Member]
    private(set) var journal: JournalFile?
    /// More than two jobs: where the filesystem honours it, one `syncfs` beats an `fdatasync` of each file.
    let batched: Bool
    /// Staging and the final folder on one filesystem: the data is renamed (or linked), not
    /// copied. Learnt by step 3, the first to need it.
    private(set) var sameFilesystem = true
    /// Step 3 wrote markers: they are durable by step 4, and step 7 syncs only what came after.
    private(set) var wroteMarkersAhead = false
    /// The fencing answers of the commit step under way, by request: a batch holds many items of
    /// few requests, and a request is looked up once a step, not once an item (three lookups an
    /// item were the most a publish of many small files spent beyond its own files).
    private var heldInStep: [String: StoreError?] = [:]

    /// Whether `request` is still this worker's (`SpoolStore.confirmHeld`), asked once per step.
    private mutating func confirmHeldInStep(_ request: String) throws(StoreError) {
        if let known = heldInStep[request] {
            if let error = known { throw error }
            return
        }
        do throws(StoreError) {
            try store.confirmHeld(request)
            heldInStep[request] = .some(nil)
        } catch {
            heldInStep[request] = .some(error)
            throw error
        }
    }

    init(_ jobs: [PublishJob], store: SpoolStore) {
        self.store = store
        members = jobs.map { Member(result: PublishResult(job: $0, base: $0.part.base, finalName: $0.alreadyPublishedAs)) }
        batched = jobs.count > 2
    }

    var layout: SpoolLayout { store.layout }

    /// Step 1: writeUnwrittenBytes. A small body written behind (`StagingFile.unwritten`) is still
    /// in memory, and every later step reads, syncs or names the part: its bytes go into the part
    /// first. A job whose bytes cannot be written gets its error and stays out of the batch and
    /// its journal, keeping the bytes for its next try.
    mutating func writeUnwrittenBytes() {
        for i in members.indices where members[i].job.part.unwritten != nil {
            do throws(StoreError) { try members[i].job.part.writeUnwritten() } catch { members[i].result.error = error }
        }
    }

    /// Step 2: writeJournal. One journal file records every job left (phase `ready`, its marker,
    /// the part's inode), so that a crash at any later step leaves a restart enough to finish the
    /// batch. A marker-only retry (its data renamed before a crash) is journaled too: once its
    /// marker is in place a consumer may take both, and only the journal's lines then say it was
    /// published. Throws (the whole batch fails) when the journal cannot be written.
    mutating func writeJournal() throws(StoreError) {
        confirmHeld()
        let journaled = members.indices.filter { members[$0].isOK }
        guard !journaled.isEmpty else { return }
        let written = try store.writeJournal(journaled.map { members[$0].job.state })
        journal = written
        for i in journaled { members[i].result.journal = written }
    }

    /// Step 3: writeMarkersAhead. Where one `syncfs` covers staging and the final folder, each
    /// marker is written now, under the name its data will most likely get (`MarkerFirst`), so
    /// that step 4's sync makes it durable too: a batch then needs one `syncfs` instead of two.
    mutating func writeMarkersAhead() {
        sameFilesystem = layout.staging.deviceID() == layout.final.deviceID()
        guard batched && sameFilesystem && layout.staging.syncMethod == .syncfs && layout.final.syncMethod == .syncfs
        else { return }
        var taken = Set<String>()
        for i in members.indices where MarkerFirst.applies(to: members[i].job) && members[i].isOK {
            guard let name = MarkerFirst.likelyName(of: members[i].job, in: layout.final, taken: taken) else { continue }
            taken.insert(name)
            writeMarker(of: i, dataName: name)
            if members[i].marker != nil { wroteMarkersAhead = true }
        }
    }

    /// Step 4: makeJournalAndPartsDurable. The journal and every part's data are durable before
    /// any part gets a final name, so a name in the final folder never stands for data a power
    /// cut could lose. When a file may not be durable the markers written ahead go (the next try
    /// writes them again); a part's error fails its job, the journal's fails the batch (throws).
    mutating func makeJournalAndPartsDurable() throws(StoreError) {
        // The journal first (owner nil), then each part, by its job.
        var files: [(owner: Int?, target: SyncTarget)] = []
        if let journal { files.append((nil, SyncTarget(fd: journal.fd, path: layout.staging.path(of: journal.name)))) }
        for i in members.indices where members[i].movesData {
            let part = members[i].job.part
            files.append((i, SyncTarget(fd: part.fd, path: layout.staging.path(of: part.base + ".part"))))
        }
        let errors = makeDurable(files.map(\.target), in: layout.staging, batched: batched)
        if errors.contains(where: { $0 != nil }) {
            for i in members.indices { discardMarker(of: i) }
        }
        for (file, error) in zip(files, errors) {
            guard let error else { continue }
            guard let i = file.owner else { throw error }
            members[i].result.error = error
        }
    }

    /// Step 5: moveDataIntoFinalFolder. Each part gets its final name, never taking one that is
    /// in use (see `moveIntoFinal`); a replacing job removes the old marker first, so a marker
    /// never describes the other file.
    mutating func moveDataIntoFinalFolder() {
        heldInStep.removeAll(keepingCapacity: true)
        for i in members.indices where members[i].isOK && members[i].result.finalName == nil {
            do throws(StoreError) {
                try confirmHeldInStep(members[i].job.state.request)
                members[i].result.finalName = try moveIntoFinal(members[i].job, checked: members[i].marker?.dataName)
            } catch {
                members[i].result.error = error
            }
        }
    }

    /// Step 6: journalNamesForThisBoot. A journal line names the files the data now has, valid
    /// for as long as this boot lasts (step 10 writes the one that holds for good): a consumer
    /// may take a file the moment its marker is in place (step 8), also while the next daemon
    /// starts if this one is killed before step 10, and the line then says it was published.
    func journalNamesForThisBoot() {
        journal?.appendPublished(PublishedNames.of(members.map(\.result), dataInPlace: true), durable: false)
    }

    /// Step 7: writeAndSyncMarkers. Every marker is durable in its temp file, and the data's new
    /// names with it, before any marker is renamed into place: a marker never survives a power
    /// cut that its file did not. A marker written ahead whose data got another name (a racing
    /// writer took the name) or failed is removed first — its temp name may be the one another
    /// job's marker needs now — and written again like any marker not written ahead.
    mutating func writeAndSyncMarkers() {
        for i in members.indices {
            guard let temp = members[i].marker else { continue }
            if !members[i].isOK || members[i].result.finalName != temp.dataName { discardMarker(of: i) }
        }
        var wroteLate = false
        for i in members.indices where members[i].job.writesMarker && members[i].marker == nil {
            guard members[i].isOK, let finalName = members[i].result.finalName else { continue }
            writeMarker(of: i, dataName: finalName)
            if members[i].marker != nil { wroteLate = true }
        }
        // Every marker in a temp file is still open: none was synced yet.
        let open = members.indices.compactMap { i in
            members[i].marker.flatMap { temp in temp.fd.map { (i, SyncTarget(fd: $0, path: layout.final.path(of: temp.name))) } }
        }
        let errors: [StoreError?]
        if wroteMarkersAhead {
            // The markers written ahead are durable; the data's new names are not yet: one
            // syncfs when a marker was written late (it covers both), else an fsync of the folder.
            let error = wroteLate ? catching({ () throws(StoreError) in try layout.final.syncFilesystem() })
                                  : catching({ () throws(StoreError) in try layout.final.sync() })
            errors = Array(repeating: error, count: open.count)
        } else {
            errors = makeDurable(open.map(\.1), in: layout.final, batched: batched)
        }
        for ((i, _), error) in zip(open, errors) {
            members[i].marker?.closeFile()
            if let error {
                members[i].result.error = error
                discardMarker(of: i)
            }
        }
    }

    /// Step 8: putMarkersInPlace. Each marker is renamed into place: the commit point of its
    /// item's "published". Then one fsync of the final folder makes the markers' names durable;
    /// for a job without a marker (`markers: group`), whose data was durable before step 5, that
    /// fsync is the commit point (the group marker comes later, from the group end). A failed
    /// fsync takes "published" back from every job of the batch.
    mutating func putMarkersInPlace() {
        heldInStep.removeAll(keepingCapacity: true)
        for i in members.indices {
            guard let temp = members[i].marker else { continue }
            let markerName = temp.dataName + ".done"
            do throws(StoreError) {
                try confirmHeldInStep(members[i].job.state.request)
                try layout.final.rename(temp.name, to: markerName, in: layout.final, replace: members[i].job.replacesExisting)
                members[i].result.markerPath = layout.final.path(of: markerName)
                members[i].result.isPublished = true
            } catch {
                members[i].result.error = error
                layout.final.remove(temp.name)
            }
            members[i].marker = nil
        }
        for i in members.indices where !members[i].job.writesMarker && members[i].isOK && members[i].result.finalName != nil {
            members[i].result.isPublished = true
        }
        if let error = catching({ () throws(StoreError) in try layout.final.sync() }) {
            for i in members.indices where members[i].result.isPublished {
                members[i].result.error = error
                members[i].result.markerPath = nil
                members[i].result.isPublished = false
            }
        } else {
            let now = Date()
            for i in members.indices where members[i].result.isPublished { members[i].result.committedAt = now }
        }
    }

    /// Step 9: removeCopiedParts. A copy across filesystems leaves the part in staging; once the
    /// copy is published it is the item's data, and the part would only take space.
    func removeCopiedParts() {
        guard !sameFilesystem else { return }
        for member in members where member.result.isPublished {
            layout.staging.remove(member.job.part.base + ".part")
        }
    }

    /// Step 10: journalNamesForGood. A journal line names the files the batch published, after
    /// step 8's sync, so it holds across a power cut (see `JournalFile.appendPublished`): after
    /// any crash, a file a consumer has already taken away is still known as published, and not
    /// fetched and delivered again.
    func journalNamesForGood() {
        journal?.appendPublished(PublishedNames.of(members.map(\.result)), durable: true)
    }

    /// Every job without an error gets `error`: nothing of the batch is published.
    /// Fencing, before the journal, each data rename and each marker rename: a job whose request
    /// another worker has taken over (this worker stalled past its lease) fails with the fencing
    /// error and commits nothing; so does every job while the lease cannot be renewed.
    mutating func confirmHeld() {
        heldInStep.removeAll(keepingCapacity: true)
        for i in members.indices where members[i].isOK {
            do throws(StoreError) { try confirmHeldInStep(members[i].job.state.request) } catch {
                members[i].result.error = error
                discardMarker(of: i)
            }
        }
    }

    mutating func fail(with error: StoreError) {
        for i in members.indices where members[i].isOK { members[i].result.error = error }
    }

    /// Writes the job's marker, holding `dataName`, to `.NAME.done.tmp` in the final folder
    /// (left open, for its sync); the job gets the error when it cannot.
    private mutating func writeMarker(of i: Int, dataName: String) {
        let final = layout.final
        var marker = members[i].job.marker
        marker.name = dataName
        let temp = ".\(dataName).done.tmp"
        let fd: Int32
        do throws(StoreError) { fd = try final.createFresh(temp) } catch { members[i].result.error = error; return }
        do throws(StoreError) {
            try FileIO.writeAll(fd, SpoolJSON.encode(marker: marker), path: final.path(of: temp))
            members[i].marker = MarkerTemp(name: temp, dataName: dataName, fd: fd)
        } catch {
            members[i].result.error = error
            close(fd)
            final.remove(temp)
        }
    }

    /// Closes and removes the job's marker temp file, if it has one.
    private mutating func discardMarker(of i: Int) {
        guard var temp = members[i].marker else { return }
        temp.closeFile()
        layout.final.remove(temp.name)
        members[i].marker = nil
    }

    /// Makes the files durable, with the names just given to them in `folder`: one `syncfs` for
    /// a batch of more than two where the filesystem honours it (it covers names too), else
    /// `fdatasync` of each file (a few at once) and one fsync of the folder. The error of each
    /// file that may not be durable, by index; a failed folder sync counts for all of them.
    private func makeDurable(_ files: [SyncTarget], in folder: Directory, batched: Bool) -> [StoreError?] {
        if files.isEmpty { return [] }
        if batched && folder.syncMethod == .syncfs {
            let error = catching({ () throws(StoreError) in try folder.syncFilesystem() })
            return Array(repeating: error, count: files.count)
        }
        var errors = FileSync.fdatasyncAll(files)
        if let error = catching({ () throws(StoreError) in try folder.sync() }) {
            errors = errors.map { $0 ?? error }
        }
        return errors
    }

    private func catching(_ body: () throws(StoreError) -> Void) -> StoreError? {
        do { try body(); return nil } catch { return error }
    }
}
