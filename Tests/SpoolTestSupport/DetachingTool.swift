import Foundation

/// Runs a tool that leaves daemons behind (tmux's server, glusterd and its FUSE clients) and
/// waits for the tool itself to end, with its output in a file.
///
/// Foundation's `Process` cannot: it watches a descriptor the child inherits, and a daemon the
/// tool starts keeps that descriptor for its whole life, so `Process` never sees the tool end.
/// `posix_spawn` and `waitpid` wait for the tool alone.
public enum DetachingTool {
    public struct SpawnFailed: Error, CustomStringConvertible {
        public let description: String
    }

    /// Runs `executable` with `arguments`, stdin from /dev/null, stdout and stderr into `output`;
    /// returns its exit status (128 + the signal when one ended it).
    public static func run(_ executable: String, _ arguments: [String], output: String) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard rc == 0 else { throw SpawnFailed(description: "posix_spawn \(executable) failed: errno \(rc)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw SpawnFailed(description: "waitpid \(executable) failed: errno \(errno)") }
        }
        // WIFEXITED / WEXITSTATUS are macros.
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}
