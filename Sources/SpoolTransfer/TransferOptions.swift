internal import CCurl
import Foundation

extension TransferSession {
    /// Sets every option of a fresh easy handle for `transfer`. The error buffer is already set
    /// (by `EasyHandle.init`), so a failure of any later step has libcurl's details.
    func configure(_ easy: EasyHandle, for transfer: Transfer, maxRecvSpeed: Int64) throws(TransferSetupError) {
        let request = transfer.request
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        try easy.set(.url, request.url)
        try easy.set(.noSignal, true)
        // Only http and https, also for redirects (no file://, ftp://, gopher://, dict:// …).
        try easy.set(.protocols, "http,https")
        try easy.set(.redirectProtocols, "http,https")
        try easy.set(.followLocation, true)
        try easy.set(.maxRedirects, configuration.maxRedirects)
        // Credentials never follow a redirect to another host (libcurl's default, stated here).
        try easy.set(.unrestrictedAuth, false)
        try easy.set(.sslVerifyPeer, 1)
        try easy.set(.sslVerifyHost, 2)
        if let ca = configuration.caFile {
            try easy.set(.caInfo, ca)
            // Keep the system's store as well: --ca-file adds trust, it does not replace it.
            try easy.set(.caPath, configuration.caPath ?? "/etc/ssl/certs")
        } else if let path = configuration.caPath {
            try easy.set(.caPath, path)
        } else if let bundle = SystemTrust.bundleInPlaceOfDirectory {
            // The system's store as its bundle alone, parsed once for the session (`SystemTrust`).
            try easy.set(.caInfo, bundle)
            try easy.unset(.caPath)
            try easy.set(.caCacheTimeout, SystemTrust.cacheSeconds)
        }
        if let netrc = configuration.netrcFile {
            try easy.set(.netrc, 1)     // CURL_NETRC_OPTIONAL: a URL's own user wins (spoolfetch refuses those anyway)
            try easy.set(.netrcFile, netrc)
        }
        try easy.set(.bufferSize, configuration.bufferSize)
        try easy.set(.connectTimeout, configuration.connectTimeout)
        // A stall: less than 1 byte/s for stallTimeout seconds.
        try easy.set(.lowSpeedLimit, 1)
        try easy.set(.lowSpeedTime, configuration.stallTimeout)
        try easy.set(.userAgent, configuration.userAgent)
        // HTTP/2 multiplexing over https needs PIPEWAIT. Never for plain http: there it makes a
        // transfer wait for a busy HTTP/1.1 connection instead of opening its own (one slow
        // response then holds up every other item of the host).
        if request.url.lowercased().hasPrefix("https:") {
            try easy.set(.pipeWait, true)
        }
        try easy.set(.acceptEncoding, "identity")
        if let limit = request.maxBytes {
            try easy.set(.maxFileSize, limit)
        }
        if maxRecvSpeed > 0 {
            try easy.set(.maxRecvSpeed, maxRecvSpeed)
        }
        var headers = request.headers
        if let end = request.rangeEnd {
            // A closed range: the server stops at its end, and no byte past it is sent for nothing.
            try easy.set(.range, "\(request.resumeFrom)-\(max(request.resumeFrom, end - 1))")
            if let validator = request.ifRange { headers.append("If-Range: \(validator)") }
        } else if request.resumeFrom > 0 {
            try easy.set(.range, "\(request.resumeFrom)-")
            if let validator = request.ifRange { headers.append("If-Range: \(validator)") }
        }
        if let upload = request.upload { try configureUpload(easy, upload, context: context, headers: &headers) }
        try configureIdentity(easy, request, headers: &headers)
        if !headers.isEmpty { try easy.setHeaders(headers) }
        try easy.set(.writeFunction, TransferCallbacks.write)
        try easy.set(.writeData, context)
        try easy.set(.headerFunction, TransferCallbacks.header)
        try easy.set(.headerData, context)
        try easy.set(.privateData, context)
        try configureEgress(easy, for: transfer)
    }
}
