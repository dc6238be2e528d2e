"""A CustomResourceDefinition whose two versions are converted by a webhook, as an operator with
an evolving API installs it: v1 (stored) holds `spec.hostPort: "host:port"`, v2 holds
`spec.host` and `spec.port`, and a webhook server the test runs (HTTPS with its own CA, trusted
through caBundle) converts between them. kubectl and the Python client create, get, list, watch
and apply either version; objects are stored as v1; watches of v2 are converted once per event,
not once per watcher; a failing webhook or an object it cannot convert is a 500 naming the
webhook for v2 only, while v1 and the health check go on; the webhook restored, v2 recovers. An
admission webhook or admission policy whose rules name v1 only sees a write through v2 as the
conversion webhook makes it v1 (matchPolicy Equivalent).

Usage: conversion_webhook_test.py <path to kwatch-apiserver>
"""
import base64
import json
import os
import sys
import threading
import time

from harness import Checks, Server, TempDir, WatchStream, kubectl_runner, wait_for
from webhook_server import WebhookServer

GROUP = "conv.example.com"
NS = "conv"


class Converter(WebhookServer):
    """Answers ConversionReviews; `mode` switches how (normal, a failure, a broken answer)."""

    def __init__(self, directory):
        self.mode = "normal"
        super().__init__(directory, self.answer, name="converter")

    def converted(self, desired, since=0):
        """How many objects were sent to be converted to `desired`, from review `since` on."""
        with self.lock:
            return sum(len(r["objects"]) for _, r, _ in self.reviews[since:]
                       if r.get("desiredAPIVersion") == desired)

    def count(self):
        with self.lock:
            return len(self.reviews)

    @staticmethod
    def convert(obj, desired):
        out = json.loads(json.dumps(obj))
        spec = out.get("spec") or {}
        if desired.endswith("/v2") and "hostPort" in spec:
            host, _, port = spec.pop("hostPort").partition(":")
            spec["host"], spec["port"] = host, int(port or 0)
        elif desired.endswith("/v1") and "host" in spec:
            spec["hostPort"] = f"{spec.pop('host')}:{spec.pop('port', 0)}"
        out["spec"] = spec
        out["apiVersion"] = desired
        return out

    def answer(self, path, review):
        request = review["request"]
        desired = request["desiredAPIVersion"]
        objects = request["objects"]
        response = {"uid": request["uid"], "result": {"status": "Success"}}
        mode = self.mode
        if mode == "hang":
            self.release.wait(40)
        for o in objects:
            spec = o.get("spec") or {}
            if spec.get("host") == "fail-me" or spec.get("hostPort", "").startswith("fail-me"):
                response["result"] = {"status": "Failure", "message": "cannot convert fail-me"}
                break
        converted = [self.convert(o, desired) for o in objects]
        if mode == "rename":
            for o in converted:
                o["metadata"]["name"] = "renamed"
        elif mode == "labels":
            for o in converted:
                o["metadata"].setdefault("labels", {})["converted"] = "yes"
                o["metadata"]["uid"] = o["metadata"].get("uid")  # unchanged
                o["metadata"]["generation"] = 99  # not the webhook's to change: restored
        elif mode == "short":
            converted = converted[1:]
        if response["result"]["status"] == "Success":
            response["convertedObjects"] = converted
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": response}


def definition(converter):
    def version(name, storage, props):
        return {"name": name, "served": True, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": props}}}},
                "additionalPrinterColumns": [{"name": "Spec", "type": "string",
                                              "jsonPath": ".spec"}]}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                               "listKind": "WidgetList"},
                     "versions": [version("v1", True, {"hostPort": {"type": "string"}}),
                                  version("v2", False, {"host": {"type": "string"},
                                                        "port": {"type": "integer"}})],
                     "conversion": {"strategy": "Webhook", "webhook": {
                         "conversionReviewVersions": ["v1"],
                         "clientConfig": {"url": converter.url("/convert"),
                                          "caBundle": converter.ca_bundle()}}}}}


def widget(version, name, **spec):
    return json.dumps({"apiVersion": f"{GROUP}/{version}", "kind": "Widget",
                       "metadata": {"name": name, "namespace": NS}, "spec": spec})


