"""Metadata-only clients: what client-go's metadata client (garbage collectors, namespace and
quota controllers, controller-runtime's metadata-only informers) asks for and must get, through
the watch cache and storage alike: PartialObjectMetadata for objects and watch events (bookmarks
included), PartialObjectMetadataList for lists, kube's 406s for a form that does not fit, for
built-in kinds and custom resources; the same through the Python client.

Usage: metadata_clients_test.py <path to kwatch-apiserver>
"""
import json
import time

from harness import WatchStream, configmap, run_suite, wait_for

# The Accept headers client-go's metadata client sends (metadata.go): protobuf first, which
# kwatch does not speak, then JSON, then plain JSON.
ONE = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
       "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")
LIST = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json")

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [
            {"name": "v1", "served": True, "storage": True,
             "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                 "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}},
            {"name": "v2", "served": True, "storage": False,
             "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                 "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}}

CM = "/api/v1/namespaces/meta/configmaps"
GADGETS = "/apis/example.com/v1/namespaces/meta/gadgets"


def only_metadata(obj, api_version="meta.k8s.io/v1"):
    return (isinstance(obj, dict) and obj.get("kind") == "PartialObjectMetadata"
            and obj.get("apiVersion") == api_version and set(obj) == {"kind", "apiVersion", "metadata"})


def check_reads(t, server, path, name, label):
    """GET and LIST of one kind, as the metadata client reads them."""
    status, got = server.request("GET", f"{path}/{name}", headers={"Accept": ONE})
    t.check(f"{label}: GET answers PartialObjectMetadata",
            status == 200 and only_metadata(got) and got["metadata"].get("name") == name
            and got["metadata"].get("labels", {}).get("app") == "meta", f"{status} {got}"[:400])
    # A list from the watch cache (no resourceVersion), and one from storage (an exact one).
    status, listed = server.request("GET", path, headers={"Accept": LIST})
    items = listed.get("items", []) if isinstance(listed, dict) else []
    t.check(f"{label}: LIST answers PartialObjectMetadataList with every item's metadata",
            status == 200 and listed.get("kind") == "PartialObjectMetadataList"
            and listed.get("apiVersion") == "meta.k8s.io/v1"
            and listed.get("metadata", {}).get("resourceVersion")
            and len(items) >= 2 and all(only_metadata(i) for i in items), f"{status} {listed}"[:400])
    rv = listed.get("metadata", {}).get("resourceVersion") if isinstance(listed, dict) else ""
    status, exact = server.request("GET", f"{path}?resourceVersion={rv}&resourceVersionMatch=Exact",
                                   headers={"Accept": LIST})
    t.check(f"{label}: an exact LIST from storage is the same",
            status == 200 and exact.get("kind") == "PartialObjectMetadataList"
            and [i["metadata"]["name"] for i in exact.get("items", [])]
            == [i["metadata"]["name"] for i in items], f"{status} {exact}"[:400])
    status, page = server.request("GET", f"{path}?limit=1", headers={"Accept": LIST})
    t.check(f"{label}: a page keeps its continue token",
            status == 200 and len(page.get("items", [])) == 1
            and page.get("metadata", {}).get("continue"), f"{status} {page}"[:300])
    # A form that does not fit the answer, and one kwatch cannot make.
    status, body = server.request("GET", f"{path}/{name}", headers={
        "Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"})
    t.check(f"{label}: an object asked for as a list is 406",
            status == 406 and body.get("reason") == "NotAcceptable"
            and "but the requested object is not a list" in body.get("message", ""), f"{status} {body}")
    status, body = server.request("GET", path, headers={
        "Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"})
    t.check(f"{label}: a list asked for as one object is 406",
            status == 406 and "but the requested object is a list" in body.get("message", ""),
            f"{status} {body}")
    status, body = server.request("GET", f"{path}/{name}", headers={
        "Accept": "application/json;as=Deployment;g=meta.k8s.io;v=v1"})
    t.check(f"{label}: a form kwatch cannot make is 406", status == 406, f"{status} {body}")


