import Foundation

/// JSON as the spool writes it: sorted keys, no escaped slashes, one trailing newline.
public enum SpoolJSON {
    public static func encode<T: Encodable>(_ value: T) -> [UInt8] {
        precondition(!(value is any SpoolRecord), "\(T.self) has one serialisation: SpoolJSON.encode(record:)")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding these plain records cannot fail.
        var bytes = [UInt8]((try? encoder.encode(value)) ?? Data("{}".utf8))
        bytes.append(0x0A)
        return bytes
    }

    public static func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) -> T? {
        try? JSONDecoder().decode(type, from: Data(bytes))
    }
}

/// A record of the spool written as JSON (marker, state, failure, group marker, error record):
/// each has exactly one serialisation, by hand (`JSONObjectWriter`), giving the same bytes as
/// JSONEncoder with sorted keys (the store tests check that); their `Decodable` reads them back.
/// `SpoolJSON.encode(_:)` (JSONEncoder's way, for the other files) refuses them, so a second way
/// cannot creep back in unseen.
public protocol SpoolRecord {
    /// The record's JSON, without a newline.
    func jsonBytes() -> [UInt8]
}

extension ItemMarker: SpoolRecord {
    public func jsonBytes() -> [UInt8] {
        var w = JSONObjectWriter()
        w.int("attempts", Int64(attempts))
        w.int("bytes", bytes)
        w.int("connections", connections.map(Int64.init))
        w.string("contentType", contentType)
        w.string("etag", etag)
        w.string("finalURL", finalURL)
        w.string("finishedAt", finishedAt)
        w.string("group", group)
        w.int("httpStatus", Int64(httpStatus))
        w.int("index", Int64(index))
        w.string("lastModified", lastModified)
        w.string("name", name)
        w.int("outageSeconds", outageSeconds.map(Int64.init))
        w.string("owner", owner)
        w.int("ownerUID", ownerUID.map(Int64.init))
        w.string("request", request)
        w.string("sha256", sha256)
        switch source {
        case .store?: w.string("source", "store")
        case .index(let i)?: w.int("source", Int64(i))
        case nil: break
        }
        w.string("startedAt", startedAt)
        w.string("url", url)
        w.string("urlQuerySha256", urlQuerySha256)
        return w.close()
    }
}

extension ItemState: SpoolRecord {
    public func jsonBytes() -> [UInt8] {
        var w = JSONObjectWriter()
        w.int("attempts", Int64(attempts))
        w.string("bootID", bootID)
        w.int("bytes", bytes)
        w.string("etag", etag)
        w.raw("failure", failure?.jsonBytes())
        w.string("finalName", finalName)
        w.int("index", Int64(index))
        w.uint("inode", inode)
        w.string("lastModified", lastModified)
        w.raw("marker", marker?.jsonBytes())
        w.string("phase", phase.rawValue)
        w.intArrays("ranges", ranges)
        w.string("refreshedURL", refreshedURL)
        w.string("request", request)
        w.int("segments", segments.map(Int64.init))
        w.string("startedAt", startedAt)
        w.int("syncedBytes", syncedBytes)
        w.string("url", url)
        return w.close()
    }
}

extension ItemFailure: SpoolRecord {
    public func jsonBytes() -> [UInt8] {
        var w = JSONObjectWriter(capacity: 256)
        write(to: &w)
        return w.close()
    }

    /// Writes the failure's fields (inside a record's array, or alone).
    func write(to w: inout JSONObjectWriter) {
        w.int("attempts", Int64(attempts))
        w.raw("cause", cause?.jsonBytes())
        w.string("code", code)
        w.int("curlCode", curlCode.map(Int64.init))
        w.string("curlError", curlError)
        w.string("finalURL", finalURL)
        w.int("httpStatus", httpStatus.map(Int64.init))
        w.int("index", Int64(index))
        w.string("message", message)
        w.string("name", name)
        w.int("outageSeconds", outageSeconds.map(Int64.init))
        w.string("url", url)
    }
}

extension ErrorRecord: SpoolRecord {
    public func jsonBytes() -> [UInt8] {
        var w = JSONObjectWriter(capacity: 256 + (items?.count ?? 0) * 256)
        w.string("code", code)
        if let endings { w.array("endings", endings) { ending, w in ending.write(to: &w) } }
        if let items {
            w.array("items", items) { item, w in item.write(to: &w) }
        }
        w.string("itemsFile", itemsFile)
        w.int("line", line.map(Int64.init))
        w.string("message", message)
        w.string("owner", owner)
        w.int("ownerUID", ownerUID.map(Int64.init))
        w.string("request", request)
        return w.close()
    }
}

extension GroupItem {
    /// Writes the line's fields (the same bytes JSONEncoder with sorted keys writes).
    func write(to w: inout JSONObjectWriter) {
        w.int("bytes", bytes)
        w.raw("cause", cause?.jsonBytes())
        w.string("code", code)
        w.string("file", file)
        w.string("finalURL", finalURL)
        w.int("httpStatus", httpStatus.map(Int64.init))
        w.int("index", Int64(index))
        w.string("marker", marker)
        w.string("message", message)
        w.string("outcome", outcome)
        w.string("sha256", sha256)
        w.string("url", url)
        w.string("urlQuerySha256", urlQuerySha256)
    }
}

extension EndingCount {
    func write(to w: inout JSONObjectWriter) {
        w.string("code", code)
        w.int("count", Int64(count))
        w.string("message", message)
    }
}

extension GroupMarker: SpoolRecord {
    /// Written by hand also because JSONEncoder's cost for a large group falls all at its end,
    /// when nothing else is left to overlap it.
    public func jsonBytes() -> [UInt8] {
        var w = JSONObjectWriter(capacity: 64 + items.count * 192)
        if let endings { w.array("endings", endings) { ending, w in ending.write(to: &w) } }
        w.int("failed", Int64(failed))
        w.string("finishedAt", finishedAt)
        w.string("group", group)
        w.array("items", items) { item, w in item.write(to: &w) }
        w.string("itemsFile", itemsFile)
        w.string("owner", owner)
        w.int("ownerUID", ownerUID.map(Int64.init))
        w.int("published", Int64(published))
        w.string("request", request)
        w.int("unchanged", unchanged.map(Int64.init))
        return w.close()
    }
}

extension SpoolJSON {
    /// A record's file: its one serialisation and a newline.
    public static func encode(record: some SpoolRecord) -> [UInt8] { record.jsonBytes() + [0x0A] }

    /// A group marker file's bytes.
    public static func encode(groupMarker: GroupMarker) -> [UInt8] { encode(record: groupMarker) }

    /// A marker file's bytes.
    public static func encode(marker: ItemMarker) -> [UInt8] { encode(record: marker) }

    /// A publish journal's bytes: a JSON array of states.
    public static func encode(states: [ItemState]) -> [UInt8] {
        var out: [UInt8] = [0x5B]
        for (i, state) in states.enumerated() {
            if i > 0 { out.append(0x2C) }
            out.append(contentsOf: state.jsonBytes())
        }
        out.append(contentsOf: [0x5D, 0x0A])
        return out
    }
}
