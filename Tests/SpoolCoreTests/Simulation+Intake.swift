import Foundation
import SpoolCore
import SpoolRequest

extension SimDaemon {
    /// What the daemon's parser makes of request `name`'s text as its producer (or the retry)
    /// wrote it: `RequestParser.index` within the daemon's default `ParseLimits`, as
    /// `Intake.parse` indexes a claimed file. The items the worker makes are the index's, in file
    /// order (each the world's item of that index); nil when the text is refused, and then no
    /// item and no group may be made (the daemon files it in `rejected/`).
    func parsedItems(_ name: String) -> [Int]? {
        let request = world.request(name)
        guard let text = world.operatorSpool.texts[name] else {
            violation = "request \(name) was claimed with no text written"
            return nil
        }
        let index: RequestIndex
        do { index = try RequestParser.index(fileName: name, bytes: Array(text.utf8), limits: ParseLimits()) } catch {
            world.log("\(name) rejected by the parser: \(error.description)")
            world.requestRejected(name)
            return nil
        }
        let ids = index.items.map { Int($0.index) < request.items.count ? request.items[Int($0.index)] : -1 }
        guard ids == request.items else {
            violation = "request \(name): the parser's items \(index.items.map(\.index)) are not the \(request.items.count) written"
            return nil
        }
        return ids
    }
}

extension Simulation {
    /// Now and then (drawn aside) a producer drops a malformed request file beside the good
    /// ones: it holds no item the world knows, and must end in `rejected/` with no item made.
    func dropMalformedRequest(after name: String, worker w: Int) -> Bool {
        var side = sideRandom("malformed \(name)")
        guard side.chance(0.03) else { return false }
        let bad = name + "-bad"
        let texts = ["url: http://h1/x\nretries: many\n", "name: nothing\n", "url: ftp://h1/x\n"]
        operatorSpool.texts[bad] = texts[side.below(texts.count)]
        addMalformed(bad)
        log("request \(bad) dropped: malformed, claimed by \(workersForChecks[w].name)")
        workersForChecks[w].claim(bad)
        if workersForChecks[w].groups[bad] != nil || !request(bad).items.isEmpty {
            workersForChecks[w].violation = "malformed request \(bad) was taken in"
        }
        if requestFolder(bad) != .rejected {
            workersForChecks[w].violation = "malformed request \(bad) did not end in rejected/"
        }
        return true
    }
}

extension Simulation {
    /// Now and then (drawn aside, while faults are on) one of a dying worker's requests no longer
    /// parses for its adopter (say a reload lowered `max-items` since its claim): the adopter
    /// files it in `rejected/` and its ledger drops the adoption, so the dead worker's journals
    /// still go once the other adopted requests end (checked when everything has ended).
    func refuseOnAdoption(_ adopted: [String]) {
        guard faultsOn, !adopted.isEmpty else { return }
        var side = sideRandom("refused on adoption \(kills)")
        guard side.chance(0.04) else { return }
        let name = adopted[side.below(adopted.count)]
        refusedOnAdoption.insert(name)
        log("request \(name) will not parse for its adopter")
    }
}
