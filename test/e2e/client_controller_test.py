"""The client library's example controller, kwatch-namespace-configmap, against a real server
with RBAC, as an operator runs one: it keeps a ConfigMap in every namespace, creating it in
namespaces that exist and in new ones, putting it back when it is deleted or changed; where it
may not write (no RoleBinding yet) it retries with a growing backoff and converges once the
permission is granted; it writes nothing when nothing differs; SIGTERM stops it cleanly.

Usage: client_controller_test.py <path to kwatch-apiserver> <path to kwatch-namespace-configmap>
"""
import os
import subprocess
import sys
import threading

from harness import Checks, Server, TempDir, wait_for

RBAC = "/apis/rbac.authorization.k8s.io/v1"
NAME = "cluster-info"
WANT = {"region": "eu", "tier": "gold"}


class Controller:
    def __init__(self, binary, kubeconfig):
        self.proc = subprocess.Popen([binary, "--kubeconfig", kubeconfig, "--name", NAME,
                                      "--data", "region=eu", "--data", "tier=gold"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def count(self, prefix):
        return sum(1 for l in list(self.lines) if l.startswith(prefix))


def main():
    binary, controller_binary = sys.argv[1], sys.argv[2]
    t = Checks()
    with TempDir() as tmp:
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('admin-token,admin,1,"system:masters"\nctrl-token,ctrl,2\n')
        server = Server(binary, data_dir=os.path.join(tmp, "data"),
                        extra_args=[f"--token-auth-file={tokens}", "--authorization-mode=RBAC",
                                    "--anonymous-auth=false"]).start()
        admin = {"Authorization": "Bearer admin-token"}

        def call(method, path, body=None, content_type="application/json"):
            return server.request(method, path, body=body,
                                  headers={**admin, "Content-Type": content_type})

        def configmap(ns):
            status, body = call("GET", f"/api/v1/namespaces/{ns}/configmaps/{NAME}")
            return body if status == 200 else None

        def has_wanted(ns):
            cm = configmap(ns)
            return cm is not None and cm.get("data") == WANT

        try:
            def create_namespace(ns):
                status, body = call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
                assert status == 201, (status, body)

            for ns in ("ns-a", "ns-b", "ns-c"):
                create_namespace(ns)
            call("POST", f"{RBAC}/clusterroles", {"metadata": {"name": "ctrl-read"}, "rules": [
                {"apiGroups": [""], "resources": ["namespaces", "configmaps"],
                 "verbs": ["get", "list", "watch"]}]})
            call("POST", f"{RBAC}/clusterroles", {"metadata": {"name": "ctrl-write"}, "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "update"]}]})
            call("POST", f"{RBAC}/clusterrolebindings", {
                "metadata": {"name": "ctrl-read"}, "subjects": [{"kind": "User", "name": "ctrl"}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "ctrl-read"}})

            def grant(ns):
                status, body = call("POST", f"{RBAC}/namespaces/{ns}/rolebindings", {
                    "metadata": {"name": "ctrl-write"}, "subjects": [{"kind": "User", "name": "ctrl"}],
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": "ctrl-write"}})
                assert status == 201, (status, body)

            for ns in ("default", "ns-a", "ns-b"):
                grant(ns)
            kubeconfig = os.path.join(tmp, "kubeconfig")
            with open(kubeconfig, "w") as f:
                f.write(f"apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster:\n"
                        f"    server: http://127.0.0.1:{server.port}\ncontexts:\n- name: k\n"
                        f"  context: {{cluster: k, user: ctrl}}\ncurrent-context: k\nusers:\n"
                        f"- name: ctrl\n  user: {{token: ctrl-token}}\n")
            ctrl = Controller(controller_binary, kubeconfig)

            wait_for(lambda: all(has_wanted(ns) for ns in ("default", "ns-a", "ns-b")), timeout=20,
                     what="the ConfigMap where the controller may write")
            t.check("created in every namespace it may write to", True)
            wait_for(lambda: ctrl.count("retry ns-c (3)") > 0, timeout=20,
                     what="retries where it may not write")
            t.check("where it may not write: retried, not given up", configmap("ns-c") is None,
                    [l for l in ctrl.lines if "ns-c" in l][:3])

            grant("ns-c")
            wait_for(lambda: has_wanted("ns-c"), timeout=30, what="ns-c after the grant")
            t.check("granted: converges on its next retry", True)

            create_namespace("ns-new")
            grant("ns-new")
            wait_for(lambda: has_wanted("ns-new"), timeout=30, what="a new namespace")
            t.check("a new namespace gets it", True)

            call("DELETE", f"/api/v1/namespaces/ns-a/configmaps/{NAME}")
            wait_for(lambda: has_wanted("ns-a"), timeout=20, what="the deleted one back")
            t.check("deleted: put back", True)
            cm = configmap("ns-b")
            cm["data"] = {"region": "us"}
            status, _ = call("PUT", f"/api/v1/namespaces/ns-b/configmaps/{NAME}", cm)
            t.check("a user changes it", status == 200)
            wait_for(lambda: has_wanted("ns-b"), timeout=20, what="the changed one restored")
            t.check("changed: restored", True)

            # Its lines come after its writes: wait for them before counting.
            wait_for(lambda: ctrl.count("created ") == 6 and ctrl.count("updated ") == 1,
                     timeout=10, what="the controller's lines")
            writes = ctrl.count("created ") + ctrl.count("updated ")
            # A change to something else in the namespace is no reason to write.
            call("POST", "/api/v1/namespaces/ns-b/configmaps",
                 {"metadata": {"name": "unrelated"}, "data": {"x": "1"}})
            call("PATCH", "/api/v1/namespaces/ns-b", {"metadata": {"labels": {"touched": "yes"}}},
                 "application/merge-patch+json")
            status, _ = call("PUT", f"/api/v1/namespaces/ns-b/configmaps/{NAME}", configmap("ns-b"))
            t.check("a no-op update by a user", status == 200)
            marker = "marker"
            create_namespace(marker)
            grant(marker)
            wait_for(lambda: has_wanted(marker) and ctrl.count(f"created {marker}"), timeout=20,
                     what="the marker namespace")
            t.check("nothing differed: no write but the marker's",
                    ctrl.count("created ") + ctrl.count("updated ") == writes + 1,
                    ctrl.lines[-5:])
            t.check("every write was needed: one create per namespace, one update",
                    ctrl.count("created ") == 7 and ctrl.count("updated ") == 1, ctrl.lines)

            ctrl.proc.terminate()
            try:
                code = ctrl.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                ctrl.proc.kill()
                code = -9
            t.check("SIGTERM stops it cleanly", code == 0, (code, ctrl.proc.stderr.read()[-500:]))
            t.check("server alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
