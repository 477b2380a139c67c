import Foundation
import SpoolStore

/// Upload records waiting to be written: one batch at a time on the I/O queue, the next made of
/// everything that finished meanwhile, so that the syncs of many records are shared (a record
/// per upload, each with its own sync and two folder syncs, would keep the I/O queue behind).
struct UploadRecordQueue {
    var pending: [(key: Int, record: UploadRecord, response: [UInt8]?)] = []
    var inFlight = false
}

/// One upload's record written (`marker`), or not (`error`).
struct UploadRecorded: Sendable {
    let key: Int
    let file: String
    let marker: String?
    let error: StoreError?
}