def get_json(kc, version, name=None):
    args = ["get", f"widgets.{version}.{GROUP}", "-n", NS, "-o", "json"]
    if name:
        args.insert(2, name)
    code, out = kc(*args)
    if code != 0:
        return None, out
    try:
        return json.loads(out), out
    except ValueError:
        return None, out


def checks_of(t, server, tmp, conv):
    kc = kubectl_runner(server, tmp)
    if kc is None:
        print("kubectl is not installed: skipping")
        sys.exit(77)
    kc("create", "namespace", NS)
    code, out = kc("apply", "-f", "-", stdin=json.dumps(definition(conv)))
    t.check("a definition converting through a webhook is accepted", code == 0, out)
    code, out = kc("wait", "--for=condition=established", "--timeout=20s",
                   f"crd/widgets.{GROUP}")
    t.check("... and established", code == 0, out)

    # Writes through v2 are stored as v1; reads answer in the version asked for.
    code, out = wait_for(lambda: (lambda r: r[0] == 0 and r)(
        kc("apply", "-f", "-", stdin=widget("v2", "alpha", host="a.example", port=80))),
        timeout=10, what="a v2 create") or (1, "no answer")
    t.check("kubectl apply of a v2 object succeeds", code == 0, out)
    stored_as_v1 = [r for p, r, _ in conv.reviews if r["desiredAPIVersion"] == f"{GROUP}/v1"]
    t.check("the write sent the object to be converted to the storage version v1",
            any(o["metadata"]["name"] == "alpha" for r in stored_as_v1 for o in r["objects"]),
            stored_as_v1[-1:] if stored_as_v1 else "none")
    v1, out = get_json(kc, "v1", "alpha")
    t.check("read as v1: hostPort", v1 is not None and v1["apiVersion"] == f"{GROUP}/v1"
            and v1["spec"] == {"hostPort": "a.example:80"}, out[-500:])
    v2, out = get_json(kc, "v2", "alpha")
    t.check("read as v2: host and port", v2 is not None and v2["apiVersion"] == f"{GROUP}/v2"
            and v2["spec"] == {"host": "a.example", "port": 80}, out[-500:])

    for i in range(3):
        kc("apply", "-f", "-", stdin=widget("v1", f"w{i}", hostPort=f"h{i}:{8000 + i}"))

    def cache_has_converted(name):
        with conv.lock:
            return any(o["metadata"]["name"] == name for _, r, _ in conv.reviews
                       if r.get("desiredAPIVersion") == f"{GROUP}/v2" for o in r["objects"])
    # The v2 watch cache converts each event as it comes: counted from once it has the last
    # write, so that its conversion is not taken for the list's.
    wait_for(lambda: cache_has_converted("w2"), timeout=10, what="the v2 cache has w2")
    before = conv.count()
    listed, out = get_json(kc, "v2")
    items = {o["metadata"]["name"]: o for o in (listed or {}).get("items", [])}
    t.check("a v2 list holds every object converted", listed is not None and len(items) == 4
            and items.get("w2", {}).get("spec") == {"host": "h2", "port": 8002}
            and all(o["apiVersion"] == f"{GROUP}/v2" for o in items.values()), out[-800:])
    # From the v2 watch cache (converted as events came), or, when storage answers the
    # consistent read (an etcd whose progress notifications do not prove it), in one review.
    list_reviews = [r for _, r, _ in conv.reviews[before:]]
    t.check("... converted ahead in the v2 watch cache, or in one review for the whole list",
            len(list_reviews) == 0 or (len(list_reviews) == 1
                                       and len(list_reviews[0]["objects"]) == 4),
            [len(r["objects"]) for r in list_reviews])
    code, out = kc("get", f"widgets.v2.{GROUP}", "-n", NS)
    t.check("kubectl get prints the v2 table", code == 0 and "w1" in out and "h1" in out, out)

    # The Python client reads v2 as well.
    try:
        from kubernetes import client, config
        config.load_kube_config(config_file=server.kubeconfig(tmp))
        api = client.CustomObjectsApi()
        got = api.get_namespaced_custom_object(GROUP, "v2", NS, "widgets", "w0")
        t.check("the Python client gets v2", got["spec"] == {"host": "h0", "port": 8000}, got)
        lst = api.list_namespaced_custom_object(GROUP, "v2", NS, "widgets")
        t.check("the Python client lists v2", len(lst["items"]) == 4, lst)
    except ImportError:
        print("python3-kubernetes is not installed: the Python client checks are skipped")

    # Watches of v2: three watchers, five changes; each event converted once for all of them.
    _, raw = server.request("GET", f"/apis/{GROUP}/v2/namespaces/{NS}/widgets")
    rv = raw["metadata"]["resourceVersion"] if isinstance(raw, dict) else "0"
    path = f"/apis/{GROUP}/v2/namespaces/{NS}/widgets?watch=1&resourceVersion={rv}"
    watchers = [WatchStream(server, path) for _ in range(3)]
    since = conv.count()
    for i in range(5):
        kc("patch", f"widgets.v1.{GROUP}", "w0", "-n", NS, "--type=merge",
           "-p", json.dumps({"spec": {"hostPort": f"h0:{9000 + i}"}}))
    seen = [w.take(5, timeout=10, skip_bookmarks=True) for w in watchers]
    ports = [[e["object"]["spec"].get("port") for e in s] for s in seen]
    t.check("every v2 watcher sees the five changes in v2",
            all(p == [9000, 9001, 9002, 9003, 9004] for p in ports)
            and all(e["object"]["apiVersion"] == f"{GROUP}/v2" for s in seen for e in s), ports)
    n = conv.converted(f"{GROUP}/v2", since)
    t.check("the five events were converted once each for the three watchers (5 objects, not "
            "15)", n == 5, n)

    # Client-side and server-side apply through v2.
    code, out = kc("apply", "-f", "-", stdin=widget("v2", "alpha", host="a.example", port=81))
    v1, _ = get_json(kc, "v1", "alpha")
    t.check("kubectl apply (client side) of a changed v2 object updates the stored v1",
            code == 0 and v1 is not None and v1["spec"] == {"hostPort": "a.example:81"}, out)
    code, out = kc("apply", "--server-side", "-f", "-",
                   stdin=widget("v2", "beta", host="b.example", port=443))
    code2, out2 = kc("apply", "--server-side", "-f", "-",
                     stdin=widget("v2", "beta", host="b.example", port=8443))
    v1, _ = get_json(kc, "v1", "beta")
    t.check("kubectl apply --server-side through v2 creates and updates",
            code == 0 and code2 == 0 and v1 is not None
            and v1["spec"] == {"hostPort": "b.example:8443"}, out + out2)
    watched = [w.take(2, timeout=10, skip_bookmarks=True) for w in watchers]
    t.check("... and the v2 watchers see those writes in v2",
            all([e["object"]["spec"].get("port") for e in s] == [81, 443] for s in watched),
            [[e["object"]["spec"] for e in s] for s in watched])

    # Labels and annotations are the webhook's to change; other metadata is restored.
    conv.mode = "labels"
    v2, out = get_json(kc, "v2", "alpha")
    t.check("a webhook's label is kept, its change of metadata.generation is not",
            v2 is not None and v2["metadata"].get("labels", {}).get("converted") == "yes"
            and v2["metadata"].get("generation") != 99, out[-600:])
    conv.mode = "rename"
    code, out = kc("apply", "-f", "-", stdin=widget("v2", "gamma", host="g", port=1))
    t.check("a webhook that renames the object fails the write with kube's words",
            code != 0 and "conversion webhook for conv.example.com/v2, Kind=Widget returned "
            "invalid object: must have the same name: gamma != renamed" in out, out)
    conv.mode = "short"
    code, out = kc("apply", "-f", "-", stdin=widget("v2", "gamma", host="g", port=1))
    t.check("a webhook that answers too few objects fails the write",
            code != 0 and "returned 0 objects, expected 1" in out, out)
    conv.mode = "normal"

    # An object the webhook cannot convert: 500 naming the webhook, for v2 only.
    code, out = kc("apply", "-f", "-", stdin=widget("v1", "bad", hostPort="fail-me:1"))
    t.check("a v1 object the webhook cannot convert is written through v1", code == 0, out)
    code, out = kc("get", f"widgets.v2.{GROUP}", "bad", "-n", NS)
    t.check("reading it as v2 is a 500 naming the webhook and its message",
            code != 0 and "InternalError" in out and "conversion webhook for "
            "conv.example.com/v1, Kind=Widget failed: cannot convert fail-me" in out, out)
    code, out = kc("get", f"widgets.v2.{GROUP}", "-n", NS)
    t.check("listing v2 is a 500 naming the list's kind",
            code != 0 and "conversion webhook for conv.example.com/v1, Kind=WidgetList failed: "
            "cannot convert fail-me" in out, out)
    code, out = kc("get", f"widgets.v1.{GROUP}", "-n", NS)
    t.check("v1 lists go on", code == 0 and "bad" in out and "alpha" in out, out)
    status, _ = server.request("GET", "/readyz")
    t.check("the server stays ready", status == 200, status)
    kc("delete", f"widgets.v1.{GROUP}", "bad", "-n", NS)
    got = wait_for(lambda: (lambda r: r[0] == 0 and r)(kc("get", f"widgets.v2.{GROUP}", "-n", NS)),
                   timeout=15, what="v2 list after the bad object went")
    t.check("once the object is gone, v2 lists again", bool(got), got)
    refusals = []

    def watch_opens():
        # The v2 cache re-lists after its back-off; until then a watch is refused (429).
        s = WatchStream(server, f"/apis/{GROUP}/v2/namespaces/{NS}/widgets?watch=1")
        if s.status == 200:
            return s
        refusals.append((s.status, s.body))
        s.close()
        return None
    w = wait_for(watch_opens, timeout=15, what="a v2 watch")
    first = w.take(5, timeout=10, skip_bookmarks=True) if w else []
    t.check("... and v2 watches start again (initial events in v2)",
            len(first) == 5 and all(e["object"]["apiVersion"] == f"{GROUP}/v2" for e in first),
            ([e.get("type") for e in first], refusals[:1]))
    t.check("... after 429s while its cache re-listed",
            all(code == 429 for code, _ in refusals), refusals[:2])

    # The webhook down: 500 for v2 writes, v1 undisturbed, then recovery.
    conv_port = conv.port
    conv.stop()
    code, out = kc("apply", "-f", "-", stdin=widget("v2", "delta", host="d", port=4))
    t.check("with the webhook down, a v2 write is a 500 naming the webhook and its URL",
            code != 0 and "conversion webhook for conv.example.com/v2, Kind=Widget failed: Post "
            f"\"https://127.0.0.1:{conv_port}/convert?timeout=30s\"" in out, out)
    code, out = kc("apply", "-f", "-", stdin=widget("v1", "epsilon", hostPort="e:5"))
    t.check("... while v1 writes succeed", code == 0, out)
    ev = w.take(1, timeout=3, skip_bookmarks=True)
    t.check("... and the v2 watcher does not see the v1 write unconverted",
            all(e["object"]["apiVersion"] == f"{GROUP}/v2" for e in ev if e.get("type") != "ERROR"),
            ev)
    ok = server.metric("apiserver_crd_conversion_webhook_duration_seconds_count",
                       crd_name=f"widgets.{GROUP}", from_version="v1", to_version="v2",
                       succeeded="true")
    failed = server.metric("apiserver_conversion_webhook_request_total", result="failure",
                           failure_type="conversion_webhook_call_failure")
    partial = server.metric("apiserver_conversion_webhook_request_total", result="failure",
                            failure_type="conversion_webhook_partial_response_failure")
    t.check("kube's conversion webhook metrics count the calls and the failures by type",
            (ok or 0) > 0 and (failed or 0) > 0 and (partial or 0) > 0, (ok, failed, partial))
    conv.restart()
    got = wait_for(lambda: (lambda r: r[0] == 0 and r)(
        kc("apply", "-f", "-", stdin=widget("v2", "delta", host="d", port=4))),
        timeout=15, what="a v2 write after the webhook came back")
    t.check("the webhook back, v2 writes succeed again", bool(got), got)
    ws = wait_for(watch_opens, timeout=15, what="a v2 watch after the webhook came back")
    seen = ws.events_until(lambda evs: {"delta", "epsilon"} <= {
        e["object"]["metadata"]["name"] for e in evs if e.get("type") != "BOOKMARK"},
        timeout=10) if ws else []
    t.check("... and v2 watches see what was written meanwhile, in v2",
            {"delta", "epsilon"} <= {e["object"]["metadata"]["name"] for e in seen}
            and all(e["object"]["apiVersion"] == f"{GROUP}/v2" for e in seen),
            [e.get("type") for e in seen])
    for x in watchers + [w] + ([ws] if ws else []):
        x.close()
    check_equivalent_admission(t, server, tmp, conv, kc)


