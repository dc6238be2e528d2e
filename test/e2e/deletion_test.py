"""Deletion as controllers rely on it: what a delete answers, finalizers, a pod's grace period,
propagationPolicy Background / Orphan / Foreground carried out by the built-in garbage collector,
dangling owner references, namespaces that terminate before they go, the namespaces that cannot
be deleted, kubectl and the official Python client, a collector that picks up after a restart,
and one that neither stalls nor spins on cycles of owner references and is fair to every
namespace while a large family or a long chain is being collected.

Usage: deletion_test.py <path to kwatch-apiserver>
"""
import json
import os
import shutil
import subprocess
import sys
import time

from harness import Checks, Server, TempDir, WatchStream, summarize, wait_for

CMS = "/api/v1/namespaces/{ns}/configmaps"
DEPLOYS = "/apis/apps/v1/namespaces/{ns}/deployments"


def configmap(name, owners=(), finalizers=None):
    meta = {"name": name}
    if owners:
        meta["ownerReferences"] = [dict(o) for o in owners]
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def deployment(name):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def owner_ref(obj, block=False):
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": block}


def create(server, path, body):
    status, out = server.request("POST", path, body=body)
    if status != 201:
        raise AssertionError(f"POST {path}: {status} {out!r}"[:600])
    return out


def gone(server, path):
    return server.request("GET", path)[0] == 404


def exists(server, path):
    return server.request("GET", path)[0] == 200


def eventually(checks, name, condition, timeout=10.0):
    try:
        wait_for(condition, timeout=timeout, what=name)
        checks.check(name, True)
    except AssertionError as e:
        checks.check(name, False, str(e)[:300])


def responses(checks, server, ns):
    cms = CMS.format(ns=ns)
    created = create(server, cms, configmap("plain"))
    status, body = server.request("DELETE", f"{cms}/plain")
    checks.check("deleting a ConfigMap answers 200 with a Success Status, not the object",
                 status == 200 and body.get("kind") == "Status" and body.get("status") == "Success"
                 and body.get("details", {}).get("name") == "plain"
                 and body.get("details", {}).get("kind") == "configmaps"
                 and body.get("details", {}).get("uid") == created["metadata"]["uid"], body)
    pods = f"/api/v1/namespaces/{ns}/pods"
    create(server, pods, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                          "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    status, body = server.request("DELETE", f"{pods}/p")
    checks.check("deleting a pod (on no node) answers with the pod, deleted at once",
                 status == 200 and body.get("kind") == "Pod" and gone(server, f"{pods}/p"), body)
    status, body = server.request("DELETE", f"{cms}/plain", body={"propagationPolicy": "Sideways"})
    checks.check("a propagationPolicy kube does not know is 422 naming the field",
                 status == 422 and "propagationPolicy" in body.get("message", ""), body)
    create(server, cms, configmap("both"))
    status, body = server.request("DELETE", f"{cms}/both",
                                  body={"propagationPolicy": "Orphan", "orphanDependents": True})
    checks.check("orphanDependents together with propagationPolicy is 422", status == 422, body)
    for i in range(3):
        create(server, cms, configmap(f"many-{i}"))
    status, body = server.request("DELETE", f"{cms}?fieldSelector=metadata.name%3Dmany-1")
    checks.check("deletecollection answers with the list of what it deleted",
                 status == 200 and body.get("kind") == "ConfigMapList"
                 and [i["metadata"]["name"] for i in body.get("items", [])] == ["many-1"]
                 and gone(server, f"{cms}/many-1") and exists(server, f"{cms}/many-0"), body)


def finalizers(checks, server, ns):
    cms = CMS.format(ns=ns)
    create(server, cms, configmap("held", finalizers=["example.com/hold"]))
    status, body = server.request("DELETE", f"{cms}/held")
    checks.check("a delete of an object with a finalizer answers with it, deletionTimestamp set",
                 status == 200 and body.get("kind") == "ConfigMap"
                 and "deletionTimestamp" in body.get("metadata", {})
                 and body["metadata"].get("deletionGracePeriodSeconds") == 0, body)
    checks.check("the object stays while its finalizer does", exists(server, f"{cms}/held"))
    status, body = server.request("PATCH", f"{cms}/held",
                                  body={"metadata": {"finalizers": ["example.com/hold", "x.io/new"]}},
                                  headers={"Content-Type": "application/merge-patch+json"})
    checks.check("no new finalizer once deletion started (422)", status == 422, body)
    status, body = server.request("PATCH", f"{cms}/held", body={"metadata": {"finalizers": None}},
                                  headers={"Content-Type": "application/merge-patch+json"})
    checks.check("removing the last finalizer deletes the object",
                 status == 200 and gone(server, f"{cms}/held"), body)


def grace_period(checks, server, ns):
    pods = f"/api/v1/namespaces/{ns}/pods"
    create(server, pods, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound"},
                          "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 30,
                                   "containers": [{"name": "c", "image": "nginx"}]}})
    status, body = server.request("DELETE", f"{pods}/bound")
    meta = body.get("metadata", {}) if isinstance(body, dict) else {}
    checks.check("a pod on a node gets its grace period: deletionGracePeriodSeconds 30, and stays",
                 status == 200 and meta.get("deletionGracePeriodSeconds") == 30
                 and "deletionTimestamp" in meta and exists(server, f"{pods}/bound"), body)
    status, body = server.request("DELETE", f"{pods}/bound", body={"gracePeriodSeconds": 5})
    checks.check("a shorter grace period shortens it",
                 status == 200 and body["metadata"].get("deletionGracePeriodSeconds") == 5, body)
    status, body = server.request("DELETE", f"{pods}/bound?gracePeriodSeconds=0")
    checks.check("gracePeriodSeconds=0 deletes it now", status == 200 and gone(server, f"{pods}/bound"),
                 body)


