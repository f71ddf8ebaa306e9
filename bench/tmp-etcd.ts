import { startEtcdCluster } from "../test/support/etcd-process.js";

const etcd = await startEtcdCluster(3);
console.log(etcd.endpoints);
setInterval(() => {}, 1000);
