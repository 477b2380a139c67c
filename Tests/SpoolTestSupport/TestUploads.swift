import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// A path that takes `PUT` and `POST` bodies: the response it gives, and scripted refusals.
struct UploadTarget {
    var status: Int
    var headers: [(String, String)]
    var responseBody: [UInt8]
    /// Per request in order (the last repeats): nil accepts, a status refuses at once — before
    /// the body, answering `Expect: 100-continue` with it.
    var script: [Int?]
    var hits = 0
}

/// One upload arriving on a connection.
struct UploadReception {
    let head: HTTPRequestHead
    let path: String
    let target: UploadTarget
    var body: [UInt8] = []
}

extension TestHTTPServer {
    /// Takes uploads (`PUT`, `POST`) at `path`, answering `status` with `headers` and
    /// `responseBody`; `script` refuses the first requests with its statuses (nil: accept).
    public func acceptUploads(_ path: String, status: Int = 201, headers: [(String, String)] = [],
                              responseBody: [UInt8] = [], script: [Int?] = [nil]) {
        state.withLockedValue {
            $0.uploadTargets[path] = UploadTarget(status: status, headers: headers, responseBody: responseBody,
                                                  script: script.isEmpty ? [nil] : script)
        }
    }

    /// The complete bodies received at `path`, in order (a body cut off is not among them).
    public func uploads(at path: String) -> [[UInt8]] {
        state.withLockedValue { $0.uploadsReceived[path] ?? [] }
    }

    /// Waits until at least `count` upload body bytes have arrived (woken by each arrival).
    public func waitForUploadBytes(atLeast count: Int, timeout: Double) throws {
        let deadline = Date().addingTimeInterval(timeout)
        uploadArrivals.lock()
        defer { uploadArrivals.unlock() }
        while uploadBytesReceived < count {
            guard uploadArrivals.wait(until: deadline) || uploadBytesReceived >= count else {
                throw WaitError.timedOut(what: "\(count) upload bytes at the server", after: timeout)
            }
        }
    }

    /// Body bytes of uploads received so far, complete or not, on every path.
    public var uploadBytesReceived: Int { state.withLockedValue { $0.uploadBytesReceived } }

    /// Records an upload's head and decides: nil when `path` takes no uploads; else the target, or
    /// the status that refuses this one.
    func routeUpload(_ head: HTTPRequestHead, connectionID: Int) -> (UploadTarget, refusal: Int?)? {
        guard head.method == .PUT || head.method == .POST else { return nil }
        let path = String(head.uri.split(separator: "?", maxSplits: 1).first ?? "")
        return state.withLockedValue { s in
            guard var target = s.uploadTargets[path] else { return nil }
            s.requests.append(RecordedRequest(method: "\(head.method)", path: path, uri: head.uri,
                                              headers: head.headers.map { ($0.name, $0.value) },
                                              receivedAt: Date(), connectionID: connectionID))
            if let key = s.signingKey, !Self.signatureHolds(head.uri, path: path, key: SymmetricKey(data: key)) {
                s.refusedSignatures += 1
                return (target, 403)
            }
            let refusal = target.script[min(target.hits, target.script.count - 1)]
            target.hits += 1
            s.uploadTargets[path] = target
            return (target, refusal)
        }
    }
}

extension RequestHandler {
    /// An upload's head: refused at once, or accepted (with `100 Continue` when asked). False
    /// when the request is not an upload.
    func beginUpload(context: ChannelHandlerContext, head: HTTPRequestHead) -> Bool {
        guard let (target, refusal) = server.routeUpload(head, connectionID: connectionID) else { return false }
        if let refusal {
            droppingUpload = true
            let text = Array("refused \(refusal)\n".utf8)
            var headers = HTTPHeaders([("Content-Length", "\(text.count)"), ("Content-Type", "text/plain")])
            headers.add(name: "Connection", value: "close")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .init(statusCode: refusal),
                                                                 headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: text)))), promise: nil)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in bound.value.close(promise: nil) }
            return true
        }
        let path = String(head.uri.split(separator: "?", maxSplits: 1).first ?? "")
        upload = UploadReception(head: head, path: path, target: target)
        if head.headers["Expect"].contains(where: { $0.lowercased() == "100-continue" }) {
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
        }
        return true
    }

    func receiveUpload(_ buffer: ByteBuffer) {
        let count = buffer.readableBytes
        if droppingUpload || upload != nil {
            server.state.withLockedValue { $0.uploadBytesReceived += count }
            server.uploadArrivals.lock()
            server.uploadArrivals.broadcast()
            server.uploadArrivals.unlock()
        }
        guard upload != nil else { return }
        upload!.body.append(contentsOf: buffer.readableBytesView)
    }

    /// The upload's end: its body recorded, the target's response sent. False when no upload
    /// was under way.
    func finishUpload(context: ChannelHandlerContext) -> Bool {
        if droppingUpload { droppingUpload = false; return true }
        guard let received = upload else { return false }
        upload = nil
        server.state.withLockedValue { $0.uploadsReceived[received.path, default: []].append(received.body) }
        var headers = HTTPHeaders(received.target.headers)
        headers.replaceOrAdd(name: "Content-Length", value: "\(received.target.responseBody.count)")
        send(context, received.head, .init(statusCode: received.target.status), headers,
             body: ArraySlice(received.target.responseBody), mode: .whole)
        return true
    }
}
