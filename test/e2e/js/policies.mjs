// Admission policies as a JavaScript client meets them (@kubernetes/client-node): a write a
// ValidatingAdmissionPolicy refuses comes back as an error with the policy's message, and a
// MutatingAdmissionPolicy's label is on the object the create returns.
// Usage: node policies.mjs <kubeconfig> <namespace>; prints one JSON line with what it saw.
import * as k8s from '@kubernetes/client-node';

const [kubeconfig, namespace] = process.argv.slice(2);
const kc = new k8s.KubeConfig();
kc.loadFromFile(kubeconfig);
const api = kc.makeApiClient(k8s.CoreV1Api);
const out = {};
try {
  await api.createNamespacedConfigMap(
      {namespace, body: {metadata: {name: 'no-owner'}, data: {a: 'b'}}});
  out.refused = 0;
} catch (e) {
  out.refused = e.code;
  try {
    out.message = JSON.parse(e.body).message;
  } catch {
    out.message = String(e.body);
  }
}
const created = await api.createNamespacedConfigMap(
    {namespace, body: {metadata: {name: 'owned'}, data: {owner: 'js'}}});
out.labels = created.metadata.labels || {};
console.log(JSON.stringify(out));
