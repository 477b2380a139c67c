import Foundation
import SpoolStore
import XCTest

/// A store on a fresh spool in the temporary folder, with the helpers its tests share: files
/// written, listed and read by folder, and publish jobs built from a part and its content.
class StoreTestCase: XCTestCase {
    var root: String!
    var store: SpoolStore!

    override func setUpWithError() throws {
        var template = Array((NSTemporaryDirectory() + "/spoolstore-XXXXXX").utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        store = SpoolStore(layout: try SpoolLayout(root: root))
    }

    /// XCTest keeps every test case object until the whole run ends: the store (a descriptor for
    /// each of the spool's folders) goes with its test, or the run's descriptors pass FD_SETSIZE
    /// and an in-process inotify watcher's select() aborts it.
    override func tearDownWithError() throws {
        store = nil
        try? FileManager.default.removeItem(atPath: root)
    }

    func write(_ folder: String, _ name: String, _ text: String) {
        _ = FileManager.default.createFile(atPath: "\(root!)/\(folder)/\(name)", contents: Data(text.utf8))
    }
    func files(_ folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "\(root!)/\(folder)")) ?? []).sorted()
    }
    func read(_ folder: String, _ name: String) -> String? {
        FileManager.default.contents(atPath: "\(root!)/\(folder)/\(name)").map { String(decoding: $0, as: UTF8.self) }
    }

    /// A job publishing `content` as `name` from a fresh part `base` (unnamed when asked and
    /// the filesystem allows it).
    func job(_ base: String, name: String, content: String, unnamed: Bool = false) throws -> PublishJob {
        let part = try store.openPart(base, fresh: true, unnamed: unnamed)
        XCTAssertEqual(content.utf8.count, content.withCString { Glibc.write(part.fd, $0, content.utf8.count) })
        let marker = ItemMarker(request: "r", group: "g", index: 0, url: "http://x/\(name)", finalURL: nil, name: name,
                                bytes: Int64(content.utf8.count), sha256: "00", httpStatus: 200, etag: nil,
                                lastModified: nil, contentType: nil, startedAt: "s", finishedAt: "f", attempts: 1)
        let state = ItemState(request: "r", index: 0, url: marker.url, phase: .ready, inode: part.inode, marker: marker)
        return PublishJob(part: part, state: state, marker: marker)
    }
}
