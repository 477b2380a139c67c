internal import CLinux
import Foundation

/// One verified item to publish.
public struct PublishJob: Sendable {
    public var part: StagingFile
    public var state: ItemState
    /// Its marker (also inside `state`); `name` is the wished-for final name.
    public var marker: ItemMarker
    /// Set when an earlier attempt already renamed the data (its marker failed): only the marker remains.
    public var alreadyPublishedAs: String?
    /// false for a request with `markers: group`: no `NAME.done` is written; the item counts as
    /// published once its data is durable under its final name (the group marker, written by the
    /// group end, lists it).
    public var writesMarker: Bool
    /// `on-exists: replace` (and a changed resource under `skip-unchanged`): the file takes the
    /// wished-for name whatever was there — the old marker is removed first, the data renamed
    /// over the old data, then the new marker put in place — instead of a free `-N` name.
    public var replacesExisting: Bool

    public init(part: StagingFile, state: ItemState, marker: ItemMarker, alreadyPublishedAs: String? = nil,
                writesMarker: Bool = true, replacesExisting: Bool = false) {
        self.part = part
        self.state = state
        self.marker = marker
        self.alreadyPublishedAs = alreadyPublishedAs
        self.writesMarker = writesMarker
        self.replacesExisting = replacesExisting
    }
}

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
    /// The batch journal that records this item (nil for a marker-only retry). The engine
    /// removes it once every request it mentions has ended its group.
    public var journal: JournalFile?
}

/// Commits finished items in batches (docs/ARCHITECTURE.md, "Durability order"):
///
/// 0. bytes a transfer left unwritten (`StagingFile.unwritten`, a small body written behind)
///    go into their parts; a job whose bytes cannot be written leaves the batch;
///    then one journal file records every item's state (phase `ready`, its marker, the part's inode),
///    so that a crash at any later point leaves enough to finish the job;
/// 1. make the journal and the parts durable (see `makeDurable`);
/// 2. rename each part into the final folder, never over an existing name (`Directory.rename`
///    without replace, or `linkat` of a part that has no staging name yet, see
///    `UnnamedPartSupport`; a taken name gets a `-N` suffix before its extension), or copy it there
///    and verify the copy when the final folder is on another filesystem. A job that replaces
///    (`replacesExisting`) first removes the old `NAME.done` (folder fsynced), then renames over
///    the old `NAME`: a consumer sees the old file with its marker, then the old file without a
///    marker, then the new file without, then the new file with its marker — the name always
///    holds a complete file, and a marker never describes the other file;
/// 3. write every marker to a temp file; make them (and, where `fdatasync` is the method, the
///    final folder holding the data's new names) durable;
/// 4. rename each marker into place (the commit point of "published"); fsync the folder once.
///    A job without a marker (`markers: group`) skips 3 and the first half of 4: its data was
///    made durable in 1, and the one folder fsync of 4 makes its final name durable — the commit
///    point of its "published"; the group marker comes later, from the group end;
/// 5. remove the parts a copy across filesystems left behind;
/// 6. append the final names of the items published to the journal (not synced: see
///    `JournalFile.appendPublished`; a first line of names is appended after 2 already, and
///    holds only within this boot), so that a file a consumer has already taken away is still
///    known as published after a crash.
///
/// Durable means `syncfs` once per batch where the filesystem honours it and the batch has more
/// than two files, else `fdatasync` of each file from a few threads (`FileSync`) plus an fsync of
/// the folder whose names changed. Where one `syncfs` covers staging and the final folder, the
/// marker temp files of 3 are written before 1 instead (`MarkerFirst`): the sync of 1 covers
/// them, and 3 only needs an fsync of the final folder for the data's new names. The journal outlives the batch: until an item's group has
/// ended it is also what tells a worker adopting the request after a crash that the item is
/// already published (and under which name).
///
/// Runs off the engine thread; one slow disk never stalls the transfers.
public struct Publisher: Sendable {
    public let store: SpoolStore

    public init(store: SpoolStore) { self.store = store }

