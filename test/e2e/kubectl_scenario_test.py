"""The foundation scenario, as a user does it with kubectl (default flags) against kwatch.

Usage: kubectl_scenario_test.py <path to kwatch-apiserver>
"""
import json
import os
import shutil
import subprocess
import sys

from harness import SKIP, Checks, Server, TempDir

# The ConfigMap the root CA publisher writes into every namespace when the server serves HTTPS.
ROOT_CA = "kube-root-ca.crt"

POD = """apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels: {app: web, tier: front}
spec:
  containers:
  - name: nginx
    image: nginx:1.25
    ports: [{containerPort: 80}]
"""
CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: web}
data:
  mode: fast
"""
DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        env: [{name: A, value: "1"}]
      - name: sidecar
        image: busybox
"""


def main():
    binary = sys.argv[1]
    kubectl = shutil.which("kubectl")
    if not kubectl:
        print("kubectl is not installed: skipping the kubectl scenario")
        sys.exit(SKIP)
    t = Checks()
    with TempDir() as tmp:
        data = os.path.join(tmp, "data")
        server = Server(binary, data_dir=data).start()
        env = dict(os.environ, HOME=tmp, KUBECONFIG=server.kubeconfig(tmp))

        def kc(*args, stdin=None):
            p = subprocess.run([kubectl, *args], input=stdin, capture_output=True, text=True,
                               env=env, timeout=60)
            return p.returncode, p.stdout, p.stderr

        def kc_ok(name, *args, stdin=None, expect=None):
            rc, out, err = kc(*args, stdin=stdin)
            ok = rc == 0 and (expect is None or expect in out)
            t.check(name, ok, f"rc={rc} out={out!r} err={err!r}")
            return out

        def write(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            return path

        try:
            kc_ok("create namespace", "create", "namespace", "e2e", expect="namespace/e2e created")
            kc_ok("create -f pod", "-n", "e2e", "create", "-f", write("pod.yaml", POD),
                  expect="pod/web-1 created")
            kc_ok("create -f configmap", "-n", "e2e", "create", "-f", write("cm.yaml", CONFIGMAP),
                  expect="configmap/settings created")
            kc_ok("create -f deployment", "-n", "e2e", "create", "-f",
                  write("deploy.yaml", DEPLOYMENT), expect="deployment.apps/web created")
            rc, _, err = kc("-n", "e2e", "create", "-f", os.path.join(tmp, "pod.yaml"))
            t.check("duplicate create is refused as AlreadyExists", rc != 0 and "AlreadyExists" in err
                    or "already exists" in err, err)

            # apply: new objects (POST with last-applied), then changes (strategic merge PATCH)
            kc_ok("apply -f new pod", "-n", "e2e", "apply", "-f",
                  write("pod2.yaml", POD.replace("web-1", "web-2")), expect="pod/web-2 created")
            kc_ok("apply -f new configmap", "-n", "e2e", "apply", "-f",
                  write("cm2.yaml", CONFIGMAP.replace("settings", "settings-2")),
                  expect="configmap/settings-2 created")
            kc_ok("apply -f new deployment", "-n", "e2e", "apply", "-f",
                  write("deploy2.yaml", DEPLOYMENT.replace("name: web\n", "name: api\n", 1)),
                  expect="deployment.apps/api created")
            kc_ok("apply -f changed configmap", "-n", "e2e", "apply", "-f",
                  write("cm2b.yaml", CONFIGMAP.replace("settings", "settings-2")
                        .replace("mode: fast", "mode: safe")),
                  expect="configmap/settings-2 configured")
            changed = DEPLOYMENT.replace("name: web\n", "name: api\n", 1).replace(
                "image: nginx:1.25", "image: nginx:1.26").replace("replicas: 2", "replicas: 3")
            kc_ok("apply -f changed deployment", "-n", "e2e", "apply", "-f",
                  write("deploy2b.yaml", changed), expect="deployment.apps/api configured")
            out = kc_ok("applied deployment has the merged containers", "-n", "e2e", "get",
                        "deployment", "api", "-o", "json")
            d = json.loads(out or "{}")
            containers = d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
            t.check("strategic merge kept both containers and changed the image",
                    [c.get("image") for c in containers] == ["nginx:1.26", "busybox"]
                    and d["spec"]["replicas"] == 3, containers)
            kc_ok("apply -f pod again is unchanged", "-n", "e2e", "apply", "-f",
                  os.path.join(tmp, "pod2.yaml"), expect="pod/web-2 unchanged")

            # get: table, yaml, json, selectors, all namespaces
            out = kc_ok("get pods (table)", "-n", "e2e", "get", "pods", expect="web-1")
            t.check("table has kubectl's pod columns", "READY" in out and "STATUS" in out
                    and "AGE" in out, out)
            kc_ok("get pod -o yaml", "-n", "e2e", "get", "pod", "web-1", "-o", "yaml",
                  expect="image: nginx:1.25")
            out = kc_ok("get configmaps -o json", "-n", "e2e", "get", "configmaps", "-o", "json")
            items = json.loads(out or "{}").get("items", [])
            # Over HTTPS the root CA publisher's kube-root-ca.crt is there too (as in kube).
            t.check("-o json lists both configmaps",
                    sorted(i["metadata"]["name"] for i in items
                           if i["metadata"]["name"] != ROOT_CA) == ["settings", "settings-2"],
                    items)
            out = kc_ok("get -l app=web", "-n", "e2e", "get", "pods", "-l", "app=web,tier=front",
                        "-o", "name")
            t.check("label selector matches both pods",
                    out.split() == ["pod/web-1", "pod/web-2"], out)
            out = kc_ok("get -l with no match", "-n", "e2e", "get", "pods", "-l", "app notin (web)",
                        "-o", "name")
            t.check("label selector with notin matches nothing", out.strip() == "", out)
            out = kc_ok("get -A", "get", "configmaps", "-A")
            t.check("-A shows the namespace column", "NAMESPACE" in out and "e2e" in out, out)
            kc_ok("get deployments (table)", "-n", "e2e", "get", "deployments", expect="UP-TO-DATE")
            kc_ok("get namespaces", "get", "ns", expect="kube-system")

            # label, annotate, patch, replace
            kc_ok("label", "-n", "e2e", "label", "pod", "web-1", "env=prod", expect="labeled")
            out = kc_ok("label is visible to selectors", "-n", "e2e", "get", "pods", "-l",
                        "env=prod", "-o", "name")
            t.check("only the labelled pod matches", out.split() == ["pod/web-1"], out)
            kc_ok("annotate", "-n", "e2e", "annotate", "configmap", "settings", "owner=team-a",
                  expect="annotated")
            kc_ok("patch --type merge", "-n", "e2e", "patch", "configmap", "settings", "--type",
                  "merge", "-p", '{"data":{"mode":"slow","extra":"1"}}', expect="patched")
            kc_ok("patch --type json", "-n", "e2e", "patch", "configmap", "settings", "--type",
                  "json", "-p", '[{"op":"remove","path":"/data/extra"}]', expect="patched")
            kc_ok("patch --type strategic", "-n", "e2e", "patch", "deployment", "web", "-p",
                  '{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:2"}]}}}}',
                  expect="patched")
            out = kc_ok("patched objects read back", "-n", "e2e", "get", "configmap", "settings",
                        "-o", "json")
            cm = json.loads(out or "{}")
            t.check("merge and json patches applied", cm.get("data") == {"mode": "slow"}
                    and cm["metadata"]["annotations"].get("owner") == "team-a", cm)
            out = kc_ok("strategic patch read back", "-n", "e2e", "get", "deployment", "web", "-o",
                        "json")
            d = json.loads(out or "{}")
            images = [c["image"] for c in d["spec"]["template"]["spec"]["containers"]]
            t.check("strategic patch merged by container name", images == ["nginx:1.25", "busybox:2"],
                    images)
            kc_ok("replace -f", "-n", "e2e", "replace", "-f",
                  write("cm3.yaml", CONFIGMAP.replace("mode: fast", "mode: replaced")),
                  expect="configmap/settings replaced")

            # --sort-by asks for whole objects in the table rows (includeObject=Object)
            for i, (name, when) in enumerate([("late", "2026-01-01T10:00:00Z"),
                                              ("early", "2026-01-01T09:00:00Z")]):
                server.request("POST", "/api/v1/namespaces/e2e/events", body={
                    "apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
                    "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "e2e"},
                    "reason": "Test", "message": name, "type": "Normal",
                    "firstTimestamp": when, "lastTimestamp": when, "count": 1})
            out = kc_ok("get events --sort-by=.lastTimestamp", "-n", "e2e", "get", "events",
                        "--sort-by=.lastTimestamp")
            t.check("events listed, oldest first", out.find("early") != -1
                    and out.find("early") < out.find("late"), out)

            out = kc_ok("api-resources", "api-resources")
            for res in ["namespaces", "pods", "services", "configmaps", "secrets", "nodes", "events",
                        "endpoints", "serviceaccounts", "deployments", "leases"]:
                t.check(f"api-resources lists {res}", f"\n{res} " in out, "")

            # restart with the same data dir: same objects, same resourceVersions
            _, before = server.request("GET", "/api/v1/namespaces/e2e/configmaps")
            server.stop()
            server = Server(binary, data_dir=data).start()
            env["KUBECONFIG"] = server.kubeconfig(tmp)
            _, after = server.request("GET", "/api/v1/namespaces/e2e/configmaps")
            key = lambda lst: [(i["metadata"]["name"], i["metadata"]["resourceVersion"],
                                i.get("data")) for i in lst["items"]
                               if i["metadata"]["name"] != ROOT_CA]
            t.check("objects survive a restart with their resourceVersions",
                    key(before) == key(after) and len(key(after)) == 2, (before, after))
            t.check("list resourceVersion survives a restart",
                    before["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"],
                    (before["metadata"], after["metadata"]))

            # delete
            kc_ok("delete pod", "-n", "e2e", "delete", "pod", "web-1", expect='pod "web-1" deleted')
            rc, _, err = kc("-n", "e2e", "get", "pod", "web-1")
            t.check("deleted pod is NotFound", rc != 0 and "NotFound" in err, err)
            kc_ok("delete -f", "-n", "e2e", "delete", "-f", os.path.join(tmp, "deploy.yaml"),
                  expect="deleted")
            kc_ok("delete namespace", "delete", "namespace", "e2e", expect='namespace "e2e" deleted')
            status, body = server.request("GET", "/api/v1/namespaces/e2e/pods")
            t.check("namespace contents are gone", status == 200 and body["items"] == [], body)
        finally:
            server.stop()
            if t.failed:
                print(server.read_log()[-4000:])
    t.finish()


if __name__ == "__main__":
    main()
