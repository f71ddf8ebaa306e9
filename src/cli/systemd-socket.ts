/** SD_LISTEN_FDS_START is the first file descriptor systemd passes a socket-activated process (sd_listen_fds(3)). */
const SD_LISTEN_FDS_START = 3;

/**
 * systemdSocket is the file descriptor of the listening socket systemd
 * passed this process (socket activation: LISTEN_FDS and LISTEN_PID, as
 * sd_listen_fds(3) reads them), undefined when none was passed to this
 * process (none, or LISTEN_PID names another: a parent's). It takes the
 * LISTEN_* variables out of `env`, as sd_listen_fds does, so that no child
 * sees them. By hand: npm's packages for it are unmaintained (`systemd`
 * 0.4.0, `systemd-socket` 0.0.0) or native (`sd-daemon`).
 */
export function systemdSocket(env: NodeJS.ProcessEnv, pid: number): number | undefined {
  const { LISTEN_PID: listenPid, LISTEN_FDS: listenFds } = env;
  delete env.LISTEN_PID;
  delete env.LISTEN_FDS;
  delete env.LISTEN_FDNAMES;
  if (listenPid === undefined || listenFds === undefined || Number(listenPid) !== pid) return undefined;
  if (listenFds !== "1") {
    throw new Error(`systemd passed ${listenFds} sockets (LISTEN_FDS); the service listens on one: give its socket unit one ListenStream=`);
  }
  return SD_LISTEN_FDS_START;
}
