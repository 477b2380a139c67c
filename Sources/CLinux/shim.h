// Linux calls that Swift's Glibc module does not expose: they are declared only under
// _GNU_SOURCE (renameat2, syncfs, F_SETLEASE), are variadic (fcntl with a lease type), or live in
// a header Glibc's module map leaves out (fstatfs's f_type, malloc.h's mallopt and malloc_trim).
// Each wrapper of a system call goes through syscall(2)/fcntl(2) directly and returns -1 with
// errno set on failure.
#ifndef SPOOLFETCH_CLINUX_SHIM_H
#define SPOOLFETCH_CLINUX_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

/// renameat2(2)'s flag: fail with EEXIST instead of replacing the target.
#define SPOOLFETCH_RENAME_NOREPLACE 1u
/// fcntl(2) commands for file leases (F_LINUX_SPECIFIC_BASE + 0 / + 1).
#define SPOOLFETCH_F_SETLEASE 1024
#define SPOOLFETCH_F_GETLEASE 1025

/// A non-blocking, close-on-exec eventfd: wakes a thread waiting in poll(2) from another thread
/// (`FolderArrivals.interrupt`); the flags are macros Swift does not import.
static inline int spoolfetch_eventfd(void) {
    return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

static inline int spoolfetch_renameat2(int olddirfd, const char *oldpath, int newdirfd,
                                       const char *newpath, unsigned int flags) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}

/// Names the calling thread (prctl is variadic): shown by `ps -L` and /proc/PID/task/TID/comm.
static inline int spoolfetch_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

/// Flushes the whole filesystem holding `fd`: one call commits a batch of files.
/// pidfd_open(2): a descriptor that polls readable once the process `pid` has exited, also for a
/// process that is not our child (waitpid cannot wait for those).
static inline int spoolfetch_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static inline int spoolfetch_syncfs(int fd) {
    return (int)syscall(SYS_syncfs, fd);
}

/// Takes (F_RDLCK / F_WRLCK) or drops (F_UNLCK) a lease. A read lease is refused with EAGAIN
/// while any process has the file open for writing, which is how a scan tells a file that is
/// still being written from a finished one.
static inline int spoolfetch_set_lease(int fd, int type) {
    return fcntl(fd, SPOOLFETCH_F_SETLEASE, type);
}

/// copy_file_range(2): in-kernel copy from `in_fd` at `*in_offset` to `out_fd`'s position.
static inline long spoolfetch_copy_file_range(int in_fd, long long *in_offset, int out_fd, unsigned long length) {
    return syscall(SYS_copy_file_range, in_fd, in_offset, out_fd, (void *)0, length, 0u);
}

/// ioctl(2)'s FICLONE (_IOW(0x94, 9, int); <linux/fs.h> is not in Glibc's module map): makes
/// `dest_fd` share all of `src_fd`'s extents (btrfs, xfs with reflink, bcachefs, overlayfs over
/// those) — a copy that copies no data. -1 with errno set (EOPNOTSUPP, EXDEV, EINVAL) where it cannot.
#define SPOOLFETCH_FICLONE 0x40049409u
static inline int spoolfetch_ficlone(int dest_fd, int src_fd) {
    return ioctl(dest_fd, SPOOLFETCH_FICLONE, src_fd);
}

/// sync_file_range(2)'s "start writeback of dirty pages in the range, do not wait".
#define SPOOLFETCH_SYNC_FILE_RANGE_WRITE 2u

/// Starts writeback of a range without waiting for it: a large body then reaches the disk while it
/// downloads, and the fdatasync before publishing only has the tail left to write. A hint — the
/// durability still comes from that fdatasync/syncfs.
static inline int spoolfetch_start_writeback(int fd, long long offset, long long length) {
    return (int)syscall(SYS_sync_file_range, fd, offset, length, SPOOLFETCH_SYNC_FILE_RANGE_WRITE);
}