def propagation(checks, server, ns):
    cms, deploys = CMS.format(ns=ns), DEPLOYS.format(ns=ns)
    # Background: the owner goes at once, its dependents and theirs after it.
    owner = create(server, deploys, deployment("bg"))
    child = create(server, cms, configmap("bg-child", owners=[owner_ref(owner)]))
    grandchild = create(server, cms, configmap("bg-grandchild", owners=[owner_ref(child)]))
    status, body = server.request("DELETE", f"{deploys}/bg", body={"propagationPolicy": "Background"})
    checks.check("Background: the owner is deleted at once", status == 200 and gone(server, f"{deploys}/bg"),
                 body)
    eventually(checks, "Background: dependents and their dependents are collected",
               lambda: gone(server, f"{cms}/bg-child") and gone(server, f"{cms}/bg-grandchild"))
    del grandchild

    # Orphan: dependents stay and lose their reference.
    owner = create(server, deploys, deployment("orph"))
    create(server, cms, configmap("orph-child", owners=[owner_ref(owner, block=True)]))
    status, body = server.request("DELETE", f"{deploys}/orph", body={"propagationPolicy": "Orphan"})
    checks.check("Orphan: the owner is marked with the orphan finalizer",
                 status == 200 and "orphan" in body.get("metadata", {}).get("finalizers", []), body)
    eventually(checks, "Orphan: the owner goes", lambda: gone(server, f"{deploys}/orph"))
    status, body = server.request("GET", f"{cms}/orph-child")
    checks.check("Orphan: the dependent stays, without its ownerReference",
                 status == 200 and "ownerReferences" not in body["metadata"], body)

    # Foreground: dependents first (one held by a finalizer), the owner last.
    owner = create(server, deploys, deployment("fg"))
    create(server, cms, configmap("fg-held", owners=[owner_ref(owner, block=True)],
                                  finalizers=["example.com/hold"]))
    create(server, cms, configmap("fg-free", owners=[owner_ref(owner, block=True)]))
    status, body = server.request("DELETE", f"{deploys}/fg", body={"propagationPolicy": "Foreground"})
    checks.check("Foreground: the owner is marked with foregroundDeletion",
                 status == 200 and "foregroundDeletion" in body.get("metadata", {}).get("finalizers", [])
                 and "deletionTimestamp" in body["metadata"], body)
    eventually(checks, "Foreground: a free dependent is deleted", lambda: gone(server, f"{cms}/fg-free"))
    eventually(checks, "Foreground: a held dependent is marked for deletion",
               lambda: "deletionTimestamp" in server.request("GET", f"{cms}/fg-held")[1].get("metadata", {}))
    checks.check("Foreground: the owner waits for a blocking dependent", exists(server, f"{deploys}/fg"))
    server.request("PATCH", f"{cms}/fg-held", body={"metadata": {"finalizers": None}},
                   headers={"Content-Type": "application/merge-patch+json"})
    eventually(checks, "Foreground: the owner goes after its last dependent",
               lambda: gone(server, f"{cms}/fg-held") and gone(server, f"{deploys}/fg"))

    # Owner references to owners that are not there.
    create(server, cms, configmap("dangling", owners=[{"apiVersion": "apps/v1", "kind": "Deployment",
                                                      "name": "nobody", "uid": "0f0f0f0f-1111-2222-3333-444444444444"}]))
    eventually(checks, "an object whose only owner does not exist is collected",
               lambda: gone(server, f"{cms}/dangling"))
    live = create(server, deploys, deployment("live"))
    create(server, cms, configmap("two-owners", owners=[
        owner_ref(live), {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nobody",
                          "uid": "0f0f0f0f-1111-2222-3333-555555555555"}]))
    eventually(checks, "with one live owner only the reference to the missing one goes",
               lambda: [r["name"] for r in server.request("GET", f"{cms}/two-owners")[1]
                        .get("metadata", {}).get("ownerReferences", [])] == ["live"])
    old = create(server, deploys, deployment("reborn"))
    server.request("DELETE", f"{deploys}/reborn", body={"propagationPolicy": "Orphan"})
    wait_for(lambda: gone(server, f"{deploys}/reborn"), what="reborn to go")
    create(server, deploys, deployment("reborn"))
    create(server, cms, configmap("old-uid", owners=[owner_ref(old)]))
    eventually(checks, "an owner re-created under the same name is another owner: collected",
               lambda: gone(server, f"{cms}/old-uid"))
    checks.check("an unrelated object stays", exists(server, f"{cms}/two-owners"))


