"""RBAC objects served like any other resource: kube's bootstrap roles and bindings exist after
start, kubectl creates roles and bindings (kubectl sends them as protobuf), RBAC names follow
kube's path-segment rule.

Usage: rbac_objects_test.py <path to kwatch-apiserver>
"""
import os
import shutil
import subprocess
import sys

from harness import Checks, Server, TempDir, wait_for

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary, data_dir=tmp + "/data").start()
        try:
            names = lambda path: [i["metadata"]["name"] for i in server.request("GET", path)[1].get("items", [])]  # noqa: E731
            wait_for(lambda: "system:public-info-viewer" in names(f"{RBAC}/clusterrolebindings"),
                     what="the bootstrap bindings")
            roles = names(f"{RBAC}/clusterroles")
            t.check("the bootstrap cluster roles exist", {"cluster-admin", "admin", "edit", "view",
                                                          "system:discovery", "system:basic-user",
                                                          "system:public-info-viewer"} <= set(roles), roles)
            status, body = server.request("GET", f"{RBAC}/clusterrolebindings/cluster-admin")
            t.check("cluster-admin is bound to system:masters", status == 200 and
                    body["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                          "name": "system:masters"}], body)
            bad = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "a/b"}, "rules": []}
            status, body = server.request("POST", f"{RBAC}/clusterroles", body=bad)
            t.check("an RBAC name with '/' is 422", status == 422 and
                    "may not contain '/'" in body.get("message", ""), body)
            kubectl = shutil.which("kubectl")
            if kubectl:
                env = dict(os.environ, KUBECONFIG=server.kubeconfig(tmp), HOME=tmp)

                def run(*args):
                    p = subprocess.run([kubectl, *args], capture_output=True, text=True, env=env, timeout=60)
                    return p.returncode, p.stdout + p.stderr
                code, out = run("create", "role", "pod-reader", "--verb=get,list", "--resource=pods")
                t.check("kubectl create role", code == 0, out)
                code, out = run("create", "rolebinding", "alice-reads", "--role=pod-reader", "--user=alice")
                t.check("kubectl create rolebinding", code == 0, out)
                code, out = run("create", "clusterrolebinding", "devs-view", "--clusterrole=view", "--group=devs")
                t.check("kubectl create clusterrolebinding", code == 0, out)
                code, out = run("get", "rolebindings")
                t.check("kubectl get rolebindings shows the role", code == 0 and "Role/pod-reader" in out, out)
                code, out = run("get", "role", "pod-reader", "-o", "jsonpath={.rules[0].verbs}")
                t.check("the role's rules arrived", code == 0 and out == '["get","list"]', out)
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