    public func publish(_ jobs: [PublishJob]) -> [PublishResult] {
        let layout = store.layout
        var results = jobs.map { PublishResult(job: $0, base: $0.part.base, finalName: $0.alreadyPublishedAs) }
        let batched = jobs.count > 2

        // 0. Bytes the engine left unwritten go into their parts first; a job whose bytes cannot
        //    be written is left out of the batch (and keeps them, for its next try).
        for (i, job) in jobs.enumerated() where job.part.unwritten != nil {
            do throws(StoreError) { try job.part.writeUnwritten() } catch { results[i].error = error }
        }
        let inBatch = jobs.indices.filter { jobs[$0].alreadyPublishedAs == nil && results[$0].error == nil }
        // A job whose data was renamed before a crash (only its marker is missing) is journaled
        // too: once its marker is in place a consumer may take both, and only the journal's
        // lines then say it was published.
        let inJournal = jobs.indices.filter { results[$0].error == nil }

        // 0a. One journal for the batch.
        let journaled = inJournal.map { jobs[$0].state }
        var journal: JournalFile?
        // Its descriptor is needed until step 6 appended the final names.
        defer { journal?.closeDescriptor() }
        if !journaled.isEmpty {
            do throws(StoreError) {
                let held = try store.writeJournal(journaled)
                journal = held
                for i in inJournal { results[i].journal = held }
            } catch {
                return results.map { var r = $0; r.error = r.error ?? error; return r }
            }
        }

        // 0b. Where one syncfs covers staging and the final folder, the markers are written now,
        //     under the names the data will most likely get, so that the sync of step 1 makes them
        //     durable too: a batch then needs one syncfs instead of two (see `MarkerFirst`).
        let sameFilesystem = layout.staging.deviceID() == layout.final.deviceID()
        var temps: [Int: (name: String, fd: Int32)] = [:]
        var predicted: [Int: String] = [:]
        if batched && sameFilesystem && layout.staging.syncMethod == .syncfs && layout.final.syncMethod == .syncfs {
            var taken = Set<String>()
            for (i, job) in jobs.enumerated() where MarkerFirst.applies(to: job) && results[i].error == nil {
                guard let name = MarkerFirst.likelyName(of: job, in: layout.final, taken: taken) else { continue }
                taken.insert(name)
                if let temp = writeMarkerTemp(job.marker, finalName: name, into: &results[i]) {
                    temps[i] = temp
                    predicted[i] = name
                }
            }
        }

        // 1. Journal and data durable.
        var staged: [(index: Int?, target: SyncTarget)] = []
        if let journal { staged.append((nil, SyncTarget(fd: journal.fd, path: layout.staging.path(of: journal.name)))) }
        for i in inBatch {
            staged.append((i, SyncTarget(fd: jobs[i].part.fd, path: layout.staging.path(of: jobs[i].part.base + ".part"))))
        }
        let stagingErrors = makeDurable(staged.map(\.target), in: layout.staging, batched: batched)
        if stagingErrors.contains(where: { $0 != nil }) {
            // Nothing of the batch is published: markers written ahead go (the next try writes them again).
            for temp in temps.values {
                close(temp.fd)
                layout.final.remove(temp.name)
            }
            temps = [:]
        }
        for (k, error) in stagingErrors.enumerated() {
            guard let error else { continue }
            if let i = staged[k].index { results[i].error = error } else { return results.map { var r = $0; r.error = r.error ?? error; return r } }
        }

        // 2. Data into the final folder.
        for (i, job) in jobs.enumerated() where results[i].error == nil && results[i].finalName == nil {
            do throws(StoreError) {
                results[i].finalName = try moveIntoFinal(job, sameFilesystem: sameFilesystem, checked: predicted[i])
            } catch {
                results[i].error = error
            }
        }
        // 2a. The names the data now has, for as long as this boot lasts (6 makes them hold for
        //     good): a consumer may take a file the moment its marker is in place (4), and take
        //     it while the next daemon starts if this one is killed before 6.
        journal?.appendPublished(PublishedNames.of(jobs, results, inJournal, dataInPlace: true), durable: false)

        // 3. Marker temp files, durable (with the data's new names where the folder needs its own sync).
        //    A marker written ahead whose data got another name (a racing writer took the name)
        //    is written again: it then needs this step's sync like a marker written now.
        //    Every stale one goes first: its temp name may be the one another job's marker needs now.
        for (i, temp) in temps where results[i].error != nil || results[i].finalName != predicted[i] {
            close(temp.fd)
            layout.final.remove(temp.name)
            temps.removeValue(forKey: i)
        }
        var unsynced: [Int] = []
        for (i, job) in jobs.enumerated() where job.writesMarker && temps[i] == nil {
            guard results[i].error == nil, let finalName = results[i].finalName else { continue }
            if let temp = writeMarkerTemp(job.marker, finalName: finalName, into: &results[i]) {
                temps[i] = temp
                unsynced.append(i)
            }
        }
        let order = temps.keys.sorted()
        let markerErrors: [StoreError?]
        if !predicted.isEmpty {
            // Markers written ahead are durable; the data's new names are not yet: one syncfs when
            // a marker was written late (it covers both), else an fsync of the final folder.
            let error = unsynced.isEmpty ? catching({ () throws(StoreError) in try layout.final.sync() })
                                         : catching({ () throws(StoreError) in try layout.final.syncFilesystem() })
            markerErrors = Array(repeating: error, count: order.count)
        } else {
            markerErrors = makeDurable(order.map { SyncTarget(fd: temps[$0]!.fd, path: layout.final.path(of: temps[$0]!.name)) },
                                       in: layout.final, batched: batched)
        }
        for (k, i) in order.enumerated() {
            close(temps[i]!.fd)
            if let error = markerErrors[k] {
                results[i].error = error
                layout.final.remove(temps[i]!.name)
                temps.removeValue(forKey: i)
            }
        }

        // 4. Markers into place, then one folder sync.
        for i in temps.keys.sorted() {
            let temp = temps[i]!.name
            let markerName = results[i].finalName! + ".done"
            do throws(StoreError) {
                try layout.final.rename(temp, to: markerName, in: layout.final, replace: jobs[i].replacesExisting)
                results[i].markerPath = layout.final.path(of: markerName)
                results[i].isPublished = true
            } catch {
                results[i].error = error
                layout.final.remove(temp)
            }
        }
        for (i, job) in jobs.enumerated() where !job.writesMarker && results[i].error == nil && results[i].finalName != nil {
            results[i].isPublished = true
        }
        if let error = catching({ () throws(StoreError) in try layout.final.sync() }) {
            for i in results.indices where results[i].isPublished {
                results[i].error = error
                results[i].markerPath = nil
                results[i].isPublished = false
            }
        }

        // 5. A copy across filesystems leaves the part behind; the published copy replaces it.
        if !sameFilesystem {
            for (i, job) in jobs.enumerated() where results[i].isPublished {
                layout.staging.remove(job.part.base + ".part")
            }
        }

        // 6. The journal learns for good under which names the batch was published (see
        //    `JournalFile.appendPublished`): after a crash, a file a consumer has already taken
        //    away is still known as published, and not fetched and delivered again.
        journal?.appendPublished(PublishedNames.of(jobs, results, inJournal), durable: true)
        return results
    }

