import SpoolCore
import SpoolTransfer

/// The daemon's answers to the transfer layer's `BodyRoomRules`: the space rules (`SpaceGate`)
/// over the item the transfer belongs to and the other running transfers. Why a type of its
/// own: the session asks from inside libcurl's write callback, by transfer key, and only the
/// driver knows which item a key is.
final class BodyRoomAnswers: BodyRoomRules {
    private let space: SpaceGate
    /// The driver owns the session, which holds this: unowned, or the three never go.
    private unowned let driver: TransferDriver

    init(space: SpaceGate, driver: TransferDriver) {
        self.space = space
        self.driver = driver
    }

    func answer(key: Int, total: Int64, needed: Int64) -> BodyRoomAnswer {
        guard let record = driver.running[key] else { return .fits }
        switch space.answer(body: total, needed: needed, for: record, running: driver.running.values) {
        case .fits:
            // From now on the other transfers' starts reserve what this body still needs.
            if record.expectedBytes == nil { record.noteAnnounced(bytes: total) }
            return .fits
        case .later(let why): return .later(why)
        case .never(let why): return .never(why)
        }
    }

    func roomForUnsizedBody(key: Int) -> UnsizedRoom? {
        guard let (room, figures) = space.roomForUnsizedBody() else { return nil }
        return UnsizedRoom(room: room, othersWriting: driver.running.keys.contains { $0 != key }, figures: figures)
    }
}
