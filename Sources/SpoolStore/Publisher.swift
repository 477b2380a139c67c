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
    /// The batch journal that records this item (nil for a marker-only retry): still locked,
    /// and left on disk for the caller to remove once the item's group has ended.
    public var journal: HeldLock?
}

/// Commits finished items in batches (docs/ARCHITECTURE.md, "Durability order"):
///
/// 0. one journal file records every item's state (phase `ready`, its marker, the part's inode),
///    so that a crash at any later point leaves enough to finish the job;
/// 1. make the journal and the parts durable (see `makeDurable`);
/// 2. rename each part into the final folder, never over an existing name (`Directory.rename`
///    without replace; a taken name gets a `-N` suffix before its extension), or copy it there
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
///    point of its "published"; the group marker comes later, from the group end.
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
        let layout = store.layout
        var results = jobs.map { PublishResult(job: $0, base: $0.part.base, finalName: $0.alreadyPublishedAs) }
        let batched = jobs.count > 2

        // 0. One journal for the batch.
        let journaled = jobs.filter { $0.alreadyPublishedAs == nil }.map(\.state)
        var journal: HeldLock?
        if !journaled.isEmpty {
            do throws(StoreError) {
                let held = try store.writeJournal(journaled)
                journal = held
                for i in results.indices where jobs[i].alreadyPublishedAs == nil { results[i].journal = held }
            } catch {
                return results.map { var r = $0; r.error = error; return r }
            }
        }

        // 1. Journal and data durable.
        var staged: [(index: Int?, target: SyncTarget)] = []
        if let journal { staged.append((nil, SyncTarget(fd: journal.fd, path: layout.staging.path(of: journal.name)))) }
        for (i, job) in jobs.enumerated() where job.alreadyPublishedAs == nil {
            staged.append((i, SyncTarget(fd: job.part.fd, path: layout.staging.path(of: job.part.base + ".part"))))
        }
        let stagingErrors = makeDurable(staged.map(\.target), in: layout.staging, batched: batched)
        for (k, error) in stagingErrors.enumerated() {
            guard let error else { continue }
            if let i = staged[k].index { results[i].error = error } else { return results.map { var r = $0; r.error = error; return r } }
        }

        // 2. Data into the final folder.
        let sameFilesystem = layout.staging.deviceID() == layout.final.deviceID()
        for (i, job) in jobs.enumerated() where results[i].error == nil && results[i].finalName == nil {
            do throws(StoreError) {
                results[i].finalName = try moveIntoFinal(job, sameFilesystem: sameFilesystem)
            } catch {
                results[i].error = error
            }
        }

        // 3. Marker temp files, durable (with the data's new names where the folder needs its own sync).
        var temps: [Int: (name: String, fd: Int32)] = [:]
        for (i, job) in jobs.enumerated() where results[i].error == nil && job.writesMarker {
            guard let finalName = results[i].finalName else { continue }
            var marker = job.marker
            marker.name = finalName
            let temp = ".\(finalName).done.tmp"
            let fd: Int32
            do throws(StoreError) { fd = try layout.final.createFresh(temp) } catch { results[i].error = error; continue }
            do throws(StoreError) {
                try FileIO.writeAll(fd, SpoolJSON.encode(marker: marker), path: layout.final.path(of: temp))
                temps[i] = (temp, fd)
            } catch {
                results[i].error = error
                close(fd)
                layout.final.remove(temp)
            }
        }
        let order = temps.keys.sorted()
        let markerErrors = makeDurable(order.map { SyncTarget(fd: temps[$0]!.fd, path: layout.final.path(of: temps[$0]!.name)) },
                                       in: layout.final, batched: batched)
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
        return results
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

    /// Renames (or, across filesystems, copies) the part to a free name in the final folder.
    private func moveIntoFinal(_ job: PublishJob, sameFilesystem: Bool) throws(StoreError) -> String {
        let layout = store.layout
        let wished = job.marker.name
        let partName = job.part.base + ".part"
        if job.replacesExisting {
            try replaceInFinal(job, sameFilesystem: sameFilesystem)
            return wished
        }
        for attempt in 0..<1000 {
            let candidate = attempt == 0 ? wished : SpoolStore.suffixed(wished, attempt, separator: "-")
            if layout.final.exists(candidate + ".done") { continue }
            do throws(StoreError) {
                if sameFilesystem {
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
