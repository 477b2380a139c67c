import Foundation

/// Prometheus text-format documents, as text: several daemons' documents merged into one (each
/// metric family's `# HELP` and `# TYPE` once, then every daemon's samples of it — the format
/// allows a family only once per document).
public enum ExpositionText {
    public static func merge(_ documents: [String]) -> String {
        var order: [String] = []
        var headers: [String: [String]] = [:]
        var samples: [String: [String]] = [:]
        for document in documents {
            var family = ""
            for line in document.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) {
                if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                    let name = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: true)
                        .dropFirst(2).first.map(String.init) ?? ""
                    family = name
                    if headers[name] == nil { order.append(name); headers[name] = []; samples[name] = [] }
                    if !headers[name]!.contains(where: { $0.prefix(7) == line.prefix(7) }) { headers[name]!.append(line) }
                } else if line.hasPrefix("#") {
                    continue
                } else {
                    if headers[family] == nil { order.append(family); headers[family] = []; samples[family] = [] }
                    samples[family]!.append(line)
                }
            }
        }
        return order.map { (headers[$0]! + samples[$0]!).joined(separator: "\n") + "\n" }.joined()
    }
}
