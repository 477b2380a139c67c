internal import CCurl

/// The connections of a segmented body's pieces (see `SegmentSet`).
///
/// Every piece asks its closed range over HTTP/1.1 on a connection that no other transfer uses
/// while it runs (a throttling server caps each connection, not each stream). A finished piece's
/// connection carries the next piece: no new TCP and TLS handshake on either side, its window and
/// buffers already grown, and no new load of the CA file (libcurl caches it only when no CA path
/// is set, and spoolfetch sets one with `--ca-file`). 256 MiB over HTTPS/2 from Caddy on loopback
/// took about 50 pieces, each on a fresh connection before, on two cores shared with the server.
///
/// Where the item's own transfer is HTTP/1.1, the pieces' connections are the host's like any
/// other, and the host's next items reuse them. Behind an HTTP/2 primary they must not: libcurl
/// hands an idle connection of the host to whichever transfer asks next, and an item that wanted
/// a stream of the host's HTTP/2 connection would run alone over HTTP/1.1 on it. So there the
/// pieces keep a pool of their own: libcurl matches a connection only to a transfer with equal
/// TLS settings, and the pieces ask for TLS "up to the library's highest version"
/// (`CURL_SSLVERSION_MAX_DEFAULT`), which OpenSSL treats exactly as the unset default the
/// primaries keep (`SSL_CTX_set_max_proto_version(ctx, 0)` for both), but which libcurl stores,
/// and compares, as another value. Pieces of later bodies from the host take them up; the server
/// closes them when idle, or libcurl when its pool is full.
extension TransferSession {
    func configurePieceConnection(_ easy: EasyHandle, behind primary: Transfer) throws(TransferSetupError) {
        try easy.set(.pipeWait, false)
        try easy.set(.httpVersion, Int(CURL_HTTP_VERSION_1_1))
        try easy.set(.freshConnect, false)
        try easy.set(.forbidReuse, false)
        if primary.easy.long(CURLINFO_HTTP_VERSION) >= Int(CURL_HTTP_VERSION_2_0) {
            try easy.set(.sslVersion, Int(CURL_SSLVERSION_DEFAULT) | Int(CURL_SSLVERSION_MAX_DEFAULT))
        }
    }
}
