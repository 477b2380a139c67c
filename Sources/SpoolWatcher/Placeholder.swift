internal import CInotifyTools
public enum WatcherPlaceholder { public static func x() -> Int32 { inotifytools_initialize() } }
