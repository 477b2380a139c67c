import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore

/// The failed items of a request with more of them than `SpoolStore.listedFailuresLimit`, as
/// its group end writes them: counted by ending for `R.error` and the group marker (`endings`),
/// and listed one a line in their items file, streamed on the I/O queue.
///
/// Why so: a cancelled request of 200,000 items listed whole made a 30 MB `.error` built in
/// memory on the engine thread. Here each item keeps its 48-byte summary and the number of its
/// failure's shape (code, message, attempts, status, curl error, …: shared by every item that
/// ended the same way); its URL and name are read again from the request file as its line is
/// written, through one window in file order.
struct FailedItemsList: Sendable {
    private var shapes: [ItemFailure] = []
    private var shapeNumbers: [ItemFailure: UInt32] = [:]
    /// Items per shape.
    private var shapeCounts: [Int] = []
    private var entries: ContiguousArray<Entry> = []
    /// The shape of the item added last: most items end as their neighbour did, and comparing
    /// costs less than hashing.
    private var last: (shape: ItemFailure, number: UInt32)?

    private struct Entry: Sendable {
        let summary: ItemSummary
        let shape: UInt32
    }

    var count: Int { entries.count }

    init(capacity: Int) { entries.reserveCapacity(capacity) }

    /// Adds a failed item (in index order).
    mutating func add(_ failure: ItemFailure, summary: ItemSummary) {
        var shape = failure
        shape.index = 0
        shape.url = ""
        shape.name = ""
        let number: UInt32
        if let last, last.shape == shape {
            number = last.number
        } else if let known = shapeNumbers[shape] {
            number = known
        } else {
            number = UInt32(shapes.count)
            shapes.append(shape)
            shapeCounts.append(0)
            shapeNumbers[shape] = number
        }
        last = (shape, number)
        shapeCounts[Int(number)] += 1
        entries.append(Entry(summary: summary, shape: number))
    }

    /// The items counted by code and message, the most common first.
    var endings: [EndingCount] {
        EndingCount.counting(zip(shapes, shapeCounts).lazy.map { ($0.code, $0.message, $1) })
    }

    /// The lines' writer for `SpoolStore.endGroup`: each item's failure with its URL (shown as
    /// `urls` says) and name read from the claimed file; an item that cannot be read again keeps
    /// them empty.
    func lines(claim: ClaimedRequest, settings: RequestFileSettings, hostKeys: [UInt32: String],
               urls: URLPrivacy) -> FailedItemLines {
        let list = self
        return { (writer: ItemLinesWriter) throws(StoreError) in
            let fd = try? claim.openFile()
            defer { if let fd { close(fd) } }
            let reader = fd.map { RequestItemReader(fd: $0) }
            for entry in list.entries {
                var failure = list.shapes[Int(entry.shape)]
                failure.index = Int(entry.summary.index)
                if let reader, let item = try? reader.item(entry.summary, hostKey: hostKeys[entry.summary.hostID] ?? "",
                                                         settings: settings) {
                    failure.url = urls.shown(item.url.string)
                    failure.name = item.name
                }
                try writer.append(failure.jsonBytes())
            }
        }
    }
}
