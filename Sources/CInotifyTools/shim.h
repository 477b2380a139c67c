// libinotifytools ships no pkg-config file and its header uses inotify types without
// including them, so <sys/inotify.h> must come first.
#ifndef SPOOLFETCH_CINOTIFYTOOLS_SHIM_H
#define SPOOLFETCH_CINOTIFYTOOLS_SHIM_H
#include <sys/inotify.h>
#include <inotifytools/inotifytools.h>
#endif
