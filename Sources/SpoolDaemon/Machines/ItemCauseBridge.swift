import Foundation
import SpoolCore
import SpoolStore

// The core's `ItemCause` and its record in the spool's files (`FailureCause`): the same fields,
// one conversion each way (the record read back from a state file of an adopted item).

extension FailureCause {
    init(_ cause: ItemCause) {
        self.init(code: cause.code, message: cause.message, host: cause.host, httpStatus: cause.httpStatus,
                  curlCode: cause.curlCode, attempts: cause.attempts, waitingFor: cause.waitingFor)
    }
}

extension ItemCause {
    init(_ record: FailureCause) {
        self.init(code: record.code, message: record.message, host: record.host, httpStatus: record.httpStatus,
                  curlCode: record.curlCode, attempts: record.attempts, waitingFor: record.waitingFor)
    }
}
