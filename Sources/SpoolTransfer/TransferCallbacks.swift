internal import CCurl
internal import CLinux

/// The C entry points libcurl calls. Each turns `context` back into its `Transfer`.
enum TransferCallbacks {
    static let write: spoolfetch_data_callback = { data, size, count, context in
        let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
        let total = size * count
        guard let data else { return total }
        // libcurl keeps a refused chunk and hands it over again after the gate resumes it.
        if !transfer.gate.admit(transfer, bytes: total) { return spoolfetch_writefunc_pause() }
        return transfer.write(UnsafeRawBufferPointer(start: data, count: total)) ? total : 0
    }

    static let header: spoolfetch_data_callback = { data, size, count, context in
        let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
        let total = size * count
        guard let data else { return total }
        transfer.header(UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self),
                                            count: total))
        return transfer.refusesRedirect() ? 0 : total
    }
}