def check_equivalent_admission(t, server, tmp, conv, kc):
    """An admission webhook whose rules name v1 only (matchPolicy Equivalent) sees a write made
    through v2 as v1 serves it: converted by the definition's webhook, as kube converts it."""
    seen = []

    def answer(path, review):
        if path not in ("/validate", "/mutate"):
            return previous(path, review)
        request = review["request"]
        response = {"uid": request["uid"], "allowed": True}
        if path == "/mutate":
            patch = [{"op": "replace", "path": "/spec/hostPort", "value": "patched:1"}]
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        else:
            with conv.lock:
                seen.append(request)
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": response}
    previous = conv._answer
    conv._answer = answer
    config = {"apiVersion": "admissionregistration.k8s.io/v1",
              "kind": "ValidatingWebhookConfiguration",
              "metadata": {"name": "widgets-v1-only"},
              "webhooks": [{"name": "v1.widgets.conv.example.com",
                            "admissionReviewVersions": ["v1"], "sideEffects": "None",
                            "matchPolicy": "Equivalent",
                            "rules": [{"apiGroups": [GROUP], "apiVersions": ["v1"],
                                       "resources": ["widgets"],
                                       "operations": ["CREATE"]}],
                            "clientConfig": {"url": conv.url("/validate"),
                                             "caBundle": conv.ca_bundle()}}]}
    code, out = kc("apply", "-f", "-", stdin=json.dumps(config))
    t.check("a ValidatingWebhookConfiguration for widgets v1 only is created", code == 0, out)
    # In force within a second; a create before then is not judged.
    made = wait_for(lambda: kc("create", "-f", "-", stdin=widget(
        "v2", f"equiv-{len(seen)}-{time.monotonic_ns()}", host="db", port=5432))[0] == 0 and seen,
        timeout=10, what="the webhook called")
    request = seen[-1] if seen else {}
    obj = request.get("object", {})
    t.check("a create through v2 reaches the v1-only webhook as v1 serves it: converted by the "
            "definition's webhook (spec.hostPort), its kind and resource v1's",
            bool(made) and obj.get("apiVersion") == f"{GROUP}/v1" and
            obj.get("spec") == {"hostPort": "db:5432"} and
            request.get("kind", {}).get("version") == "v1" and
            request.get("requestKind", {}).get("version") == "v2", request)
    kc("delete", "validatingwebhookconfiguration", "widgets-v1-only")

    # A mutating webhook for v1 only: its JSONPatch applies to the v1 form, and the result is
    # converted back to v2 through the conversion webhook.
    mutating = json.loads(json.dumps(config))
    mutating["kind"] = "MutatingWebhookConfiguration"
    mutating["metadata"]["name"] = "widgets-v1-mutator"
    mutating["webhooks"][0]["name"] = "m.widgets.conv.example.com"
    mutating["webhooks"][0]["clientConfig"]["url"] = conv.url("/mutate")
    code, out = kc("apply", "-f", "-", stdin=json.dumps(mutating))
    t.check("a MutatingWebhookConfiguration for widgets v1 only is created", code == 0, out)

    def made_mutated():
        name = f"mutated-{time.monotonic_ns()}"
        code, out = kc("create", "-f", "-", "-o", "json",
                       stdin=widget("v2", name, host="db", port=5432))
        return code == 0 and json.loads(out).get("spec", {}).get("host") == "patched" and \
            json.loads(out)
    created = wait_for(made_mutated, timeout=10, what="the mutating webhook in force")
    t.check("a create through v2 is patched as v1 (spec.hostPort) and answered in v2 "
            "(host, port), converted both ways by the definition's webhook",
            bool(created) and created.get("apiVersion") == f"{GROUP}/v2" and
            created.get("spec") == {"host": "patched", "port": 1}, created)
    kc("delete", "mutatingwebhookconfiguration", "widgets-v1-mutator")
    conv._answer = previous

    # A ValidatingAdmissionPolicy for v1 only judges a v2 write as v1 (Equivalent by default).
    policy = {"apiVersion": "admissionregistration.k8s.io/v1",
              "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "widgets-v1-policy"},
              "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [
                  {"apiGroups": [GROUP], "apiVersions": ["v1"], "resources": ["widgets"],
                   "operations": ["CREATE"]}]},
                       "validations": [{"expression": "object.spec.hostPort != 'db:1'",
                                        "message": "hostPort db:1 is taken"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1",
               "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": "widgets-v1-policy"},
               "spec": {"policyName": "widgets-v1-policy", "validationActions": ["Deny"]}}
    for obj in (policy, binding):
        code, out = kc("apply", "-f", "-", stdin=json.dumps(obj))
        t.check(f"the {obj['kind']} for widgets v1 is created", code == 0, out)

    def refused():
        code, out = kc("create", "-f", "-", stdin=widget("v2", f"taken-{time.monotonic_ns()}",
                                                          host="db", port=1))
        return code != 0 and out
    out = wait_for(refused, timeout=10, what="the policy in force")
    t.check("a v1-only ValidatingAdmissionPolicy judges a v2 create as v1 (spec.hostPort "
            "from the conversion webhook) and denies it in its own words",
            bool(out) and "hostPort db:1 is taken" in out, out)
    code, out = kc("create", "-f", "-", stdin=widget("v2", "free", host="db", port=2))
    t.check("... and admits one it allows", code == 0, out)
    kc("delete", "validatingadmissionpolicybinding", "widgets-v1-policy")
    kc("delete", "validatingadmissionpolicy", "widgets-v1-policy")

    # A MutatingAdmissionPolicy for v1 only mutates a v2 write as v1, converted back after.
    mutating_policy = {
        "apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "widgets-v1-mutating"},
        "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
                 "matchConstraints": {"resourceRules": [
                     {"apiGroups": [GROUP], "apiVersions": ["v1"], "resources": ["widgets"],
                      "operations": ["CREATE"]}]},
                 "matchConditions": [{"name": "mapped",
                                      "expression": "object.spec.hostPort.startsWith('map')"}],
                 "mutations": [{"patchType": "JSONPatch", "jsonPatch": {
                     "expression": "[JSONPatch{op: 'replace', path: '/spec/hostPort', "
                                   "value: 'mapped:' + object.spec.hostPort.split(':')[1]}]"}}]}}
    mutating_binding = {
        "apiVersion": "admissionregistration.k8s.io/v1beta1",
        "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "widgets-v1-mutating"},
        "spec": {"policyName": "widgets-v1-mutating"}}
    for obj in (mutating_policy, mutating_binding):
        code, out = kc("apply", "-f", "-", stdin=json.dumps(obj))
        t.check(f"the {obj['kind']} for widgets v1 is created", code == 0, out)

    def mapped():
        code, out = kc("create", "-f", "-", "-o", "json",
                       stdin=widget("v2", f"map-{time.monotonic_ns()}", host="map", port=7))
        return code == 0 and json.loads(out).get("spec", {}).get("host") == "mapped" and \
            json.loads(out)
    created = wait_for(mapped, timeout=10, what="the mutating policy in force")
    t.check("a v1-only MutatingAdmissionPolicy sees a v2 create as v1 (its condition and patch "
            "read spec.hostPort) and the result is answered in v2",
            bool(created) and created.get("spec") == {"host": "mapped", "port": 7}, created)
    kc("delete", "mutatingadmissionpolicybinding", "widgets-v1-mutating")
    kc("delete", "mutatingadmissionpolicy", "widgets-v1-mutating")


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        conv = Converter(tmp)
        server = Server(binary).start()
        try:
            checks_of(t, server, tmp, conv)
            t.check("server alive", server.alive())
        finally:
            server.stop()
            conv.stop()
    t.finish()


if __name__ == "__main__":
    main()
