"""Watch as real clients use it: the official Python client, kubectl, and the /metrics it moves.

The server runs with --watch-cache-sizes=configmaps#100 so that a too-old RV is easy to make.

Usage: watch_clients_test.py <path to kwatch-apiserver>
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import time

from harness import (delete_and_observe, Checks, TempDir, WatchStream, configmap, rv_of, start_server, summarize)

NS = "wcl"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
MERGE = {"Content-Type": "application/merge-patch+json"}


def wait(condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not condition():
        time.sleep(0.02)
    return condition()


def python_client(t, server):
    from kubernetes import client, watch  # python3-kubernetes
    from kubernetes.client.rest import ApiException

    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{server.port}"
    api = client.CoreV1Api(client.ApiClient(cfg))
    start = api.list_namespaced_config_map(NS).metadata.resource_version
    events, errors = [], []
    w = watch.Watch()

    def run():
        try:
            for ev in w.stream(api.list_namespaced_config_map, NS, resource_version=start,
                               timeout_seconds=10, _request_timeout=20):
                o = ev["object"]
                events.append((ev["type"], o.metadata.name, int(o.metadata.resource_version),
                               o.data))
                if len(events) >= 3:
                    w.stop()
        except Exception as e:  # noqa: BLE001 - reported as a check
            errors.append(f"{type(e).__name__}: {e}"[:400])

    th = threading.Thread(target=run, daemon=True)
    th.start()
    c = api.create_namespaced_config_map(NS, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="py-1"), data={"a": "1"}))
    m = api.patch_namespaced_config_map("py-1", NS, {"data": {"a": "2"}})
    status, d = delete_and_observe(server.port, f"{CMS}/py-1")
    want = [("ADDED", "py-1", int(c.metadata.resource_version), {"a": "1"}),
            ("MODIFIED", "py-1", int(m.metadata.resource_version), {"a": "2"}),
            ("DELETED", "py-1", rv_of(d), {"a": "2"})]
    th.join(timeout=25)
    t.check("python client: watch.Watch().stream() ended without an error",
            not th.is_alive() and not errors, errors)
    t.check("python client: ADDED, MODIFIED, DELETED with the writes' RVs and data",
            events == want, f"got {events} want {want}")

    # a too-old RV: the client raises ApiException(410) (it does not retry with timeout_seconds)
    session = server.session()
    session.request("POST", CMS, configmap("py-old", {"v": "0"}))
    for i in range(1, 150):
        session.request("PATCH", f"{CMS}/py-old", f'{{"data":{{"v":"{i}"}}}}', MERGE)
    session.close()
    raised = None
    got = []
    try:
        for ev in watch.Watch().stream(api.list_namespaced_config_map, NS, resource_version=start,
                                       timeout_seconds=5, _request_timeout=20):
            got.append(ev["type"])
            if len(got) > 5:
                break
    except ApiException as e:
        raised = e.status
    except Exception as e:  # noqa: BLE001
        raised = repr(e)[:300]
    t.check("python client: a too-old RV raises ApiException with status 410",
            raised == 410 and not got, f"raised={raised} events={got[:5]}")


def metrics(t, server):
    def watch_requests():
        return sum(v for n, lbl, v in server.metrics()
                   if n == "apiserver_request_total" and lbl.get("verb", "").lower() == "watch"
                   and lbl.get("resource") == "configmaps" and lbl.get("code") == "200")

    watchers = lambda: server.metric("kwatch_watchers", resource="configmaps")  # noqa: E731
    dispatched = lambda: server.metric("kwatch_watch_events_dispatched_total",  # noqa: E731
                                       resource="configmaps")
    exported = watchers() is not None
    patience = 1.0 if exported else 0.2  # do not wait for a metric that is not there at all
    t.check("metrics: kwatch_watchers{resource=\"configmaps\"} is 0 with no watch open",
            wait(lambda: watchers() == 0, 10 * patience), watchers())
    total = len(server.request("GET", "/api/v1/configmaps")[1].get("items", []))
    t.check("metrics: kwatch_cache_ready{resource=\"configmaps\"} is 1",
            server.metric("kwatch_cache_ready", resource="configmaps") == 1,
            server.metric("kwatch_cache_ready", resource="configmaps"))
    t.check("metrics: kwatch_watch_cache_capacity is the configured 100",
            server.metric("kwatch_watch_cache_capacity", resource="configmaps") == 100,
            server.metric("kwatch_watch_cache_capacity", resource="configmaps"))
    t.check(f"metrics: kwatch_watch_cache_objects is the {total} stored configmaps",
            wait(lambda: server.metric("kwatch_watch_cache_objects", resource="configmaps")
                 == total, 5 * patience),
            server.metric("kwatch_watch_cache_objects", resource="configmaps"))
    events = server.metric("kwatch_watch_cache_events", resource="configmaps")
    t.check("metrics: kwatch_watch_cache_events is within the window (1..100)",
            events is not None and 1 <= events <= 100, events)
    t.check("metrics: kwatch_reflector_relists_total is exported",
            server.metric("kwatch_reflector_relists_total", resource="configmaps") is not None)
    requests0 = watch_requests()
    sent0 = dispatched() or 0

    start = server.list_rv(CMS)
    streams = [WatchStream(server, f"{CMS}?watch=true&resourceVersion={start}") for _ in range(3)]
    try:
        t.check("metrics: kwatch_watchers is 3 with three watches open",
                wait(lambda: watchers() == 3, 5 * patience), watchers())
        obj = server.request("POST", CMS, configmap("metrics-1"))[1]
        got = [s.take(1, timeout=5) for s in streams]
        t.check("metrics: each watch got the change",
                all([summarize(e) for e in g] == [("ADDED", f"{NS}/metrics-1", rv_of(obj))]
                    for g in got), got)
        t.check("metrics: kwatch_watch_events_dispatched_total grew by at least 3",
                wait(lambda: (dispatched() or 0) >= sent0 + 3, 5 * patience), f"{sent0} -> {dispatched()}")
    finally:
        for s in streams:
            s.close()
    t.check("metrics: kwatch_watchers is back to 0 once the watches are closed",
            wait(lambda: watchers() == 0, 10 * patience), watchers())
    t.check("metrics: apiserver_request_total{verb=watch,resource=configmaps,code=200} grew by 3",
            wait(lambda: watch_requests() >= requests0 + 3, 5 * patience), f"{requests0} -> {watch_requests()}")


def kubectl(t, server, tmp):
    exe = shutil.which("kubectl")
    if not exe:
        print("kubectl is not installed: skipping the kubectl checks")
        return
    env = dict(os.environ, HOME=tmp, KUBECONFIG=server.kubeconfig(tmp))
    server.request("POST", CMS, configmap("kc-seed"))

    proc = subprocess.Popen([exe, "-n", NS, "get", "configmaps", "-w"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    out, err = [], []

    def pump(pipe, into):
        for line in pipe:
            into.append(line)

    readers = [threading.Thread(target=pump, args=(proc.stdout, out), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, err), daemon=True)]
    for r in readers:
        r.start()
    try:
        listed = wait(lambda: any(line.split()[:1] == ["kc-seed"] for line in out), 15)
        t.check("kubectl get -w: lists the existing object first", listed, f"out={out} err={err}")
        for name in ("kc-new-1", "kc-new-2"):
            server.request("POST", CMS, configmap(name))
        names = lambda: {line.split()[0] for line in out if line.split()}  # noqa: E731
        t.check("kubectl get -w: prints objects created while it runs",
                wait(lambda: {"kc-new-1", "kc-new-2"} <= names(), 15),
                f"out={out} err={err}")
        t.check("kubectl get -w: still running (the watch did not fail)", proc.poll() is None,
                f"rc={proc.poll()} err={err}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for r in readers:
            r.join(timeout=5)

    status, lst = server.request("GET", "/api/v1/configmaps")
    state = sorted((f"{i['metadata']['namespace']}/{i['metadata']['name']}",
                    int(i["metadata"]["resourceVersion"])) for i in lst.get("items", []))
    t0 = time.monotonic()
    p = subprocess.run([exe, "get", "--raw", "/api/v1/configmaps?watch=1&timeoutSeconds=3"],
                       capture_output=True, text=True, env=env, timeout=30)
    took = time.monotonic() - t0
    events = []
    for line in p.stdout.splitlines():
        if line.strip():
            try:
                events.append(json.loads(line))
            except ValueError:
                events.append({"type": "<unparseable>", "raw": line[:100]})
    t.check("kubectl get --raw watch: exit 0 after about 3 s (2.5-15 s)",
            p.returncode == 0 and 2.5 <= took <= 15,
            f"rc={p.returncode} took={took:.1f}s err={p.stderr[-300:]!r}")
    t.check("kubectl get --raw watch: one JSON ADDED event per line for every configmap",
            all(e.get("type") == "ADDED" for e in events)
            and sorted(summarize(e)[1:] for e in events) == state,
            f"{[summarize(e) for e in events][:4]} want {state[:4]} ({len(events)}/{len(state)})")


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = start_server(t, binary, ["--watch-cache-sizes=configmaps#100"])
        try:
            server.create_namespace(NS)
            for part in (python_client, metrics, kubectl):
                try:
                    part(t, server, tmp) if part is kubectl else part(t, server)
                except Exception as e:  # noqa: BLE001 - a client failure is a failed check
                    t.check(f"{part.__name__} ran to completion", False, repr(e)[:600])
        finally:
            server.stop()
            if t.failed:
                print(server.read_log()[-2500:])
    t.finish()


if __name__ == "__main__":
    main()