    /// Creates `.NAME.done.tmp` in the final folder with the job's marker under `finalName`;
    /// nil (and the error in `result`) when it cannot.
    private func writeMarkerTemp(_ jobMarker: ItemMarker, finalName: String,
                                 into result: inout PublishResult) -> (name: String, fd: Int32)? {
        let final = store.layout.final
        var marker = jobMarker
        marker.name = finalName
        let temp = ".\(finalName).done.tmp"
        let fd: Int32
        do throws(StoreError) { fd = try final.createFresh(temp) } catch { result.error = error; return nil }
        do throws(StoreError) {
            try FileIO.writeAll(fd, SpoolJSON.encode(marker: marker), path: final.path(of: temp))
            return (temp, fd)
        } catch {
            result.error = error
            close(fd)
            final.remove(temp)
            return nil
        }
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

    /// Renames (links, for an unnamed part; across filesystems, copies) the part to a free name
    /// in the final folder.
    /// `checked`: a name `MarkerFirst` found free of a marker a moment ago (not looked up again).
    private func moveIntoFinal(_ job: PublishJob, sameFilesystem: Bool, checked: String? = nil) throws(StoreError) -> String {
        let layout = store.layout
        let wished = job.marker.name
        let partName = job.part.base + ".part"
        if !job.part.isNamed && (job.replacesExisting || !sameFilesystem) {
            // Those two ways go through the part's staging name.
            try store.name(job.part)
        }
        if job.replacesExisting {
            try replaceInFinal(job, sameFilesystem: sameFilesystem)
            return wished
        }
        for attempt in 0..<1000 {
            let candidate = attempt == 0 ? wished : SpoolStore.suffixed(wished, attempt, separator: "-")
            if candidate != checked && layout.final.exists(candidate + ".done") { continue }
            do throws(StoreError) {
                if !job.part.isNamed {
                    // An unnamed part gets its final name directly: linkat fails with EEXIST
                    // rather than replace, like the no-replace rename.
                    if spoolfetch_link_open_file(job.part.fd, layout.final.fd, candidate) != 0 {
                        throw StoreError("linkat", "\(layout.staging.path) (unnamed \(partName)) → \(layout.final.path(of: candidate))")
                    }
                } else if sameFilesystem {
                    try layout.staging.rename(partName, to: candidate, in: layout.final, replace: false)
                } else {
                    try copyAcross(job, to: candidate)
                }
                return candidate
            } catch {
                if error.errno == EEXIST { continue }
                // link+unlink stopped by a crash between its two steps: the data is there already.
                if error.errno == ENOENT, let st = layout.final.status(of: candidate), UInt64(st.st_ino) == job.part.inode {
                    return candidate
                }
                throw error
            }
        }
        throw StoreError("renameat2", layout.final.path(of: wished), errno: EEXIST)
    }

    /// `on-exists: replace`: the old marker goes first (and that is made durable), so that no
    /// marker ever stands beside data it does not describe; then the data is renamed over the
    /// old data, so the name never stands empty. Step 4 puts the new marker in place.
    private func replaceInFinal(_ job: PublishJob, sameFilesystem: Bool) throws(StoreError) {
        let final = store.layout.final
        let name = job.marker.name
        if final.exists(name + ".done") {
            if unlinkat(final.fd, name + ".done", 0) != 0 && errno != ENOENT {
                throw StoreError("unlinkat", final.path(of: name + ".done"))
            }
            try final.sync()
        }
        if sameFilesystem {
            try store.layout.staging.rename(job.part.base + ".part", to: name, in: final, replace: true)
        } else {
            try copyAcross(job, to: name, replace: true)
        }
    }

    /// The final folder is on another filesystem: a verified copy (see `CrossFilesystemCopy`)
    /// under a temp name there, then the rename to `name` (no-replace unless `replace`).
    private func copyAcross(_ job: PublishJob, to name: String, replace: Bool = false) throws(StoreError) {
        let final = store.layout.final
        let temp = ".\(name).part.tmp"
        try CrossFilesystemCopy(part: job.part, partPath: store.layout.staging.path(of: job.part.base + ".part"),
                                bytes: job.marker.bytes, sha256: job.marker.sha256)
            .copy(into: final, as: temp)
        do throws(StoreError) {
            try final.rename(temp, to: name, in: final, replace: replace)
        } catch {
            final.remove(temp)
            throw error
        }
    }

    private func catching(_ body: () throws(StoreError) -> Void) -> StoreError? {
        do { try body(); return nil } catch { return error }
    }
}

/// Markers written before the data is moved, so that the batch's one `syncfs` makes the parts,
/// the journal and the marker temp files durable at once. Then only the data's new names in the
/// final folder need an fsync of that folder before the markers are renamed into place — the
/// order stays "data durable, data named, names durable, marker" — and a batch costs one
/// `syncfs` and two folder fsyncs instead of two `syncfs` and one folder fsync.
///
/// A marker holds its file's final name, which is known for sure only after the rename: the
/// name is predicted here the way `moveIntoFinal` chooses it (the wished-for name, else the
/// first `-N` name with neither a file nor a marker), and a marker whose data got another name
/// after all (another writer took the name meanwhile) is written again and synced the old way.
enum MarkerFirst {
    /// Jobs whose final name is chosen by a no-replace rename in the final folder: a replacing
    /// job's marker waits for the old marker to go, and a marker-only retry knows its name already.
    static func applies(to job: PublishJob) -> Bool {
        job.writesMarker && !job.replacesExisting && job.alreadyPublishedAs == nil
    }

    /// The name `moveIntoFinal` will most likely give the job's data; `taken` holds the names
    /// predicted for earlier jobs of the batch (they are renamed first).
    static func likelyName(of job: PublishJob, in final: Directory, taken: Set<String>) -> String? {
        let wished = job.marker.name
        for attempt in 0..<1000 {
            let candidate = attempt == 0 ? wished : SpoolStore.suffixed(wished, attempt, separator: "-")
            if taken.contains(candidate) || final.exists(candidate + ".done") || final.exists(candidate) { continue }
            return candidate
        }
        return nil
    }
}
