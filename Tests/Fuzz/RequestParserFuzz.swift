// libFuzzer entry point for the request parser (built by scripts/fuzz-parser with
// `swiftc -sanitize=fuzzer,address` together with Sources/SpoolRequest). Any crash, hang or
// sanitizer report is a finding; a parse that returns must satisfy the invariants below, and the
// streaming index must agree with the whole parse (same verdict, same rejection, and every item
// re-read from its slice equal to the parsed item).
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let limits = ParseLimits(maxBytes: 65_536, maxItems: 100)
    let parsed: Result<RequestFile, RequestRejection> = Result { () throws(RequestRejection) in
        try RequestParser.parse(fileName: "fuzz", bytes: bytes, limits: limits)
    }
    let indexed: Result<RequestIndex, RequestRejection> = Result { () throws(RequestRejection) in
        try RequestParser.index(fileName: "fuzz", bytes: bytes, limits: limits)
    }
    switch (parsed, indexed) {
    case (.success(let file), .success(let index)):
        precondition(!file.items.isEmpty && file.items.count <= 100)
        precondition(PlainName.violation(of: file.group) == nil)
        precondition(index.group == file.group && index.items.count == file.items.count)
        for (item, summary) in zip(file.items, index.items) {
            precondition(PlainName.violation(of: item.name) == nil, "an accepted name breaks the rule")
            precondition(item.url.scheme == "http" || item.url.scheme == "https")
            for header in item.headers {
                precondition(!header.value.contains("\r") && !header.value.contains("\n"))
            }
            let slice = bytes[Int(summary.offset)..<Int(summary.offset) + Int(summary.length)]
            let again = try? RequestParser.item(summary, in: index, bytes: slice)
            precondition(again == item, "an item re-read from its slice differs from the parsed one")
        }
    case (.failure(let a), .failure(let b)):
        precondition(!a.rule.isEmpty && !a.message.isEmpty)
        precondition(a == b, "index and parse reject differently")
    default:
        preconditionFailure("index and parse disagree on whether the file is valid")
    }
    return 0
}
