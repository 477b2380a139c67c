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

    public init(part: StagingFile, state: ItemState, marker: ItemMarker, alreadyPublishedAs: String? = nil) {
        self.part = part
        self.state = state
        self.marker = marker
        self.alreadyPublishedAs = alreadyPublishedAs
    }
}

/// What became of a job.
public struct PublishResult: Sendable {
    /// The job, handed back so a failed one can be tried again.
    public var job: PublishJob
    public var base: String
    /// The data file's name in the final folder, once renamed there.
    public var finalName: String?
    /// Full path of the marker, when published.
    public var markerPath: String?
    public var error: StoreError?
    /// The batch journal that records this item (nil for a marker-only retry): still locked,
    /// and left on disk for the caller to remove once the item's group has ended.
    public var journal: HeldLock?
}

/// Commits finished items in batches (docs/ARCHITECTURE.md, "Durability"):
///
/// 1. make the parts durable — `fdatasync` each for one or two files, else one `syncfs`;
/// 2. rename each part into the final folder, never over an existing name (`renameat2`
///    RENAME_NOREPLACE; a taken name gets a `-N` suffix before its extension);
/// 3. write every marker to a temp file; make them durable the same way;
/// 4. rename each marker into place (the commit point of "published"); fsync the folder once;
/// Before all this, one journal file records every item's state (phase `ready`, its marker and
/// the part's inode), so that a crash at any point leaves enough to finish the job. The journal
/// outlives the batch: until an item's group has ended it is also what tells a worker adopting
/// the request after a crash that the item is already published (and under which name).
///
/// Runs off the engine thread; one slow disk never stalls the transfers.
public struct Publisher: Sendable {
    public let store: SpoolStore

    public init(store: SpoolStore) { self.store = store }

    public func publish(_ jobs: [PublishJob]) -> [PublishResult] {
        let layout = store.layout
        var results = jobs.map { PublishResult(job: $0, base: $0.part.base, finalName: $0.alreadyPublishedAs) }
        let batched = jobs.count > 2

        // 0. One journal for the batch: each item's state (phase `ready`, its marker, the part's
        //    inode), so that a crash at any later point leaves enough to finish the job. The sync
        //    below covers it; it is removed once the markers are in place.
        let journaled = jobs.filter { $0.alreadyPublishedAs == nil }.map(\.state)
        if !journaled.isEmpty {
            do throws(StoreError) {
                let journal = try store.writeJournal(journaled)
                for i in results.indices where jobs[i].alreadyPublishedAs == nil { results[i].journal = journal }
            } catch {
                return results.map { var r = $0; r.error = error; return r }
            }
        }

        // 1. Data durable.
        if batched {
            if let error = catching({ () throws(StoreError) in try layout.staging.syncFilesystem() }) {
                return results.map { var r = $0; r.error = error; return r }
            }
        } else {
            for (i, job) in jobs.enumerated() where job.alreadyPublishedAs == nil {
                if fdatasync(job.part.fd) != 0 { results[i].error = StoreError("fdatasync", layout.staging.path(of: job.part.base + ".part")) }
            }
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

        // 3. Marker temp files, durable.
        var temps: [Int: String] = [:]
        for (i, job) in jobs.enumerated() where results[i].error == nil {
            guard let finalName = results[i].finalName else { continue }
            var marker = job.marker
            marker.name = finalName
            let temp = ".\(finalName).done.tmp"
            let fd: Int32
            do throws(StoreError) { fd = try layout.final.createFresh(temp) } catch { results[i].error = error; continue }
            do throws(StoreError) {
                try FileIO.writeAll(fd, SpoolJSON.encode(marker: marker), path: layout.final.path(of: temp))
                if !batched && fdatasync(fd) != 0 { throw StoreError("fdatasync", layout.final.path(of: temp)) }
                temps[i] = temp
            } catch {
                results[i].error = error
                layout.final.remove(temp)
            }
            close(fd)
        }
        if batched && !temps.isEmpty,
           let error = catching({ () throws(StoreError) in try layout.final.syncFilesystem() }) {
            for i in temps.keys { results[i].error = error; layout.final.remove(temps[i]!) }
            temps.removeAll()
        }

        // 4. Markers into place, then one folder sync.
        for (i, temp) in temps.sorted(by: { $0.key < $1.key }) {
            let markerName = results[i].finalName! + ".done"
            do throws(StoreError) {
                try layout.final.rename(temp, to: markerName, in: layout.final, replace: false)
                results[i].markerPath = layout.final.path(of: markerName)
            } catch {
                results[i].error = error
                layout.final.remove(temp)
            }
        }
        if let error = catching({ () throws(StoreError) in try layout.final.sync() }) {
            for i in results.indices where results[i].markerPath != nil { results[i].error = error; results[i].markerPath = nil }
        }

        // 5. A copy across filesystems leaves the part behind; the published copy replaces it.
        if !sameFilesystem {
            for (i, job) in jobs.enumerated() where results[i].markerPath != nil {
                layout.staging.remove(job.part.base + ".part")
            }
        }
        return results
    }

    /// Renames (or, across filesystems, copies) the part to a free name in the final folder.
    private func moveIntoFinal(_ job: PublishJob, sameFilesystem: Bool) throws(StoreError) -> String {
        let layout = store.layout
        let wished = job.marker.name
        let partName = job.part.base + ".part"
        for attempt in 0..<1000 {
            let candidate = attempt == 0 ? wished : SpoolStore.suffixed(wished, attempt, separator: "-")
            if layout.final.exists(candidate + ".done") { continue }
            do throws(StoreError) {
                if sameFilesystem {
                    try layout.staging.rename(partName, to: candidate, in: layout.final, replace: false)
                } else {
                    try copyAcross(job.part, to: candidate)
                }
                return candidate
            } catch {
                if error.errno == EEXIST { continue }
                throw error
            }
        }
        throw StoreError("renameat2", layout.final.path(of: wished), errno: EEXIST)
    }

    /// The final folder is on another filesystem: copy to a temp name there, fsync, rename.
    private func copyAcross(_ part: StagingFile, to name: String) throws(StoreError) {
        let final = store.layout.final
        let temp = ".\(name).part.tmp"
        let out = try final.createFresh(temp)
        defer { close(out) }
        var offset: off_t = 0
        var st = stat()
        fstat(part.fd, &st)
        while offset < st.st_size {
            var inOffset = Int64(offset)
            let n = spoolfetch_copy_file_range(part.fd, &inOffset, out, UInt(st.st_size - offset))
            if n < 0 {
                if errno == EINTR { continue }
                let e = StoreError("copy_file_range", final.path(of: temp)); final.remove(temp); throw e
            }
            if n == 0 { break }
            offset += off_t(n)
        }
        if fsync(out) != 0 { let e = StoreError("fsync", final.path(of: temp)); final.remove(temp); throw e }
        do throws(StoreError) {
            try final.rename(temp, to: name, in: final, replace: false)
        } catch {
            final.remove(temp)
            throw error
        }
    }

    private func catching(_ body: () throws(StoreError) -> Void) -> StoreError? {
        do { try body(); return nil } catch { return error }
    }
}
