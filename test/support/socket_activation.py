"""systemd's socket activation, for tests: one process keeps a listening socket, as systemd does
across a service's restarts, and runs each process of the service with it.

  socket_activation.py hold PATH [HOST]
                                       listens on HOST (127.0.0.1) and a free port, prints the port,
                                       and hands the socket to whoever connects to the Unix socket PATH
  socket_activation.py run PATH CMD... takes the socket from PATH's holder and runs CMD as systemd
                                       runs a socket-activated service: the socket as file
                                       descriptor 3, LISTEN_FDS=1, LISTEN_PID its own pid (exec
                                       keeps it), LISTEN_FDNAMES

The holder never accepts a connection: those made while no process of the service accepts wait in
the socket's backlog, as under systemd.
"""

import os
import socket
import sys

SD_LISTEN_FDS_START = 3


def hold(path, host):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, 0))
    listener.listen(socket.SOMAXCONN)
    handoff = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    handoff.bind(path)
    handoff.listen()
    print(listener.getsockname()[1], flush=True)
    while True:
        asker, _ = handoff.accept()
        with asker:
            socket.send_fds(asker, [b"fd"], [listener.fileno()])


def run(path, command):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as asker:
        asker.connect(path)
        _, fds, _, _ = socket.recv_fds(asker, 2, 1)
    os.dup2(fds[0], SD_LISTEN_FDS_START)  # dup2 makes it inheritable
    os.close(fds[0])
    os.environ.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()), LISTEN_FDNAMES="metadata")
    os.execvp(command[0], command)


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        hold(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1")
    else:
        run(sys.argv[2], sys.argv[3:])
