internal import CLinux
import Foundation

/// How a published part gets its name in the final folder (step 5 of the publish protocol,
/// `PublishBatch.moveDataIntoFinalFolder`), and how step 3 foresees that name (`MarkerFirst`).
extension PublishBatch {
    /// Renames (links, for an unnamed part; across filesystems, copies) the part to a free name
    /// in the final folder.
    /// `checked`: a name `MarkerFirst` found free of a marker a moment ago (not looked up again).
    func moveIntoFinal(_ job: PublishJob, checked: String?) throws(StoreError) -> String {
        let wished = job.marker.name
        let partName = job.part.base + ".part"
        if !job.part.isNamed && (job.replacesExisting || !sameFilesystem) {
            // Those two ways go through the part's staging name.
            try store.name(job.part)
        }
        if job.replacesExisting {
            try replaceInFinal(job)
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
    /// old data, so the name never stands empty. Step 8 puts the new marker in place.
    private func replaceInFinal(_ job: PublishJob) throws(StoreError) {
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
/// after all (another writer took the name meanwhile) is written again in step 7 and synced
/// there like a marker not written ahead.
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
