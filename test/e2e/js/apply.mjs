// Server-side apply from @kubernetes/client-node, as its users write it: a ConfigMap applied by
// one field manager, a conflicting apply by another (409), then the same forced.
// Usage: node apply.mjs <kubeconfig> <namespace>; prints one JSON line with what it saw.
import * as k8s from '@kubernetes/client-node';

const [kubeconfig, namespace] = process.argv.slice(2);
const kc = new k8s.KubeConfig();
kc.loadFromFile(kubeconfig);
const api = kc.makeApiClient(k8s.CoreV1Api);
const apply = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply);
const body = {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'applied'}, data: {k: 'v'}};
const out = {};
const first = await api.patchNamespacedConfigMap(
    {name: 'applied', namespace, body, fieldManager: 'js-app'}, apply);
out.managers = first.metadata.managedFields.map((e) => [e.manager, e.operation]);
body.data.k = 'changed';
try {
  await api.patchNamespacedConfigMap({name: 'applied', namespace, body, fieldManager: 'js-other'}, apply);
  out.conflict = 0;
} catch (e) {
  out.conflict = e.code;
}
const forced = await api.patchNamespacedConfigMap(
    {name: 'applied', namespace, body, fieldManager: 'js-other', force: true}, apply);
out.forced = forced.data;
console.log(JSON.stringify(out));