def namespaces(checks, server):
    server.create_namespace("doomed")
    cms = CMS.format(ns="doomed")
    create(server, cms, configmap("a"))
    create(server, cms, configmap("b", finalizers=["example.com/hold"]))
    status, body = server.request("DELETE", "/api/v1/namespaces/doomed")
    checks.check("deleting a namespace answers with it, Terminating",
                 status == 200 and body.get("status", {}).get("phase") == "Terminating"
                 and "deletionTimestamp" in body.get("metadata", {}), body)
    status, body = server.request("POST", cms, body=configmap("late"))
    causes = body.get("details", {}).get("causes", []) if isinstance(body, dict) else []
    checks.check("nothing new in a terminating namespace: 403 with the NamespaceTerminating cause",
                 status == 403 and body.get("reason") == "Forbidden"
                 and "because it is being terminated" in body.get("message", "")
                 and any(c.get("reason") == "NamespaceTerminating" for c in causes), body)
    eventually(checks, "its contents are deleted (those without finalizers)",
               lambda: gone(server, f"{cms}/a"))

    def remaining_condition():
        _, ns = server.request("GET", "/api/v1/namespaces/doomed")
        conds = {c["type"]: c for c in ns.get("status", {}).get("conditions", [])}
        c = conds.get("NamespaceFinalizersRemaining", {})
        return c.get("status") == "True" and "example.com/hold in 1 resource instances" in c.get("message", "")
    eventually(checks, "its conditions name the finalizer that holds it", remaining_condition)
    checks.check("the namespace waits for the held object", exists(server, "/api/v1/namespaces/doomed"))
    server.request("PATCH", f"{cms}/b", body={"metadata": {"finalizers": None}},
                   headers={"Content-Type": "application/merge-patch+json"})
    eventually(checks, "then the namespace goes", lambda: gone(server, "/api/v1/namespaces/doomed"))
    for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
        status, body = server.request("DELETE", f"/api/v1/namespaces/{name}")
        checks.check(f"namespace {name} cannot be deleted (403)",
                     status == 403 and "this namespace may not be deleted" in body.get("message", "")
                     and exists(server, f"/api/v1/namespaces/{name}"), body)


