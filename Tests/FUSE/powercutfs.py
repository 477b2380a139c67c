#!/usr/bin/python3
"""powercutfs: a FUSE passthrough over a backing folder that behaves like a network or FUSE
filesystem at its least helpful, for spoolfetch's tests.

- rename with flags (RENAME_NOREPLACE, RENAME_EXCHANGE) fails with EINVAL, as on NFS and most
  FUSE filesystems;
- statfs reports all zeros (total, free and available blocks), as sshfs, rclone and s3fs often do;
- syncfs reaches nothing: data written but not fsync'ed / fdatasync'ed stays in this process's
  own cache (the backing file keeps the last synced content); fsync and fdatasync write it back;
- a power cut drops that cache: every file reverts to its last synced content, and a file created
  but never synced is empty. Names (create, rename, link, unlink, mkdir) go to the backing folder
  at once, like a journaling filesystem's metadata.

Every file is opened with direct_io and attributes are never cached, so the kernel's page cache
cannot hide the cut.

Usage: powercutfs.py BACKING MOUNTPOINT. Prints "mounted" on stdout once the mount is up.
The cut: stat(MOUNTPOINT/.powercut) — answered ENOENT after the cache was dropped, so the
caller knows the cut happened when its stat returns. stat(MOUNTPOINT/.cached) answers ENOENT
too and logs the number of cached (unsynced) files on stderr (a debugging aid).
Unmount with `fusermount3 -u MOUNTPOINT` (or `umount`); the process then exits.
"""
import errno
import os
import stat as statmod
import sys

import pyfuse3
import trio

POWER_CUT = b".powercut"
SHOW_CACHE = b".cached"


def fuse_error(e):
    return pyfuse3.FUSEError(e.errno if isinstance(e, OSError) and e.errno else errno.EIO)


class Node:
    """One backing inode: an O_PATH descriptor (so renames of its folders never lose it) and
    the kernel's lookup count."""
    __slots__ = ("fd", "lookups")

    def __init__(self, fd):
        self.fd = fd
        self.lookups = 0


