import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// What the server does for the N-th request (0-based) to a path: `script[min(N, count-1)]`.
public enum ResponseBehavior: Sendable {
    /// 200 with the whole body, or 206 for a satisfiable `Range: bytes=A-[B]` when `If-Range` is
    /// absent or matches the ETag / Last-Modified; an If-Range mismatch gives 200 with the whole
    /// body; an unsatisfiable range gives 416 with `Content-Range: bytes */SIZE`.
    case normal
    /// Like `.normal` but ignores `Range` (always 200, no Accept-Ranges).
    case ignoreRange
    /// Like `.normal` but ignores `If-Range`: a range (or 416) of the current version whatever
    /// validator the request names, as a broken server would answer.
    case ignoreIfRange
    /// Like `.normal` but chunked, without Content-Length.
    case chunked
    /// A bare status with extra headers and a short text body.
    case status(Int, [(String, String)] = [])
    /// A redirect (302 by default) to an absolute URL or a path.
    case redirect(to: String, code: Int = 302)
    /// Starts like `.normal`, sends `afterBytes` bytes of the (possibly ranged) body, then closes.
    case cut(afterBytes: Int)
    /// Starts like `.normal`, sends `afterBytes` bytes, then nothing more (the connection stays open).
    case stall(afterBytes: Int)
    /// Like `.normal`, sending `chunkSize` bytes every `interval`.
    case slow(chunkSize: Int, interval: TimeAmount)
    /// Like `.normal`, answered `delay` after the request (a distant or busy origin); the
    /// server counts how many such requests wait at once (`maxConcurrentDelayed`).
    case delayed(TimeAmount)
    /// Like `.ignoreIfRange`, but of another version of the resource (`body` under `etag`), as
    /// when it changed between two requests and the server ignores `If-Range`.
    case version(body: [UInt8], etag: String)
}

/// A request as the server saw it.
public struct RecordedRequest: Sendable {
    public let method: String
    public let path: String
    public let uri: String
    public let headers: [(name: String, value: String)]
    public let receivedAt: Date
    public let connectionID: Int

    /// First value of a header, case-insensitive.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// An in-process HTTP/1.1 server on 127.0.0.1 with scripted faults, for end-to-end tests.
public final class TestHTTPServer: Sendable {
    struct Resource {
        var body: [UInt8]
        var etag: String?
        var lastModified: String?
        var contentType: String
        var script: [ResponseBehavior]
        var hits = 0
    }
    struct State {
        var resources: [String: Resource] = [:]
        var requests: [RecordedRequest] = []
        var connections = 0
        /// When set, every request must carry a valid, unexpired signature (`signedURL`).
        var signingKey: [UInt8]?
        var refusedSignatures = 0
        var bodyBytesSent = 0
        /// Paths that take uploads (`acceptUploads`), and what arrived (see `TestUploads.swift`).
        var uploadTargets: [String: UploadTarget] = [:]
        var uploadsReceived: [String: [[UInt8]]] = [:]
        var uploadBytesReceived = 0
        var delayedNow = 0
        var maxDelayedAtOnce = 0
    }

    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    let state = NIOLockedValueBox(State())
    /// Signalled whenever upload bytes arrive (`waitForUploadBytes`).
    let uploadArrivals = NSCondition()
    public let port: Int
    /// The address it listens on (127.0.0.1 unless `start(host:)` said another).
    public let host: String

    private init(group: MultiThreadedEventLoopGroup, channel: Channel, host: String) {
        self.group = group
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
        self.host = host
    }

