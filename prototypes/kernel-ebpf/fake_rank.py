#!/usr/bin/env python3
"""Stand-in for what libpathscope's constructor would do on each rank with --kernel:
elect a collector starter under a lock in the output dir, register this pid over a unix
socket (the collector learns the pid from SO_PEERCRED), wait for the acknowledgement
(= the rank is tracked), then exec the real program (same pid)."""
import fcntl, os, socket, subprocess, sys, time
outdir, prog = sys.argv[1], sys.argv[2:]
sock = os.path.join(outdir, "kernel.sock")
here = os.path.dirname(os.path.abspath(__file__))
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sock); return s
with open(sock + ".lock", "a+") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)                    # election: one starter at a time
    try:
        s = connect()
    except OSError:
        log = open(os.path.join(outdir, "collector.log"), "a")
        subprocess.Popen([os.path.join(here, "sctrace/sctrace"), "-q", "-a", "btf", "-S",
                          "-u", sock, "-o", outdir], stdout=log, stderr=log, start_new_session=True,
                         pass_fds=())
        t0 = time.time()
        while True:
            try: s = connect(); break
            except OSError:
                if time.time() - t0 > 5: sys.exit("collector did not start")
                time.sleep(0.005)
    fcntl.flock(lock, fcntl.LOCK_UN)
t0 = time.time(); s.sendall(b"r"); ack = s.recv(1); s.close()
print(f"rank pid {os.getpid()}: registered ({ack!r}) in {1e3*(time.time()-t0):.2f} ms", flush=True)
os.execvp(prog[0], prog)
