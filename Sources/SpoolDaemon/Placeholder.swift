import Logging
import SpoolWatcher
import SpoolTransfer
import SpoolStore
import SpoolScheduler
public enum DaemonPlaceholder {}
