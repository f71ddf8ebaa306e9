// idle-relays.ts [--relays=N] [--seconds=S] [--rounds=R] [--entries=A,B]: what idle relays cost a cluster. Per round and
// entry: 3 etcd members and 3 servers of that build, N (20) relays of the same build in front of them (--reads members, as
// deployed: a relay per engine pod), no calls; after 5 s, the CPU of the leader, of the standbys and of the relays over S
// (10) seconds, in ms per second, from /proc. Entries alternate round by round (--entries, default this checkout's only).
// Run: node --import tsx bench/probes/idle-relays.ts --entries=src/cli/main.ts,../old/src/cli/main.ts
import { leaderOf, startHaCluster } from "../harness/ha.js";
import { numberOption, option } from "../harness/options.js";
import { cpuMs, SERVER, serverArgs, startProcess } from "../harness/processes.js";

const relays = numberOption("relays", 20);
const seconds = numberOption("seconds", 10);
const rounds = numberOption("rounds", 1);
const entries = option("entries", SERVER).split(",");

for (let round = 0; round < rounds; round++) {
  for (const entry of round % 2 === 0 ? entries : [...entries].reverse()) {
    const cluster = await startHaCluster(entry, serverArgs, 3);
    const started: Awaited<ReturnType<typeof startProcess>>[] = [];
    try {
      const leader = await leaderOf(cluster);
      const standbys = cluster.members.filter((m) => m !== leader);
      const upstream = cluster.urls.join(",");
      started.push(
        ...(await Promise.all(
          Array.from({ length: relays }, () =>
            startProcess(entry, ["relay", "--host", "127.0.0.1", "--port", "0", "--upstream", upstream, "--reads", "members"]),
          ),
        )),
      );
      await new Promise((resolve) => setTimeout(resolve, 5_000)); // the relays found the leader; the members' start-up is over
      const take = () => ({
        leader: cpuMs(leader.process.pid),
        standbys: standbys.reduce((sum, m) => sum + cpuMs(m.process.pid), 0),
        relays: started.reduce((sum, r) => sum + cpuMs(r.pid), 0),
      });
      const before = take();
      await new Promise((resolve) => setTimeout(resolve, seconds * 1_000));
      const after = take();
      const perSecond = (key: keyof typeof before) => ((after[key] - before[key]) / seconds).toFixed(1);
      console.log(
        `round ${round} ${entry}: ${relays} idle relays; CPU ms a second: the leader ${perSecond("leader")}, the standbys together ${perSecond("standbys")}, the relays together ${perSecond("relays")}`,
      );
    } finally {
      await Promise.all(started.map((r) => r.stop()));
      await cluster.stop();
    }
  }
}
