import Foundation

/// What operators see and say: the status report, the Prometheus numbers, and the commands
/// dropped into `control/`. Each owns its state; together they are the daemon's face.
final class Operators {
    let status: StatusReporter
    /// The Prometheus numbers and where they are written (see `MetricsWriter`).
    let metrics: MetricsWriter
    let control: ControlHandler

    init(status: StatusReporter, metrics: MetricsWriter, control: ControlHandler) {
        self.status = status
        self.metrics = metrics
        self.control = control
    }
}
