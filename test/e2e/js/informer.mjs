// An informer from the official JavaScript client (@kubernetes/client-node 1.x) against kwatch:
// lists and watches configmaps in a namespace over HTTPS with the kubeconfig's CA and token,
// while this script creates, updates and deletes some; prints what it saw as one JSON line.
// Usage: node informer.mjs <kubeconfig> <namespace>
import * as k8s from '@kubernetes/client-node';

const [kubeconfig, namespace] = process.argv.slice(2);
const kc = new k8s.KubeConfig();
kc.loadFromFile(kubeconfig);
const core = kc.makeApiClient(k8s.CoreV1Api);
const seen = [];
const errors = [];
const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${namespace}/configmaps`,
  () => core.listNamespacedConfigMap({ namespace }));
informer.on('add', (o) => seen.push(['add', o.metadata.name, o.data?.v ?? null]));
informer.on('update', (o) => seen.push(['update', o.metadata.name, o.data?.v ?? null]));
informer.on('delete', (o) => seen.push(['delete', o.metadata.name, null]));
informer.on('error', (e) => errors.push(String(e)));

const until = async (cond, ms) => {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return cond();
};

await informer.start();
for (let i = 0; i < 3; i++) {
  await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `js-${i}` }, data: { v: '1' } } });
}
await core.replaceNamespacedConfigMap({ name: 'js-1', namespace,
  body: { metadata: { name: 'js-1' }, data: { v: '2' } } });
await core.deleteNamespacedConfigMap({ name: 'js-2', namespace });
const done = await until(() => seen.some((e) => e[0] === 'delete'), 10000);
const cached = informer.list(namespace).map((o) => o.metadata.name).sort();
let forbidden = null;
try {
  await core.listNamespacedSecret({ namespace: 'kube-system' });
} catch (e) {
  forbidden = e.code ?? e.statusCode ?? String(e);
}
const watchErrors = [...errors];  // stop() aborts the watch request, which reports an error
await informer.stop();
console.log(JSON.stringify({ done, seen, cached, errors: watchErrors, forbidden }));
process.exit(0);