def check_watch(t, server, path, create, label):
    """A metadata watch: initial events, then changes and a delete, each PartialObjectMetadata;
    bookmarks too, since the client decodes every event's object that way."""
    watches = [WatchStream(server, f"{path}?watch=1&allowWatchBookmarks=true&sendInitialEvents=true"
                                   "&resourceVersionMatch=NotOlderThan", headers={"Accept": ONE})
               for _ in range(3)]
    for w in watches:
        w.start_background()
    try:
        create("later")
        status, _ = server.request("DELETE", f"{path}/later")
        t.check(f"{label}: the object is deleted", status == 200, str(status))

        def seen(w):
            types = [e.get("type") for e in w.events()]
            return "DELETED" in types and "BOOKMARK" in types

        wait_for(lambda: all(seen(w) for w in watches), timeout=15, what="the watch events")
        events = watches[0].events()
        t.check(f"{label}: every event's object is PartialObjectMetadata",
                events and all(only_metadata(e.get("object")) for e in events),
                json.dumps(events)[:600])
        bookmark = next(e for e in events if e.get("type") == "BOOKMARK")
        t.check(f"{label}: the initial-events bookmark keeps its annotation",
                bookmark["object"]["metadata"].get("annotations", {}).get(
                    "k8s.io/initial-events-end") == "true", json.dumps(bookmark))
        later = [e for e in events if e["object"]["metadata"].get("name") == "later"]
        t.check(f"{label}: the new object is ADDED then DELETED, its labels kept",
                [e["type"] for e in later] == ["ADDED", "DELETED"]
                and later[0]["object"]["metadata"].get("labels", {}).get("app") == "meta",
                json.dumps(later)[:400])
        t.check(f"{label}: every watcher gets the same events",
                all(w.events() == events for w in watches[1:]))
    finally:
        for w in watches:
            w.close()


def check_python_client(t, server):
    try:
        import kubernetes.client as k8s
    except ImportError:
        t.check("python3-kubernetes is installed", False)
        return
    cfg = k8s.Configuration()
    cfg.host = f"http://127.0.0.1:{server.port}"
    api = k8s.ApiClient(cfg)
    resp = api.call_api(CM, "GET", header_params={"Accept": LIST}, _preload_content=False,
                        auth_settings=[])[0]
    listed = json.loads(resp.data)
    t.check("the Python client lists metadata only",
            listed.get("kind") == "PartialObjectMetadataList"
            and all(only_metadata(i) for i in listed.get("items", [])), json.dumps(listed)[:300])
    # Its typed watch over a metadata stream: each object read as metadata.
    from kubernetes import watch
    w = watch.Watch()
    names = []
    for event in w.stream(lambda **kw: api.call_api(CM, "GET", query_params=[
            ("watch", "true"), ("timeoutSeconds", "2")], header_params={"Accept": ONE},
            _preload_content=False, auth_settings=[])[0]):
        obj = event["raw_object"]
        if only_metadata(obj):
            names.append(obj["metadata"]["name"])
        if len(names) >= 2:
            w.stop()
    t.check("the Python client watches metadata only", len(names) >= 2, str(names))


def checks(t, server, tmp):
    server.create_namespace("meta")

    def create_cm(name):
        status, body = server.request("POST", CM, body=configmap(name, {"k": "v" * 100},
                                                                 labels={"app": "meta"}))
        if status != 201:
            raise AssertionError(f"{status} {body}")

    for name in ("a", "b"):
        create_cm(name)
    check_reads(t, server, CM, "a", "ConfigMaps")
    check_watch(t, server, CM, create_cm, "ConfigMaps")

    status, body = server.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                  body=CRD)
    t.check("the CRD is created", status == 201, f"{status} {body}"[:300])
    wait_for(lambda: server.request("GET", GADGETS)[0] == 200, what="the gadgets to be served")

    def create_gadget(name):
        status, body = server.request("POST", GADGETS, body={
            "apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": name, "labels": {"app": "meta"}}, "spec": {"size": 3}})
        if status != 201:
            raise AssertionError(f"{status} {body}")

    for name in ("a", "b"):
        create_gadget(name)
    check_reads(t, server, GADGETS, "a", "Gadgets")
    status, body = server.request("GET", GADGETS, headers={
        "Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"})
    t.check("Gadgets: the 406 names an unstructured list as kube does",
            status == 406 and "(*unstructured.UnstructuredList)" in body.get("message", ""),
            f"{status} {body}")
    check_watch(t, server, GADGETS, create_gadget, "Gadgets")
    # Another served version: the metadata is the same.
    status, v2 = server.request("GET", "/apis/example.com/v2/namespaces/meta/gadgets/a",
                                headers={"Accept": ONE})
    status1, v1 = server.request("GET", f"{GADGETS}/a", headers={"Accept": ONE})
    t.check("Gadgets: v2's metadata is v1's", status == 200 and v2 == v1, f"{v2} {v1}"[:400])

    # A write answered with its metadata (the metadata client's Patch).
    status, patched = server.request("PATCH", f"{CM}/a", body=json.dumps(
        {"metadata": {"labels": {"patched": "yes"}}}),
        headers={"Content-Type": "application/merge-patch+json", "Accept": ONE})
    t.check("a patch answers PartialObjectMetadata",
            status == 200 and only_metadata(patched)
            and patched["metadata"]["labels"].get("patched") == "yes", f"{status} {patched}"[:300])
    # YAML, for a human.
    status, text = server.request("GET", f"{CM}/a", headers={
        "Accept": "application/yaml;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}, raw=True)
    t.check("YAML of the metadata", status == 200 and b"kind: PartialObjectMetadata" in text
            and b"\ndata:" not in text, text[:300])
    check_python_client(t, server)


if __name__ == "__main__":
    run_suite(checks)
