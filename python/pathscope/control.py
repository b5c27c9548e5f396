"""The control socket of a running process (/work/notes/live-contract.md): find it, check
who listens, send one request, read the reply.

    reply = send_request(pid, ["probe list"])     # the reply's lines, without the final `end`

Rules kept here:
- The socket is D/<pid>-<starttime>.sock with D the private directory of the process's
  owner (pathscope.live.open_private_dir checks it); it is reached through D's descriptor
  (/proc/self/fd/N/NAME), so no path component can be swapped after the check.
- Before anything is sent, the listener must be the process we meant: SO_PEERCRED pid equal
  to pid and uid equal to the process's effective uid.  Otherwise nothing is sent.
- One request per connection: the lines, then shutdown of our write side; the reply is read
  to EOF (at most MAX_REPLY_BYTES, within REPLY_TIMEOUT_S) and must end with an `end` line.
Nothing here prints or exits.
"""
from __future__ import annotations

import errno
import os
import socket
import stat
import struct
from dataclasses import dataclass

from pathscope.errors import LiveError
from pathscope.live import (ProcessId, open_private_dir, private_dir_path, process_euid,
                            process_start_time)

MAX_REPLY_BYTES = 16 << 20
REPLY_TIMEOUT_S = 30.0
_PEERCRED = struct.Struct("3i")      # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class Target:
    process: ProcessId
    uid: int                 # its effective uid (owner of its private directory)

    @property
    def socket_path(self) -> str:
        return f"{private_dir_path(self.uid)}/{self.process.name}.sock"


def find_target(pid: int) -> Target:
    """The process pid as we may control it: LiveError if it does not exist or belongs to
    another user (unless we are root)."""
    start = process_start_time(pid)
    uid = process_euid(pid)
    if start is None or uid is None:
        raise LiveError(f"no process {pid}")
    me = os.geteuid()
    if me != 0 and uid != me:
        raise LiveError(f"process {pid} belongs to uid {uid}: permission denied (only its "
                        f"owner or root may control it)")
    return Target(ProcessId(pid, start), uid)


def _not_started(target: Target) -> LiveError:
    return LiveError(f"process {target.process.pid} was not started under pathscope (no "
                     f"control socket {target.socket_path})")


def _socket_dir(target: Target) -> tuple[int, str]:
    """D's descriptor and the socket's entry in it, checked (a socket of the process's
    owner); LiveError otherwise."""
    try:
        dir_fd = open_private_dir(target.uid)
    except LiveError as e:
        if not os.path.lexists(private_dir_path(target.uid)):
            raise _not_started(target) from None
        raise e
    entry = f"{target.process.name}.sock"
    try:
        st = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        os.close(dir_fd)
        raise _not_started(target) from None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != target.uid:
        os.close(dir_fd)
        raise LiveError(f"{target.socket_path} is not a socket of uid {target.uid}")
    return dir_fd, entry


def check_socket(target: Target) -> None:
    """LiveError unless target has its control socket (before any work is done for it)."""
    os.close(_socket_dir(target)[0])


def _connect(target: Target) -> socket.socket:
    dir_fd, entry = _socket_dir(target)
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.settimeout(REPLY_TIMEOUT_S)
            sock.connect(f"/proc/self/fd/{dir_fd}/{entry}")
        except OSError as e:
            sock.close()
            if e.errno == errno.ECONNREFUSED:
                raise LiveError(f"process {target.process.pid} does not answer on "
                                f"{target.socket_path} (connection refused)") from None
            raise LiveError(f"cannot connect to {target.socket_path}: "
                            f"{e.strerror or e}") from None
    finally:
        os.close(dir_fd)
    _check_listener(sock, target)
    return sock


def _check_listener(sock: socket.socket, target: Target) -> None:
    pid, uid, _gid = _PEERCRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    if pid != target.process.pid or uid != target.uid:
        sock.close()
        raise LiveError(f"{target.socket_path} is served by pid {pid} uid {uid}, not by "
                        f"process {target.process.pid} (uid {target.uid}): nothing sent")


def _receive(sock: socket.socket, target: Target) -> bytes:
    chunks = []
    total = 0
    while True:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            raise LiveError(f"process {target.process.pid} did not answer within "
                            f"{REPLY_TIMEOUT_S:.0f} s") from None
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > MAX_REPLY_BYTES:
            raise LiveError(f"process {target.process.pid}: reply longer than "
                            f"{MAX_REPLY_BYTES} bytes")
        chunks.append(chunk)


def send_request(target: Target, lines: list[str]) -> list[str]:
    """Sends lines (without newlines) to target; its reply lines before `end`."""
    sock = _connect(target)
    try:
        try:
            sock.sendall("".join(line + "\n" for line in lines).encode())
            sock.shutdown(socket.SHUT_WR)
        except OSError as e:
            raise LiveError(f"cannot send to process {target.process.pid}: "
                            f"{e.strerror or e}") from None
        raw = _receive(sock, target)
    finally:
        sock.close()
    reply = raw.decode("utf-8", "replace").split("\n")
    if reply[-1] != "" or len(reply) < 2 or reply[-2] != "end":
        said = [line for line in reply if line.startswith("error")]
        if said:        # refused before the request was read (permission, busy)
            raise LiveError(f"process {target.process.pid}: {said[0][6:]}")
        raise LiveError(f"process {target.process.pid} closed the connection before the end "
                        f"of its reply")
    return reply[:-2]
