import Foundation

/// The reason an error response gives in its body, for the item's error message: S3 and most
/// XML APIs answer `<Error><Code>SignatureDoesNotMatch</Code><Message>…</Message></Error>`, JSON
/// APIs `{"code": …, "message": …}` or `{"error": {"code": …, "message": …}}`. Only these two
/// fields are taken, never the whole body: an S3 error also echoes the access key id and the
/// string it signed. Hand-written (a few substring searches) rather than through FoundationXML:
/// two elements of a body of at most `maxBytes` do not need a parser and its library.
enum ServerErrorBody {
    /// Bytes of an error body kept to look in.
    static let maxBytes = 4096
    /// Longest reason written down.
    static let maxReason = 240

    /// `CODE: MESSAGE` (or one of them) from `body`, with each of `hiding` replaced by `…`;
    /// nil when the body has neither.
    static func reason(_ body: [UInt8], hiding: [String?] = []) -> String? {
        guard !body.isEmpty else { return nil }
        let text = String(decoding: body, as: UTF8.self)
        let trimmed = text.drop { $0 == " " || $0 == "\n" || $0 == "\r" || $0 == "\t" }
        var code: String?
        var message: String?
        if trimmed.first == "{" {
            (code, message) = json(Data(trimmed.utf8))
        } else if trimmed.first == "<" {
            code = element("Code", in: text)
            message = element("Message", in: text)
        }
        let parts = [code, message].compactMap { $0 }.filter { !$0.isEmpty }
        guard !parts.isEmpty else { return nil }
        var reason = parts.joined(separator: ": ")
        for secret in hiding.compactMap({ $0 }) where !secret.isEmpty {
            reason = reason.replacingOccurrences(of: secret, with: "…")
        }
        reason = String(reason.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : Character($0) })
        return reason.count > maxReason ? String(reason.prefix(maxReason)) + "…" : reason
    }

    /// The text of the first `<name>…</name>` (entities `&lt;` & co. decoded).
    private static func element(_ name: String, in text: String) -> String? {
        guard let open = text.range(of: "<\(name)>"),
              let close = text.range(of: "</\(name)>", range: open.upperBound..<text.endIndex) else { return nil }
        return String(text[open.upperBound..<close.lowerBound])
            .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `code` and `message` of a JSON error: top-level, or inside `error` (an object, or a string
    /// standing for the code, with `error_description` as OAuth has it).
    private static func json(_ data: Data) -> (String?, String?) {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return (nil, nil) }
        func text(_ value: Any?) -> String? {
            if let s = value as? String { return s }
            if let n = value as? NSNumber { return n.stringValue }
            return nil
        }
        func field(_ dict: [String: Any], _ names: [String]) -> String? {
            for name in names { if let value = text(dict[name]) ?? text(dict[name.capitalized]) { return value } }
            return nil
        }
        if let inner = object["error"] as? [String: Any] {
            return (field(inner, ["code", "status"]), field(inner, ["message"]))
        }
        if let code = text(object["error"]) {
            return (code, field(object, ["error_description", "message"]))
        }
        return (field(object, ["code"]), field(object, ["message"]))
    }
}
