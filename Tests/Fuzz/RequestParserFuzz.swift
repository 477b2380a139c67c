// libFuzzer entry point for the request parser (built by scripts/fuzz-parser with
// `swiftc -sanitize=fuzzer,address` together with Sources/SpoolRequest). Any crash, hang or
// sanitizer report is a finding; a parse that returns must satisfy the invariants below.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    do {
        let file = try RequestParser.parse(fileName: "fuzz", bytes: bytes, limits: ParseLimits(maxBytes: 65_536, maxItems: 100))
        precondition(!file.items.isEmpty && file.items.count <= 100)
        precondition(PlainName.violation(of: file.group) == nil)
        for item in file.items {
            precondition(PlainName.violation(of: item.name) == nil, "an accepted name breaks the rule")
            precondition(item.url.scheme == "http" || item.url.scheme == "https")
            for header in item.headers {
                precondition(!header.value.contains("\r") && !header.value.contains("\n"))
            }
        }
    } catch {
        precondition(!error.rule.isEmpty && !error.message.isEmpty)
    }
    return 0
}