def kubectl_and_python(checks, server, tmp):
    kubectl = shutil.which("kubectl")
    env = dict(os.environ, KUBECONFIG=server.kubeconfig(tmp))
    if kubectl:
        def run(*args):
            return subprocess.run([kubectl, *args], capture_output=True, text=True, env=env, timeout=60)
        server.create_namespace("kc")
        run("create", "configmap", "one", "-n", "kc", "--from-literal=a=b")
        p = run("delete", "configmap", "one", "-n", "kc")
        checks.check("kubectl delete configmap", p.returncode == 0 and 'configmap "one" deleted' in p.stdout,
                     p.stdout + p.stderr)
        owner = create(server, DEPLOYS.format(ns="kc"), deployment("web"))
        create(server, CMS.format(ns="kc"), configmap("web-cfg", owners=[owner_ref(owner, block=True)]))
        p = run("delete", "deployment", "web", "-n", "kc", "--cascade=orphan")
        checks.check("kubectl delete --cascade=orphan waits for the owner and keeps the dependent",
                     p.returncode == 0 and gone(server, DEPLOYS.format(ns="kc") + "/web")
                     and "ownerReferences" not in server.request("GET", CMS.format(ns="kc") + "/web-cfg")[1]["metadata"],
                     p.stdout + p.stderr)
        owner = create(server, DEPLOYS.format(ns="kc"), deployment("api"))
        create(server, CMS.format(ns="kc"), configmap("api-cfg", owners=[owner_ref(owner, block=True)]))
        p = run("delete", "deployment", "api", "-n", "kc", "--cascade=foreground")
        checks.check("kubectl delete --cascade=foreground: dependent and owner gone when it returns",
                     p.returncode == 0 and gone(server, DEPLOYS.format(ns="kc") + "/api")
                     and gone(server, CMS.format(ns="kc") + "/api-cfg"), p.stdout + p.stderr)
        # A Deployment whose ReplicaSet and Pods carry the ownerReferences controllers give them.
        ns = "kc"
        rs_path = f"/apis/apps/v1/namespaces/{ns}/replicasets"
        pods_path = f"/api/v1/namespaces/{ns}/pods"
        dep = create(server, DEPLOYS.format(ns=ns), deployment("chain"))
        rs = create(server, rs_path, {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "chain-1", "labels": {"app": "chain"},
                         "ownerReferences": [owner_ref(dep, block=True)]},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "chain"}},
                     "template": {"metadata": {"labels": {"app": "chain"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
        for i in range(2):
            create(server, pods_path, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"chain-1-{i}", "labels": {"app": "chain"},
                             "ownerReferences": [owner_ref(rs, block=True)]},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        rv = server.list_rv(pods_path)
        streams = [WatchStream(server, f"{path}?watch=true&resourceVersion={rv}").start_background(keep=summarize)
                   for path in (pods_path, rs_path, DEPLOYS.format(ns=ns))]
        p = run("delete", "deployment", "chain", "-n", ns, "--cascade=foreground")
        deleted = {}
        try:
            wait_for(lambda: sum(1 for s in streams for e in s.events() if e[0] == "DELETED") >= 4,
                     what="four DELETED events")
        except AssertionError:
            pass
        for s in streams:
            for kind, key, event_rv in s.events():
                if kind == "DELETED":
                    deleted[key] = event_rv
            s.close()
        pods_rv = [deleted.get(f"{ns}/chain-1-{i}") for i in range(2)]
        checks.check("kubectl delete deployment --cascade=foreground: pods, then the replica set, "
                     "then the deployment, all gone when it returns",
                     p.returncode == 0 and None not in pods_rv and deleted.get(f"{ns}/chain-1")
                     and deleted.get(f"{ns}/chain")
                     and max(pods_rv) < deleted[f"{ns}/chain-1"] < deleted[f"{ns}/chain"]
                     and gone(server, f"{rs_path}/chain-1"), (p.stdout + p.stderr, deleted))
        p = run("delete", "namespace", "kc")
        checks.check("kubectl delete namespace waits until it is gone",
                     p.returncode == 0 and gone(server, "/api/v1/namespaces/kc"), p.stdout + p.stderr)
        p = run("delete", "namespace", "default")
        checks.check("kubectl delete namespace default is refused", p.returncode != 0 and
                     "may not be deleted" in p.stderr, p.stderr)
    else:
        print("kubectl is not installed: skipping the kubectl checks")
    try:
        sys.path.insert(0, "/usr/lib/python3/dist-packages")
        from kubernetes import client, config
    except ImportError:
        print("python3-kubernetes is not installed: skipping the Python client checks")
        return
    config.load_kube_config(config_file=env["KUBECONFIG"])
    apps = client.AppsV1Api()
    core = client.CoreV1Api()
    server.create_namespace("py")
    owner = create(server, DEPLOYS.format(ns="py"), deployment("py-web"))
    create(server, CMS.format(ns="py"), configmap("py-cfg", owners=[owner_ref(owner, block=True)]))
    w = core.list_namespaced_config_map("py")
    rv = w.metadata.resource_version
    apps.delete_namespaced_deployment("py-web", "py", propagation_policy="Foreground")
    from kubernetes import watch
    seen = []
    for event in watch.Watch().stream(core.list_namespaced_config_map, "py", resource_version=rv,
                                      timeout_seconds=10):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            break
    checks.check("Python client: delete_namespaced_deployment(propagation_policy='Foreground') and a "
                 "watch of the dependents sees it deleted", ("DELETED", "py-cfg") in seen, seen)
    eventually(checks, "Python client: the owner goes after", lambda: gone(server, DEPLOYS.format(ns="py") + "/py-web"))


def restart(checks, binary, tmp):
    """Owners deleted while no collector ran: a server that starts with one finishes the work."""
    data = os.path.join(tmp, "restart-data")
    server = Server(binary, data_dir=data, extra_args=["--enable-garbage-collector=false"]).start()
    try:
        server.create_namespace("rs")
        cms, deploys = CMS.format(ns="rs"), DEPLOYS.format(ns="rs")
        doomed = create(server, deploys, deployment("doomed"))
        keeper = create(server, deploys, deployment("keeper"))
        for i in range(20):
            create(server, cms, configmap(f"dep-{i}", owners=[owner_ref(doomed)]))
            create(server, cms, configmap(f"keep-{i}", owners=[owner_ref(keeper)]))
        status, body = server.request("DELETE", f"{deploys}/doomed", body={"propagationPolicy": "Foreground"})
        checks.check("without the collector a delete adds no GC finalizer: the owner goes at once",
                     status == 200 and gone(server, f"{deploys}/doomed"), body)
        checks.check("without the collector dependents of a deleted owner stay", exists(server, f"{cms}/dep-0"))
    finally:
        server.stop()
    server = Server(binary, data_dir=data).start()
    try:
        cms = CMS.format(ns="rs")
        eventually(checks, "after a restart with the collector the orphaned dependents are collected",
                   lambda: all(gone(server, f"{cms}/dep-{i}") for i in range(20)), timeout=20)
        checks.check("and the dependents of a live owner all stay",
                     all(exists(server, f"{cms}/keep-{i}") for i in range(20)))
    finally:
        server.stop()


def cpu_seconds(pid):
    """User and system CPU time of a process so far (fields 14 and 15 of /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def count(server, path):
    """How many objects a list has, read with limit=1; the root CA publisher's ConfigMap (in
    every namespace when the server serves HTTPS) not counted."""
    status, body = server.request("GET", f"{path}?limit=1")
    if status != 200:
        raise AssertionError(f"GET {path}: {status} {body!r}"[:300])
    n = len(body.get("items", [])) + body.get("metadata", {}).get("remainingItemCount", 0)
    if n > 0 and server.https:
        status, _ = server.request("GET", f"{path}/kube-root-ca.crt")
        n -= status == 200
    return n


def set_owners(server, path, owners):
    status, body = server.request("PATCH", path, body={"metadata": {"ownerReferences": owners}},
                                  headers={"Content-Type": "application/merge-patch+json"})
    if status != 200:
        raise AssertionError(f"PATCH {path}: {status} {body!r}"[:300])


def family(session, ns, owner_name, n, block=False):
    """A Deployment and n ConfigMaps it owns, in ns; returns the ConfigMaps' path."""
    owner = create(session, DEPLOYS.format(ns=ns), deployment(owner_name))
    for i in range(n):
        create(session, CMS.format(ns=ns), configmap(f"{owner_name}-{i}", owners=[owner_ref(owner, block)]))
    return CMS.format(ns=ns)


def cycles_and_fairness(checks, binary):
    """Issue 25, item 8: one cycle of blocking owner references deleted in foreground stalled the
    collector for everyone (and spun a core); a large family or a long chain must not hold up
    another namespace's collection either."""
    server = Server(binary).start()
    session = server.session()
    try:
        for ns in ("cycle", "self", "ring", "fan", "chain", "others"):
            server.create_namespace(ns)
        # Two ConfigMaps owning each other, both blocking; one deleted in foreground.
        cms = CMS.format(ns="cycle")
        a = create(session, cms, configmap("a"))
        b = create(session, cms, configmap("b", owners=[owner_ref(a, block=True)]))
        set_owners(server, f"{cms}/a", [owner_ref(b, block=True)])
        # A ConfigMap owning itself.
        self_path = CMS.format(ns="self") + "/me"
        me = create(session, CMS.format(ns="self"), configmap("me"))
        set_owners(server, self_path, [owner_ref(me, block=True)])
        # A ring of three: x owns y owns z owns x.
        ring = CMS.format(ns="ring")
        x = create(session, ring, configmap("x"))
        y = create(session, ring, configmap("y", owners=[owner_ref(x, block=True)]))
        z = create(session, ring, configmap("z", owners=[owner_ref(y, block=True)]))
        set_owners(server, f"{ring}/x", [owner_ref(z, block=True)])

        start = time.monotonic()
        server.request("DELETE", f"{cms}/a", body={"propagationPolicy": "Foreground"})
        server.request("DELETE", self_path, body={"propagationPolicy": "Foreground"})
        server.request("DELETE", f"{ring}/x", body={"propagationPolicy": "Foreground"})
        eventually(checks, "two ConfigMaps owning each other (blockOwnerDeletion), one deleted in "
                   "Foreground: both go", lambda: gone(server, f"{cms}/a") and gone(server, f"{cms}/b"),
                   timeout=5)
        eventually(checks, "a ConfigMap owning itself deleted in Foreground goes",
                   lambda: gone(server, self_path), timeout=5)
        eventually(checks, "a ring of three owners deleted in Foreground: all go",
                   lambda: all(gone(server, f"{ring}/{n}") for n in "xyz"), timeout=5)
        print(f"cycles collected in {time.monotonic() - start:.2f}s")

        # Starvation: 200 dependents in another namespace while the collector has a family of
        # 3,000 and a chain of 1,000 (each owning the next, blocking, deleted in Foreground) to do.
        others = family(session, "others", "small", 200)
        fan = family(session, "fan", "big", 3000)
        chain = CMS.format(ns="chain")
        prev = create(session, chain, configmap("link-0"))
        for i in range(1, 1000):
            prev = create(session, chain, configmap(f"link-{i}", owners=[owner_ref(prev, block=True)]))
        server.request("DELETE", DEPLOYS.format(ns="fan") + "/big", body={"propagationPolicy": "Background"})
        server.request("DELETE", f"{chain}/link-0", body={"propagationPolicy": "Foreground"})
        start = time.monotonic()
        server.request("DELETE", DEPLOYS.format(ns="others") + "/small",
                       body={"propagationPolicy": "Background"})
        eventually(checks, "200 dependents in another namespace are collected within 10 s while a "
                   "family of 3,000 and a chain of 1,000 are being collected",
                   lambda: count(server, others) == 0, timeout=10)
        took = time.monotonic() - start
        fan_left, chain_left = count(server, fan), count(server, chain)
        print(f"200 dependents collected in {took:.2f}s; then {fan_left} of the 3,000 and "
              f"{chain_left} of the chain of 1,000 were left")
        checks.check("they took their turns with the family of 3,000, not after it (most of it "
                     "was left when they were done)", fan_left >= 1500, f"{fan_left} left")
        checks.check("and with the chain (it was still there)", chain_left > 0, f"{chain_left} left")
        start = time.monotonic()
        eventually(checks, "the family of 3,000 is collected",
                   lambda: count(server, fan) == 0, timeout=60)
        print(f"the rest of the family collected in {time.monotonic() - start:.2f}s more")
        eventually(checks, "the chain of 1,000 deleted in Foreground is collected",
                   lambda: count(server, chain) == 0, timeout=60)
        print(f"the chain collected in {time.monotonic() - start:.2f}s more")

        # A foreground deletion that waits (a blocking dependent held by a finalizer) must not
        # keep the idle server busy.
        held = CMS.format(ns="others")
        owner = create(session, DEPLOYS.format(ns="others"), deployment("waits"))
        create(session, held, configmap("held", owners=[owner_ref(owner, block=True)],
                                        finalizers=["example.com/hold"]))
        server.request("DELETE", DEPLOYS.format(ns="others") + "/waits",
                       body={"propagationPolicy": "Foreground"})
        eventually(checks, "a held dependent of an owner deleted in Foreground is marked for deletion",
                   lambda: "deletionTimestamp" in server.request("GET", f"{held}/held")[1].get("metadata", {}))
        before, t0 = cpu_seconds(server.proc.pid), time.monotonic()
        time.sleep(2)  # the measuring window, not a wait for anything to happen
        used, window = cpu_seconds(server.proc.pid) - before, time.monotonic() - t0
        print(f"idle server with a waiting owner: {used:.2f}s of CPU in {window:.2f}s")
        checks.check("an idle server with an owner waiting in Foreground uses under 10% of a core",
                     used < 0.1 * window, f"{used:.2f}s of CPU in {window:.2f}s")
        checks.check("and the owner still waits",
                     exists(server, DEPLOYS.format(ns="others") + "/waits"))
        server.request("PATCH", f"{held}/held", body={"metadata": {"finalizers": None}},
                       headers={"Content-Type": "application/merge-patch+json"})
        eventually(checks, "then it goes", lambda: gone(server, DEPLOYS.format(ns="others") + "/waits"))
        checks.check("server alive after the cycles", server.alive())
    finally:
        session.close()
        server.stop()


def main():
    binary = sys.argv[1]
    checks = Checks()
    with TempDir() as tmp:
        server = Server(binary).start()
        try:
            server.create_namespace("t")
            responses(checks, server, "t")
            finalizers(checks, server, "t")
            grace_period(checks, server, "t")
            propagation(checks, server, "t")
            namespaces(checks, server)
            kubectl_and_python(checks, server, tmp)
            checks.check("server alive", server.alive())
        finally:
            server.stop()
        restart(checks, binary, tmp)
        cycles_and_fairness(checks, binary)
    checks.finish()


if __name__ == "__main__":
    main()