/// The filesystem type (statfs's f_type magic number) of the filesystem holding `fd`, or -1 with
/// errno set. Tells a filesystem known to make `syncfs` reach its disk (ext4, xfs, btrfs) from one
/// where `syncfs` returns 0 without reaching the data (FUSE, NFS and the like).
static inline long long spoolfetch_filesystem_type(int fd) {
    struct statfs s;
    if (fstatfs(fd, &s) != 0) return -1;
    return (long long)(unsigned long)s.f_type;
}

/// open(2)'s O_PATH (fcntl.h defines it only under _GNU_SOURCE): a descriptor for *at calls on a
/// folder the caller may pass through but not read.
#define SPOOLFETCH_O_PATH 010000000

/// open(2)'s O_TMPFILE (__O_TMPFILE | O_DIRECTORY; fcntl.h defines it only under _GNU_SOURCE).
#define SPOOLFETCH_O_TMPFILE (020000000 | O_DIRECTORY)

/// An unnamed regular file on the filesystem of directory `dirfd`, open read-write: it has no name
/// until `spoolfetch_link_open_file` gives it one, and vanishes if the process dies first. -1 with
/// errno set (EOPNOTSUPP, EISDIR or EINVAL where the filesystem has no O_TMPFILE: NFS, most FUSE).
static inline int spoolfetch_open_unnamed(int dirfd) {
    return openat(dirfd, ".", O_RDWR | O_CLOEXEC | SPOOLFETCH_O_TMPFILE, 0644);
}

/// linkat(2)'s AT_EMPTY_PATH (fcntl.h defines it only under _GNU_SOURCE).
#define SPOOLFETCH_AT_EMPTY_PATH 0x1000

/// `spoolfetch_link_open_file` through /proc/self/fd: needs only that /proc is mounted.
static inline int spoolfetch_link_open_file_via_proc(int fd, int newdirfd, const char *newpath) {
    char path[32];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, path, newdirfd, newpath, AT_SYMLINK_FOLLOW);
}

/// Gives the open file `fd` the name `newpath` in `newdirfd` (same filesystem); fails with EEXIST
/// when the name is taken, never replacing it. linkat with AT_EMPTY_PATH first: it skips the walk
/// of a /proc path (3 % of a 2,000-file drain's CPU). Linux before 6.10 allows it only to a
/// process with CAP_DAC_READ_SEARCH, later kernels also to the process that opened the file
/// (checked on 6.18 as `nobody`); a refusal is ENOENT, or EPERM where a security module says no.
/// Once refused, the process goes through /proc/self/fd from then on.
static inline int spoolfetch_link_open_file(int fd, int newdirfd, const char *newpath) {
    static int empty_path_refused;
    if (!__atomic_load_n(&empty_path_refused, __ATOMIC_RELAXED)) {
        if (linkat(fd, "", newdirfd, newpath, SPOOLFETCH_AT_EMPTY_PATH) == 0) return 0;
        if (errno != ENOENT && errno != EPERM) return -1;
        __atomic_store_n(&empty_path_refused, 1, __ATOMIC_RELAXED);
    }
    return spoolfetch_link_open_file_via_proc(fd, newdirfd, newpath);
}

/// glibc malloc settings (mallopt) for a process that frees and allocates the same sizes over and
/// over: allocations under `mmap_threshold` come from the heap, up to `trim_threshold` of free
/// memory at its top is kept rather than given back, and it grows by `top_pad` more than asked.
/// 1 when glibc took all three.
static inline int spoolfetch_heap_keep_for_reuse(int mmap_threshold, int trim_threshold, int top_pad) {
    int ok = mallopt(M_MMAP_THRESHOLD, mmap_threshold);
    ok &= mallopt(M_TRIM_THRESHOLD, trim_threshold);
    ok &= mallopt(M_TOP_PAD, top_pad);
    return ok;
}

/// Gives the free memory of every heap arena back to the kernel (malloc_trim(0)); 1 when some was.
static inline int spoolfetch_heap_give_back(void) {
    return malloc_trim(0);
}

#endif
