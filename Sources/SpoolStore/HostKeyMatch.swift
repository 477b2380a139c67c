import Foundation

/// How an operator names a host (`spoolfetch probe HOST`): as `status` shows it, `HOST:PORT`
/// for that one, or `HOST` for every port of it. One rule for the client that picks the daemons
/// to ask and the daemon that picks its held hosts.
public enum HostKeyMatch {
    /// Whether `host` names `hostKey` (a scheduler's `host:port`; an IPv6 host is bracketed).
    public static func names(_ host: String, _ hostKey: String) -> Bool {
        hostKey == host || (hostKey.hasPrefix(host + ":") && hostKey.dropFirst(host.count + 1).allSatisfy(\.isNumber))
    }
}
