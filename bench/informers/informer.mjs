// The official JavaScript client's informer (@kubernetes/client-node 1.x) as
// bench/client-informers drives it, beside kwatch-informer-bench and watch.py: the same JSON
// lines on stdout (start, synced, events on each stdin line and at EOF). Run with --expose-gc:
// garbage is collected before RSS is read.
// Usage: node --expose-gc informer.mjs SERVER_URL NAMESPACE
import * as k8s from '@kubernetes/client-node';
import * as readline from 'node:readline';

const [server, namespace] = process.argv.slice(2);
const kc = new k8s.KubeConfig();
kc.loadFromOptions({
  clusters: [{ name: 'bench', server, skipTLSVerify: true }],
  users: [{ name: 'bench' }],
  contexts: [{ name: 'bench', cluster: 'bench', user: 'bench' }],
  currentContext: 'bench',
});
const core = kc.makeApiClient(k8s.CoreV1Api);
const rss = () => {
  global.gc();
  return Math.round(process.memoryUsage().rss / 1024);
};
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');

say({ phase: 'start', rss_kib: rss() });
const start = Date.now();
let events = 0;
let lastMs = 0;
const count = () => {
  events++;
  lastMs = Date.now() - start;
};
const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${namespace}/configmaps`,
  () => core.listNamespacedConfigMap({ namespace }));
informer.on('add', count);
informer.on('update', count);
informer.on('delete', count);
informer.on('error', (e) => process.stderr.write(`informer error: ${e}\n`));
await informer.start();
say({ phase: 'synced', ms: Date.now() - start, objects: informer.list().length, rss_kib: rss() });

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', () => say({ phase: 'events', events, last_ms: lastMs }));
lines.on('close', async () => {
  say({ phase: 'events', events, last_ms: lastMs });
  await informer.stop();
  process.exit(0);
});
