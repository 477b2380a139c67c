// rtnetlink for the network-change monitor: a socket subscribed to route and address
// notifications, and a reader that counts what appeared. In C because the NLMSG_* macros that
// walk a netlink datagram do not import into Swift.
#ifndef SPOOLFETCH_CNETLINK_SHIM_H
#define SPOOLFETCH_CNETLINK_SHIM_H

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/// Opens a non-blocking NETLINK_ROUTE socket in the calling thread's network namespace,
/// subscribed to IPv4/IPv6 route and address changes. Returns the descriptor, or -1 with errno.
static inline int spoolfetch_netlink_open(void) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
    if (fd < 0) return -1;
    struct sockaddr_nl address;
    memset(&address, 0, sizeof address);
    address.nl_family = AF_NETLINK;
    address.nl_groups = RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
    if (bind(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/// A connected pair of sockets (close-on-exec, non-blocking) to wake the monitor's poll(2) when
/// it must stop. Returns 0, or -1 with errno.
static inline int spoolfetch_netlink_wake_pair(int fds[2]) {
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds);
}

/// Moves the calling thread into the network namespace open at `fd` (setns(2) with
/// CLONE_NEWNET; declared only under _GNU_SOURCE, so called through syscall(2)). Returns 0, or -1
/// with errno. Sockets the thread opens afterwards, and threads it starts, live in that namespace.
static inline int spoolfetch_enter_network_namespace(int fd) {
    return (int)syscall(SYS_setns, fd, 0x40000000 /* CLONE_NEWNET */);
}

/// What one drain of the socket found.
struct spoolfetch_netlink_counts {
    /// RTM_NEWROUTE messages: a route appeared (or changed).
    int new_routes;
    /// RTM_NEWADDR messages: an address appeared.
    int new_addresses;
    /// The kernel dropped notifications (ENOBUFS): something changed, we do not know what.
    int overflowed;
};

/// Reads every queued datagram without blocking and counts the appearances in it. Returns 0 when
/// the queue is empty (EAGAIN), or -1 with errno for any other failure of recv(2).
static inline int spoolfetch_netlink_drain(int fd, struct spoolfetch_netlink_counts *counts) {
    char buffer[16384] __attribute__((aligned(__alignof__(struct nlmsghdr))));
    for (;;) {
        ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            if (errno == ENOBUFS) { counts->overflowed += 1; continue; }
            return -1;
        }
        if (n == 0) return 0;
        int length = (int)n;
        for (struct nlmsghdr *message = (struct nlmsghdr *)buffer; NLMSG_OK(message, length);
             message = NLMSG_NEXT(message, length)) {
            if (message->nlmsg_type == RTM_NEWROUTE) counts->new_routes += 1;
            else if (message->nlmsg_type == RTM_NEWADDR) counts->new_addresses += 1;
        }
    }
}

#endif