class PowerCutFS(pyfuse3.Operations):
    def __init__(self, backing):
        super().__init__()
        root_fd = os.open(backing, os.O_PATH | os.O_DIRECTORY)
        self.root_ino = os.fstat(root_fd).st_ino
        self.nodes = {pyfuse3.ROOT_INODE: Node(root_fd)}
        # Unsynced data: backing inode -> the file's whole current content.
        self.cache = {}
        # Open files: fh -> (fuse inode, backing fd).
        self.files = {}
        self.next_fh = 1

    # --- inode bookkeeping -------------------------------------------------------------

    def fuse_ino(self, backing_ino):
        return pyfuse3.ROOT_INODE if backing_ino == self.root_ino else backing_ino

    def proc(self, ino):
        return "/proc/self/fd/%d" % self.nodes[ino].fd

    def attrs(self, ino, st=None):
        if st is None:
            st = os.stat(self.nodes[ino].fd)
        a = pyfuse3.EntryAttributes()
        a.st_ino = ino
        a.generation = 0
        a.entry_timeout = 0
        a.attr_timeout = 0
        a.st_mode = st.st_mode
        a.st_nlink = st.st_nlink
        a.st_uid = st.st_uid
        a.st_gid = st.st_gid
        a.st_rdev = st.st_rdev
        a.st_size = len(self.cache[ino]) if ino in self.cache else st.st_size
        a.st_blksize = 4096
        a.st_blocks = (a.st_size + 511) // 512
        a.st_atime_ns = st.st_atime_ns
        a.st_mtime_ns = st.st_mtime_ns
        a.st_ctime_ns = st.st_ctime_ns
        return a

    def remember(self, parent, name):
        """The entry `name` in `parent`: registered (one more kernel lookup) and its attributes."""
        try:
            fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=self.nodes[parent].fd)
        except OSError as e:
            raise fuse_error(e)
        st = os.fstat(fd)
        ino = self.fuse_ino(st.st_ino)
        node = self.nodes.get(ino)
        if node is None:
            node = self.nodes[ino] = Node(fd)
        else:
            os.close(fd)
        node.lookups += 1
        return self.attrs(ino, st)

    async def forget(self, inode_list):
        for ino, n in inode_list:
            node = self.nodes.get(ino)
            if node is None or ino == pyfuse3.ROOT_INODE:
                continue
            node.lookups -= n
            if node.lookups <= 0:
                # Unsynced data outlives the kernel's interest in the inode while it has a name.
                gone = os.fstat(node.fd).st_nlink == 0
                del self.nodes[ino]
                os.close(node.fd)
                if gone and not any(i == ino for i, _ in self.files.values()):
                    self.cache.pop(ino, None)

    # --- names --------------------------------------------------------------------------

    async def lookup(self, parent, name, ctx=None):
        if parent == pyfuse3.ROOT_INODE and name == POWER_CUT:
            dropped = len(self.cache)
            self.cache.clear()
            print("powercutfs: power cut, %d unsynced files dropped" % dropped, file=sys.stderr, flush=True)
            raise pyfuse3.FUSEError(errno.ENOENT)
        if parent == pyfuse3.ROOT_INODE and name == SHOW_CACHE:
            print("powercutfs: %d unsynced files" % len(self.cache), file=sys.stderr, flush=True)
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self.remember(parent, name)

    async def getattr(self, inode, ctx=None):
        try:
            return self.attrs(inode)
        except OSError as e:
            raise fuse_error(e)

    async def setattr(self, inode, attr, fields, fh, ctx):
        path = self.proc(inode)
        try:
            if fields.update_size:
                data = self.cached(inode)
                if attr.st_size < len(data):
                    del data[attr.st_size:]
                else:
                    data.extend(b"\0" * (attr.st_size - len(data)))
            if fields.update_mode:
                os.chmod(path, statmod.S_IMODE(attr.st_mode))
            if fields.update_uid or fields.update_gid:
                os.chown(path, attr.st_uid if fields.update_uid else -1,
                         attr.st_gid if fields.update_gid else -1)
            if fields.update_atime or fields.update_mtime:
                st = os.stat(self.nodes[inode].fd)
                os.utime(path, ns=(attr.st_atime_ns if fields.update_atime else st.st_atime_ns,
                                   attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns))
            return self.attrs(inode)
        except OSError as e:
            raise fuse_error(e)

    async def readlink(self, inode, ctx):
        try:
            return os.readlink("", dir_fd=self.nodes[inode].fd)
        except OSError as e:
            raise fuse_error(e)

    async def mkdir(self, parent, name, mode, ctx):
        try:
            os.mkdir(name, mode, dir_fd=self.nodes[parent].fd)
        except OSError as e:
            raise fuse_error(e)
        return self.remember(parent, name)

    async def mknod(self, parent, name, mode, rdev, ctx):
        try:
            os.mknod(name, mode, rdev, dir_fd=self.nodes[parent].fd)
        except OSError as e:
            raise fuse_error(e)
        return self.remember(parent, name)

    async def symlink(self, parent, name, target, ctx):
        try:
            os.symlink(target, name, dir_fd=self.nodes[parent].fd)
        except OSError as e:
            raise fuse_error(e)
        return self.remember(parent, name)

    async def link(self, inode, new_parent, new_name, ctx):
        try:
            os.link(self.proc(inode), new_name, dst_dir_fd=self.nodes[new_parent].fd, follow_symlinks=True)
        except OSError as e:
            raise fuse_error(e)
        return self.remember(new_parent, new_name)

    async def unlink(self, parent, name, ctx):
        ino = self.entry_ino(parent, name)
        try:
            os.unlink(name, dir_fd=self.nodes[parent].fd)
        except OSError as e:
            raise fuse_error(e)
        self.drop_if_gone(ino)

    def entry_ino(self, parent, name):
        try:
            return self.fuse_ino(os.stat(name, dir_fd=self.nodes[parent].fd, follow_symlinks=False).st_ino)
        except OSError:
            return None

    def drop_if_gone(self, ino):
        """Forgets the unsynced data of a file that has no name left and is not open."""
        if ino is None or ino not in self.cache or any(i == ino for i, _ in self.files.values()):
            return
        node = self.nodes.get(ino)
        if node is None or os.fstat(node.fd).st_nlink == 0:
            self.cache.pop(ino, None)

    async def rmdir(self, parent, name, ctx):
        try:
            os.rmdir(name, dir_fd=self.nodes[parent].fd)
        except OSError as e:
            raise fuse_error(e)

    async def rename(self, parent_old, name_old, parent_new, name_new, flags, ctx):
        if flags:
            raise pyfuse3.FUSEError(errno.EINVAL)
        replaced = self.entry_ino(parent_new, name_new)
        try:
            os.rename(name_old, name_new, src_dir_fd=self.nodes[parent_old].fd,
                      dst_dir_fd=self.nodes[parent_new].fd)
        except OSError as e:
            raise fuse_error(e)
        self.drop_if_gone(replaced)

    # --- folders ------------------------------------------------------------------------

    async def opendir(self, inode, ctx):
        return inode

    async def readdir(self, inode, start_id, token):
        try:
            fd = os.open(self.proc(inode), os.O_RDONLY | os.O_DIRECTORY)
            try:
                names = sorted(os.listdir(fd))
            finally:
                os.close(fd)
        except OSError as e:
            raise fuse_error(e)
        for i in range(start_id, len(names)):
            name = os.fsencode(names[i])
            try:
                fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=self.nodes[inode].fd)
            except OSError:
                continue            # removed since the listing
            st = os.fstat(fd)
            ino = self.fuse_ino(st.st_ino)
            if not pyfuse3.readdir_reply(token, name, self.attrs_for_new(ino, fd, st), i + 1):
                if ino not in self.nodes or self.nodes[ino].fd != fd:
                    os.close(fd)
                return
            node = self.nodes.get(ino)
            if node is None:
                self.nodes[ino] = node = Node(fd)
            elif node.fd != fd:
                os.close(fd)
            node.lookups += 1

    def attrs_for_new(self, ino, fd, st):
        a = pyfuse3.EntryAttributes()
        a.st_ino = ino
        a.entry_timeout = 0
        a.attr_timeout = 0
        a.st_mode = st.st_mode
        a.st_nlink = st.st_nlink
        a.st_uid = st.st_uid
        a.st_gid = st.st_gid
        a.st_size = len(self.cache[ino]) if ino in self.cache else st.st_size
        a.st_blksize = 4096
        a.st_blocks = (a.st_size + 511) // 512
        a.st_atime_ns = st.st_atime_ns
        a.st_mtime_ns = st.st_mtime_ns
        a.st_ctime_ns = st.st_ctime_ns
        return a

    async def releasedir(self, fh):
        pass

    async def fsyncdir(self, fh, datasync):
        pass                    # names already are in the backing folder

    async def statfs(self, ctx):
        return pyfuse3.StatvfsData()     # every field 0: "df" shows zeros

    # --- files --------------------------------------------------------------------------

    def cached(self, inode):
        """The file's unsynced content, loaded from the backing file on first use."""
        data = self.cache.get(inode)
        if data is None:
            with open(self.proc(inode), "rb") as f:
                data = bytearray(f.read())
            self.cache[inode] = data
        return data

    def handle(self, inode, fd):
        fh = self.next_fh
        self.next_fh += 1
        self.files[fh] = (inode, fd)
        return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

    async def open(self, inode, flags, ctx):
        try:
            fd = os.open(self.proc(inode), os.O_RDWR if flags & os.O_ACCMODE != os.O_RDONLY else os.O_RDONLY)
        except OSError as e:
            raise fuse_error(e)
        if flags & os.O_TRUNC:
            self.cached(inode).clear()
        return self.handle(inode, fd)

    async def create(self, parent, name, mode, flags, ctx):
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=self.nodes[parent].fd)
        except OSError as e:
            raise fuse_error(e)
        attrs = self.remember(parent, name)
        self.cache[attrs.st_ino] = bytearray()      # created, never synced: empty after a cut
        return self.handle(attrs.st_ino, fd), attrs

    async def read(self, fh, off, size):
        inode, fd = self.files[fh]
        data = self.cache.get(inode)
        if data is not None:
            return bytes(data[off:off + size])
        return os.pread(fd, size, off)

    async def write(self, fh, off, buf):
        inode, _ = self.files[fh]
        data = self.cached(inode)
        end = off + len(buf)
        if off > len(data):
            data.extend(b"\0" * (off - len(data)))
        data[off:end] = buf
        return len(buf)

    async def flush(self, fh):
        pass                    # close(2) makes nothing durable

    async def fsync(self, fh, datasync):
        inode, _ = self.files[fh]
        data = self.cache.pop(inode, None)
        if data is None:
            return
        try:
            fd = os.open(self.proc(inode), os.O_WRONLY)
            try:
                os.pwrite(fd, bytes(data), 0)
                os.ftruncate(fd, len(data))
            finally:
                os.close(fd)
        except OSError as e:
            self.cache[inode] = data
            raise fuse_error(e)

    async def release(self, fh):
        inode, fd = self.files.pop(fh)
        gone = os.fstat(fd).st_nlink == 0
        os.close(fd)
        if gone and not any(i == inode for i, _ in self.files.values()):
            self.cache.pop(inode, None)


def main():
    backing, mountpoint = sys.argv[1], sys.argv[2]
    fs = PowerCutFS(backing)
    options = set(pyfuse3.default_options)
    options.discard("default_permissions")
    options.add("fsname=powercutfs")
    pyfuse3.init(fs, mountpoint, options)
    print("mounted", flush=True)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=False)


if __name__ == "__main__":
    main()
