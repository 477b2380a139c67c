/// How a response's header lines become its `ResponseFacts`: parsed as bytes in libcurl's header
/// callback, on the transfers' thread, once per line of every response (redirects and interim
/// ones too), so names are compared as bytes and a String is made only for a kept value.
extension ResponseFacts {
    /// Takes one header line of any response, including redirects and interim responses: a
    /// status line starts the facts afresh (keeping the count of redirects); of the other
    /// lines only the few headers the daemon acts on are kept.
    mutating func take(headerLine line: UnsafeBufferPointer<UInt8>) {
        var end = line.count
        while end > 0, line[end - 1] == 0x0A || line[end - 1] == 0x0D { end -= 1 }
        let bytes = UnsafeBufferPointer(rebasing: line[0..<end])
        if bytes.starts(with: "HTTP/".utf8) {
            // A new response starts: forget the headers of the previous (redirect) one.
            let redirects = self.redirects
            let sawResponse = httpStatus != 0
            self = ResponseFacts()
            self.redirects = redirects + (sawResponse ? 1 : 0)
            // The status code: the digits after the first space, read as bytes (splitting a
            // String of the line cost more than the rest of the response's headers together).
            if let space = bytes.firstIndex(of: 0x20) {
                var i = space + 1, status = 0
                while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39, status < 100_000_000 {
                    status = status * 10 + Int(bytes[i] - 0x30)
                    i += 1
                }
                if i > space + 1, i == bytes.count || bytes[i] == 0x20 { self.httpStatus = status }
            }
            self.multiplexed = !bytes.starts(with: "HTTP/1".utf8)
            return
        }
        guard let colon = bytes.firstIndex(of: 0x3A) else { return }
        // Only a few headers matter; compare names as bytes before making any String.
        let name = UnsafeBufferPointer(rebasing: bytes[0..<colon])
        func named(_ wanted: StaticString) -> Bool {
            guard name.count == wanted.utf8CodeUnitCount else { return false }
            let w = UnsafeBufferPointer(start: wanted.utf8Start, count: wanted.utf8CodeUnitCount)
            for i in 0..<name.count where name[i] | 0x20 != w[i] { return false }
            return true
        }
        var value: String {
            // Header values are ISO-8859-1 at worst; anything non-ASCII is kept as is. Spaces and
            // tabs are trimmed as bytes: Foundation's trimmingCharacters goes through NSString and
            // cost more than the rest of the header callback together.
            var start = colon + 1, end = bytes.count
            while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
            while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        }
        if named("etag") { self.etag = value }
        else if named("last-modified") { self.lastModified = value }
        else if named("date") { self.date = value }
        else if named("content-type") { self.contentType = value }
        else if named("content-length") { self.contentLength = Int64(value) }
        else if named("location") { self.location = value }
        else if named("accept-ranges") { self.acceptsRanges = Self.containsBytes(UnsafeBufferPointer(rebasing: bytes[(colon + 1)...])) }
        else if name.count >= 9, name[0] | 0x20 == UInt8(ascii: "r") || name[0] | 0x20 == UInt8(ascii: "x"),
                let header = Self.rateLimitHeader(name) {
            self.rateLimitHeaders[header] = value
        }
        else if named("retry-after") {
            let v = value
            if let seconds = Double(v) { self.retryAfter = max(0, seconds) }
            else if let date = HTTPDate.parse(v) { self.retryAfter = max(0, date.timeIntervalSinceNow) }
        } else if named("content-range") {
            // bytes a-b/total  or  bytes */total
            let v = value
            let spec = v.hasPrefix("bytes ") ? v.dropFirst(6) : Substring(v)
            let halves = spec.split(separator: "/", maxSplits: 1)
            if halves.count == 2 {
                self.rangeTotal = Int64(halves[1])
                if let dash = halves[0].firstIndex(of: "-") { self.rangeStart = Int64(halves[0][..<dash]) }
            }
        }
    }

    /// Whether an `Accept-Ranges` value names `bytes`, in any case (compared as bytes: Foundation's
    /// search of a lowercased String cost 4,500 instructions a response).
    static func containsBytes(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        let wanted: StaticString = "bytes"
        let count = wanted.utf8CodeUnitCount
        guard value.count >= count else { return false }
        for start in 0...(value.count - count) {
            var i = 0
            while i < count, value[start + i] | 0x20 == wanted.utf8Start[i] { i += 1 }
            if i == count { return true }
        }
        return false
    }

    /// The lowercased name of a rate-limit header (`RateLimit`, `RateLimit-Policy`,
    /// `RateLimit-Remaining`, `X-RateLimit-Reset` …), nil for any other.
    static func rateLimitHeader(_ name: UnsafeBufferPointer<UInt8>) -> String? {
        let lower = String(decoding: name, as: UTF8.self).lowercased()
        return lower.hasPrefix("ratelimit") || lower.hasPrefix("x-ratelimit") ? lower : nil
    }
}
