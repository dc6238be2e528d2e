"""The deprecated componentstatuses as `kubectl get cs` and clients meet them: get and list only,
kube's deprecation warning, the storage check as etcd-0, the in-process controller manager
healthy, the scheduler probed at kube's address, selectors, kube's columns and errors.

Usage: component_status_test.py <path to kwatch-apiserver>
"""
import http.client
import json
import socket

from harness import kubectl_runner, run_suite

CS = "/api/v1/componentstatuses"


def get(server, path, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        try:
            body = json.loads(data)
        except ValueError:
            body = data.decode(errors="replace")
        return resp.status, body, resp.getheader("Warning", "")
    finally:
        conn.close()


def scheduler_listening():
    try:
        socket.create_connection(("127.0.0.1", 10259), timeout=1).close()
        return True
    except OSError:
        return False


def checks(t, server, tmp):
    status, body, warning = get(server, CS)
    items = body.get("items", []) if isinstance(body, dict) else []
    by_name = {i["metadata"]["name"]: i["conditions"][0] for i in items}
    t.check("the list names kube's three components",
            status == 200 and body.get("kind") == "ComponentStatusList"
            and sorted(by_name) == ["controller-manager", "etcd-0", "scheduler"], body)
    t.check("with kube's deprecation warning",
            warning == '299 - "v1 ComponentStatus is deprecated in v1.19+"', warning)
    t.check("etcd-0 is the storage check: Healthy, ok",
            by_name.get("etcd-0") == {"type": "Healthy", "status": "True", "message": "ok"}, by_name)
    t.check("controller-manager runs inside kwatch: Healthy, ok",
            by_name.get("controller-manager") == {"type": "Healthy", "status": "True", "message": "ok"},
            by_name)
    if not scheduler_listening():
        t.check("scheduler, with nothing at 127.0.0.1:10259, is Unknown with the dial error",
                by_name.get("scheduler") == {
                    "type": "Healthy", "status": "Unknown",
                    "error": 'Get "https://127.0.0.1:10259/healthz": dial tcp 127.0.0.1:10259: '
                             "connect: connection refused"}, by_name)
    status, body, _ = get(server, CS + "/etcd-0")
    t.check("one component by name", status == 200 and body.get("kind") == "ComponentStatus"
            and body["metadata"]["name"] == "etcd-0", body)
    status, body, _ = get(server, CS + "/nope")
    t.check("an unknown one is kube's 500", status == 500
            and body.get("message") == "Internal error occurred: Component not found: nope", body)
    status, body, _ = get(server, CS + "?fieldSelector=metadata.name%3Detcd-0")
    t.check("a field selector picks by name",
            status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["etcd-0"], body)
    status, body, _ = get(server, CS + "?labelSelector=tier%3Dcontrol")
    t.check("a label selector matches none of them (they have no labels)",
            status == 200 and body["items"] == [], body)
    status, body = server.request("POST", CS, body={"apiVersion": "v1", "kind": "ComponentStatus",
                                                    "metadata": {"name": "mine"}})
    t.check("they cannot be created: 405", status == 405, body)
    status, body, _ = get(server, CS + "?watch=true")
    t.check("nor watched: 405", status == 405, body)
    status, body, _ = get(server, CS, {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    t.check("a Table with kube's columns",
            status == 200 and body.get("kind") == "Table"
            and [c["name"] for c in body["columnDefinitions"]] == ["Name", "Status", "Message", "Error"]
            and ["etcd-0", "Healthy", "ok", ""] in [r["cells"] for r in body["rows"]], body)

    kc = kubectl_runner(server, tmp)
    if kc is None:
        return
    code, out = kc("get", "cs")
    lines = out.splitlines()
    t.check("kubectl get cs warns and shows kube's columns",
            code == 0 and "Warning: v1 ComponentStatus is deprecated in v1.19+" in out
            and any(line.split() == ["NAME", "STATUS", "MESSAGE", "ERROR"] for line in lines)
            and any(line.split()[:3] == ["etcd-0", "Healthy", "ok"] for line in lines), out)
    code, out = kc("api-resources", "--api-group=", "-o", "wide")
    line = next((l for l in out.splitlines() if l.startswith("componentstatuses")), "")
    t.check("kubectl api-resources lists them with cs, get and list",
            line.split()[:2] == ["componentstatuses", "cs"]
            and ("get,list" in line or "[get list]" in line), out)


if __name__ == "__main__":
    run_suite(checks)