    /// Binds 127.0.0.1 (or another loopback address, `host`) on an ephemeral port (or on `port`:
    /// a server back on a port that was closed).
    public static func start(port: Int = 0, host: String = "127.0.0.1") throws -> TestHTTPServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let box = NIOLockedValueBox<TestHTTPServer?>(nil)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard let server = box.withLockedValue({ $0 }) else { throw ChannelError.ioOnClosedChannel }
                    let id = server.state.withLockedValue { s in s.connections += 1; return s.connections }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(RequestHandler(server: server, connectionID: id))
                }
            }
        let channel = try bootstrap.bind(host: host, port: port).wait()
        let server = TestHTTPServer(group: group, channel: channel, host: host)
        box.withLockedValue { $0 = server }
        return server
    }

    public func url(_ path: String) -> String { "http://\(host):\(port)\(path)" }

    /// Connections accepted so far (a connection that sent no request counts too).
    public var connectionCount: Int { state.withLockedValue { $0.connections } }

    /// Registers or replaces the resource at `path` (its request counter restarts at 0).
    public func serve(_ path: String, body: [UInt8], etag: String? = nil, lastModified: String? = nil,
                      contentType: String = "application/octet-stream", script: [ResponseBehavior] = [.normal]) {
        state.withLockedValue {
            $0.resources[path] = Resource(body: body, etag: etag, lastModified: lastModified, contentType: contentType,
                                          script: script.isEmpty ? [.normal] : script)
        }
    }

    public func requests(for path: String) -> [RecordedRequest] {
        state.withLockedValue { $0.requests.filter { $0.path == path } }
    }

    public var allRequests: [RecordedRequest] { state.withLockedValue { $0.requests } }

    /// From now on, a request is served only with a valid signature that has not expired, as
    /// S3 or a CDN would: else 403 (which does not count as one of its resource's requests).
    public func requireSignedURLs(key: String) {
        state.withLockedValue { $0.signingKey = Array(key.utf8) }
    }

    /// A URL for `path` signed for `seconds` from now: HMAC-SHA256 of the path and the expiry.
    /// `readable`: `Expires` (Unix seconds) and `Signature`, a form spoolfetch reads the expiry
    /// from (CloudFront's); otherwise `exp` and `sig`, which it cannot read (the server's 403 is
    /// the only sign of expiry).
    public func signedURL(_ path: String, validFor seconds: Double, readable: Bool = true) -> String {
        let expires = Int(Date().timeIntervalSince1970 + seconds)
        let key = SymmetricKey(data: state.withLockedValue { $0.signingKey } ?? [])
        let signature = Self.signature(path: path, expires: expires, key: key)
        return url(path) + (readable ? "?Expires=\(expires)&Signature=\(signature)" : "?exp=\(expires)&sig=\(signature)")
    }

    /// Requests refused for a missing, wrong or expired signature.
    public var refusedSignatures: Int { state.withLockedValue { $0.refusedSignatures } }
    /// Body bytes sent so far, over all responses.
    public var bodyBytesSent: Int { state.withLockedValue { $0.bodyBytesSent } }

    static func signature(path: String, expires: Int, key: SymmetricKey) -> String {
        HMAC<SHA256>.authenticationCode(for: Data("\(path)\n\(expires)".utf8), using: key)
            .map { String(format: "%02x", $0) }.joined()
    }

    /// Whether `uri` carries a valid signature that has not expired.
    static func signatureHolds(_ uri: String, path: String, key: SymmetricKey) -> Bool {
        let query = uri.split(separator: "?", maxSplits: 1).dropFirst().first ?? ""
        var values: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { values[String(kv[0])] = String(kv[1]) }
        }
        guard let expires = Int(values["Expires"] ?? values["exp"] ?? ""),
              let signature = values["Signature"] ?? values["sig"] else { return false }
        return signature == Self.signature(path: path, expires: expires, key: key)
            && Date().timeIntervalSince1970 <= Double(expires)
    }

    /// The most `.delayed` requests that were waiting for their answer at one time.
    public var maxConcurrentDelayed: Int { state.withLockedValue { $0.maxDelayedAtOnce } }

    func delayBegan() {
        state.withLockedValue { $0.delayedNow += 1; $0.maxDelayedAtOnce = max($0.maxDelayedAtOnce, $0.delayedNow) }
    }
    func delayEnded() { state.withLockedValue { $0.delayedNow -= 1 } }

    func countSent(_ bytes: Int) { state.withLockedValue { $0.bodyBytesSent += bytes } }

    public func shutdown() throws {
        try? channel.close().wait()
        try group.syncShutdownGracefully()
    }

    /// Records the request and picks the behaviour for it.
    func route(_ head: HTTPRequestHead, connectionID: Int) -> (Resource?, ResponseBehavior) {
        let path = String(head.uri.split(separator: "?", maxSplits: 1).first ?? "")
        return state.withLockedValue { s in
            s.requests.append(RecordedRequest(method: "\(head.method)", path: path, uri: head.uri,
                                              headers: head.headers.map { ($0.name, $0.value) },
                                              receivedAt: Date(), connectionID: connectionID))
            guard var resource = s.resources[path] else { return (nil, .status(404)) }
            if let key = s.signingKey, !Self.signatureHolds(head.uri, path: path, key: SymmetricKey(data: key)) {
                s.refusedSignatures += 1
                return (nil, .status(403))
            }
            let behavior = resource.script[min(resource.hits, resource.script.count - 1)]
            resource.hits += 1
            s.resources[path] = resource
            return (resource, behavior)
        }
    }
}

