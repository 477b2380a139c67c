import Foundation

/// What a folder's filesystem gives the spool, found once at start so the daemon can say which
/// methods it uses where (a spool on NFS or FUSE works, differently).
public struct FolderTraits: Sendable, Hashable {
    /// The folder's role: `incoming/`, `active/`, `staging/`, `final`.
    public var role: String
    public var path: String
    /// How moves out of this folder avoid replacing a taken name.
    public var renameMethod: RenameMethod
    /// How data written here is made durable.
    public var syncMethod: SyncMethod
    /// false: the filesystem reports no size, so no space is reserved ahead there.
    public var spaceIsKnown: Bool
}

extension SpoolLayout {
    /// The folders whose moves and writes are commit points: `incoming/` (claims), `active/`
    /// (filing requests), `staging/` (publishing data and journals), and the final folder
    /// (markers). Probing each costs a create, a rename and an unlink of a dotfile.
    public func folderTraits() -> [FolderTraits] {
        var folders: [(String, Directory)] = [("incoming/", incoming), ("active/", active), ("staging/", staging)]
        folders.append(("final", final))
        return folders.map { role, folder in
            FolderTraits(role: role, path: folder.path, renameMethod: folder.renameMethod,
                         syncMethod: folder.syncMethod, spaceIsKnown: folder.spaceIsKnown)
        }
    }
}
