# gdb script for Benchmarks/request-walk: a breakpoint on the first instruction of every function
# the symbol table lists (WALK_SYMS: "index vaddr" lines), each logging "time thread index" to
# WALK_LOG and letting the process go on at once. Run as:
#   gdb -q -nx --batch -x request-walk-gdb.py --args spoolfetch run --spool S ...
import gdb, os, time

syms = [line.split() for line in open(os.environ["WALK_SYMS"])]
log = open(os.environ["WALK_LOG"], "w", buffering=1 << 16)

for command in ["set pagination off", "set confirm off", "set follow-fork-mode parent", "set detach-on-fork on",
                "set print thread-events off", "set startup-with-shell off"]:
    gdb.execute(command)
for sig in ["SIGTERM", "SIGINT", "SIGHUP", "SIGPIPE", "SIGCHLD", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGIO", "SIGURG", "SIGPROF"]:
    gdb.execute("handle %s nostop noprint pass" % sig)
gdb.execute("starti", to_string=True)
binary = os.path.realpath(gdb.current_progspace().filename)
base = min(int(line.split()[0], 16) for line in gdb.execute("info proc mappings", to_string=True).splitlines()
           if line.strip().endswith(binary) and line.split()[0].startswith("0x"))
with open(os.environ["WALK_PIDFILE"], "w") as f:
    f.write(str(gdb.selected_inferior().pid))


class Entry(gdb.Breakpoint):
    def __init__(self, index, address):
        super().__init__("*0x%x" % address, internal=True)
        self.index = index

    def stop(self):
        log.write("%.6f %d %s\n" % (time.time(), gdb.selected_thread().num, self.index))
        return False


points = [Entry(index, base + int(vaddr, 16)) for index, vaddr in syms]
with open(os.environ["WALK_PIDFILE"] + ".ready", "w") as f:
    f.write("%d breakpoints\n" % len(points))
gdb.execute("continue")
log.close()