/// Serves one connection.
final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let server: TestHTTPServer
    let connectionID: Int
    private var head: HTTPRequestHead?
    /// An upload being received (see `TestUploads.swift`).
    var upload: UploadReception?
    /// A refused upload's body is dropped until its end.
    var droppingUpload = false

    init(server: TestHTTPServer, connectionID: Int) {
        self.server = server
        self.connectionID = connectionID
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            if beginUpload(context: context, head: h) { head = nil }
        case .body(let buffer):
            receiveUpload(buffer)
        case .end:
            if finishUpload(context: context) { return }
            guard let head else { return }
            self.head = nil
            respond(context: context, head: head)
        }
    }

    private func respond(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let (resource, behavior) = server.route(head, connectionID: connectionID)
        answer(context: context, head: head, resource: resource, behavior: behavior)
    }

    private func answer(context: ChannelHandlerContext, head: HTTPRequestHead,
                        resource: TestHTTPServer.Resource?, behavior: ResponseBehavior) {
        switch behavior {
        case .version(let body, let etag):
            var changed = resource
            changed?.body = body
            changed?.etag = etag
            answer(context: context, head: head, resource: changed, behavior: .ignoreIfRange)
        case .delayed(let delay):
            server.delayBegan()
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
                self.server.delayEnded()
                self.answer(context: bound.value, head: head, resource: resource, behavior: .normal)
            }
        case .status(let code, let extra):
            let text = Array("status \(code)\n".utf8)
            var headers = HTTPHeaders(extra.map { ($0.0, $0.1) })
            headers.replaceOrAdd(name: "Content-Length", value: "\(text.count)")
            headers.replaceOrAdd(name: "Content-Type", value: "text/plain")
            send(context, head, .init(statusCode: code), headers, body: ArraySlice(text), mode: .whole)
        case .redirect(let location, let code):
            var headers = HTTPHeaders([("Location", location), ("Content-Length", "0")])
            headers.add(name: "Content-Type", value: "text/plain")
            send(context, head, .init(statusCode: code), headers, body: [], mode: .whole)
        case .normal, .ignoreRange, .ignoreIfRange, .chunked, .cut, .stall, .slow:
            guard let resource else { return }
            var ignoreRange = false, ignoreIfRange = false
            var mode = SendMode.whole
            switch behavior {
            case .ignoreRange: ignoreRange = true
            case .ignoreIfRange: ignoreIfRange = true
            case .chunked: mode = .chunked
            case .cut(let n): mode = .cut(n)
            case .stall(let n): mode = .stall(n)
            case .slow(let size, let interval): mode = .slow(size, interval)
            default: break
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: resource.contentType)
            if let etag = resource.etag { headers.add(name: "ETag", value: etag) }
            if let lm = resource.lastModified { headers.add(name: "Last-Modified", value: lm) }
            if !ignoreRange { headers.add(name: "Accept-Ranges", value: "bytes") }
            let size = resource.body.count
            var status = HTTPResponseStatus.ok
            var slice = resource.body[...]
            if !ignoreRange, let range = head.headers.first(name: "Range"), let (start, end) = Self.parseRange(range, size: size) {
                let ifRange = head.headers.first(name: "If-Range")
                let validatorMatches = ifRange == nil || ifRange == resource.etag || ifRange == resource.lastModified
                    || ignoreIfRange
                if validatorMatches {
                    if start >= size {
                        headers.add(name: "Content-Range", value: "bytes */\(size)")
                        headers.add(name: "Content-Length", value: "0")
                        send(context, head, .rangeNotSatisfiable, headers, body: [], mode: .whole)
                        return
                    }
                    let last = min(end ?? size - 1, size - 1)
                    status = .partialContent
                    slice = resource.body[start...last]
                    headers.add(name: "Content-Range", value: "bytes \(start)-\(last)/\(size)")
                }
            }
            if case .chunked = mode {} else { headers.add(name: "Content-Length", value: "\(slice.count)") }
            send(context, head, status, headers, body: slice, mode: mode)
        }
    }

    enum SendMode {
        case whole, chunked, cut(Int), stall(Int), slow(Int, TimeAmount)
    }

    /// `bytes=A-` or `bytes=A-B`.
    static func parseRange(_ value: String, size: Int) -> (Int, Int?)? {
        guard value.hasPrefix("bytes=") else { return nil }
        let spec = value.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard spec.count == 2, let start = Int(spec[0]) else { return nil }
        return (start, spec[1].isEmpty ? nil : Int(spec[1]))
    }

    func send(_ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ status: HTTPResponseStatus,
                      _ headers: HTTPHeaders, body: ArraySlice<UInt8>, mode: SendMode) {
        var headers = headers
        if case .chunked = mode { headers.add(name: "Transfer-Encoding", value: "chunked") }
        let keepAlive = request.isKeepAlive
        headers.replaceOrAdd(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))),
                      promise: nil)
        if request.method == .HEAD {
            finish(context, keepAlive: keepAlive)
            return
        }
        var limit = body.count
        var chunk = 64 * 1024
        var interval: TimeAmount? = nil
        var after: After = .end
        switch mode {
        case .cut(let n): limit = min(n, body.count); after = .close
        case .stall(let n): limit = min(n, body.count); after = .nothing
        case .slow(let size, let every): chunk = max(1, size); interval = every
        default: break
        }
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        sendSlices(loopBound, body: body, offset: 0, limit: limit, chunk: chunk, interval: interval, after: after,
                   keepAlive: keepAlive)
    }

    enum After { case end, close, nothing }

    private func sendSlices(_ bound: NIOLoopBound<ChannelHandlerContext>, body: ArraySlice<UInt8>, offset: Int, limit: Int,
                            chunk: Int, interval: TimeAmount?, after: After, keepAlive: Bool) {
        let context = bound.value
        guard offset < limit else {
            switch after {
            case .end: finish(context, keepAlive: keepAlive)
            case .close: context.flush(); context.close(promise: nil)
            case .nothing: context.flush()
            }
            return
        }
        let end = min(limit, offset + chunk)
        let start = body.startIndex + offset
        let buffer = context.channel.allocator.buffer(bytes: body[start..<(body.startIndex + end)])
        server.countSent(end - offset)
        let written = context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))))
        let next = { [self] in
            self.sendSlices(bound, body: body, offset: end, limit: limit, chunk: chunk, interval: interval,
                            after: after, keepAlive: keepAlive)
        }
        written.assumeIsolated().whenComplete { result in
            guard case .success = result else { return }
            if let interval {
                context.eventLoop.assumeIsolated().scheduleTask(in: interval) { next() }
            } else {
                next()
            }
        }
    }

    private func finish(_ context: ChannelHandlerContext, keepAlive: Bool) {
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.assumeIsolated().whenComplete { _ in bound.value.close(promise: nil) }
        }
    }
}
