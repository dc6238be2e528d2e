"""Admission webhooks as an operator installs them: a webhook server the test runs (HTTPS with
its own CA, trusted through caBundle) registered with kubectl in a ValidatingWebhookConfiguration
and a MutatingWebhookConfiguration. Writes refused with the webhook's message, warnings shown by
kubectl, a label added by a mutating webhook (in the response and in what is stored and watched),
reinvocation, namespace selectors and match conditions, dry run, a hanging webhook under both
failure policies (the health check answering meanwhile), an answer that is no AdmissionReview,
and a broken configuration that cannot lock out its own deletion. The Python client sees a
refusal as a Status.

Usage: admission_webhook_test.py <path to kwatch-apiserver>
"""
import base64
import json
import os
import sys
import threading
import time

from harness import BackgroundWrites, Checks, Server, TempDir, kubectl_runner, wait_for
from pki import CA
from webhook_server import WebhookServer


class Webhooks(WebhookServer):
    """A WebhookServer answering AdmissionReviews by path."""

    def __init__(self, directory):
        self.barrier = {}  # object name -> calls arrived at /barrier (parallel calls meet there)
        super().__init__(directory, self.answer)
        self.arrived = threading.Condition(self.lock)

    def sent(self, path, name=None):
        with self.lock:
            return [r for p, r, _ in self.reviews
                    if p == path and (name is None or (r.get("name") == name))]

    @staticmethod
    def response(review, allowed=True, **extra):
        r = {"uid": review["request"]["uid"], "allowed": allowed}
        r.update(extra)
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": r}

    def answer(self, path, review):
        request = review["request"]
        obj = request.get("object") or {}
        if path == "/validate":
            if "forbidden" in (obj.get("data") or {}):
                return self.response(review, False, status={"message": "data.forbidden is not allowed"},
                                     warnings=["configmap refused"])
            return self.response(review, True, warnings=["configmap looks fine"],
                                 auditAnnotations={"checked": "yes"})
        if path in ("/label", "/label-again"):
            labels = (obj.get("metadata") or {}).get("labels")
            key = "mutated-by-webhook" if path == "/label" else "second-label"
            if labels and labels.get(key) == "yes":
                return self.response(review, True)
            ops = ([{"op": "add", "path": f"/metadata/labels/{key}", "value": "yes"}] if labels
                   else [{"op": "add", "path": "/metadata/labels", "value": {key: "yes"}}])
            patch = base64.b64encode(json.dumps(ops).encode()).decode()
            return self.response(review, True, patch=patch, patchType="JSONPatch")
        if path == "/barrier":
            # Answers only once a second call for the same object has arrived: two webhooks
            # called one after the other never both get here in time.
            name = (obj.get("metadata") or {}).get("name")
            with self.arrived:
                self.barrier[name] = self.barrier.get(name, 0) + 1
                self.arrived.notify_all()
                met = self.arrived.wait_for(lambda: self.barrier[name] >= 2, timeout=5)
            if met:
                return self.response(review, True)
            return self.response(review, False, status={"message": "the calls were not parallel"})
        if path == "/observe":
            return self.response(review, True)
        if path in ("/hang", "/hang-long"):
            self.release.wait(30)
            return self.response(review, True)
        if path == "/huge":
            return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                               "response": {"uid": request["uid"], "allowed": True,
                                            "warnings": ["x" * (10 << 20)]}}).encode()
        if path in ("/deep40", "/deep150"):
            # A patch whose value nests 40 levels (read as any object is) or 150 (past kwatch's
            # depth limit for every document it reads).
            value = "x"
            for _ in range(40 if path == "/deep40" else 150):
                value = {"a": value}
            ops = [{"op": "add", "path": "/data", "value": value}]
            return self.response(review, True, patchType="JSONPatch",
                                 patch=base64.b64encode(json.dumps(ops).encode()).decode())
        if path in ("/break", "/unappliable"):
            ops = ([{"op": "add", "path": "/data", "value": 5}] if path == "/break"
                   else [{"op": "replace", "path": "/nothing/here", "value": 1}])
            return self.response(review, True, patchType="JSONPatch",
                                 patch=base64.b64encode(json.dumps(ops).encode()).decode())
        if path == "/hijack":
            # A hostile mutating webhook: moves the object to another namespace, or forges its
            # uid and creation time.
            move = (obj.get("metadata") or {}).get("name", "").startswith("move")
            ops = ([{"op": "replace", "path": "/metadata/namespace", "value": "plain"}] if move
                   else [{"op": "add", "path": "/metadata/uid", "value": "forged-uid"},
                         {"op": "add", "path": "/metadata/creationTimestamp",
                          "value": "2001-01-01T00:00:00Z"}])
            return self.response(review, True, patchType="JSONPatch",
                                 patch=base64.b64encode(json.dumps(ops).encode()).decode())
        if path == "/garbage":
            return b"this is not an AdmissionReview"
        if path == "/wrong-uid":
            return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": "not-the-one", "allowed": True}}
        return self.response(review, True)



def metric(server, metric_name, **labels):
    """The sum of `metric_name`'s samples with these labels (a label may be `name`)."""
    values = [v for n, lbl, v in server.metrics()
              if n == metric_name and all(lbl.get(k) == str(want) for k, want in labels.items())]
    return sum(values) if values else None


def configuration(kind, name, webhooks):
    return json.dumps({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                       "metadata": {"name": name}, "webhooks": webhooks})


def webhook(hooks, name, path, resources=("configmaps",), operations=("CREATE", "UPDATE"),
            **extra):
    w = {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
         "clientConfig": {"url": hooks.url(path), "caBundle": hooks.ca_bundle()},
         "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": list(operations),
                    "resources": list(resources)}],
         "namespaceSelector": {"matchLabels": {"webhooks": "on"}}}
    w.update(extra)
    return w


def configmap(name, data=None, ns="hooked"):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": ns}, "data": data or {}})


def checks_of(t, server, tmp, hooks):
    kc = kubectl_runner(server, tmp)
    if kc is None:
        print("kubectl is not installed: skipping")
        sys.exit(77)
    kc("create", "namespace", "hooked")
    kc("label", "namespace", "hooked", "webhooks=on")
    kc("create", "namespace", "plain")

    # ---- validating ----
    code, out = kc("apply", "-f", "-", stdin=configuration(
        "ValidatingWebhookConfiguration", "deny-forbidden",
        [webhook(hooks, "deny.example.com", "/validate")]))
    t.check("a validating webhook configuration applies", code == 0, out)
    n = [0]

    def refused():
        n[0] += 1
        code, out = kc("apply", "-f", "-", stdin=configmap(f"bad-{n[0]}", {"forbidden": "x"}))
        return code != 0 and "denied the request" in out and out
    out = wait_for(refused, timeout=10, what="the webhook in force")
    t.check("a write the webhook refuses is refused with its message",
            'admission webhook "deny.example.com" denied the request: data.forbidden is not allowed'
            in (out or ""), out)
    t.check("... and the warning it sent is shown", "Warning: configmap refused" in (out or ""), out)
    code, out = kc("create", "configmap", "good", "-n", "hooked", "--from-literal=a=b")
    t.check("a write the webhook allows is stored, its warning shown",
            code == 0 and "Warning: configmap looks fine" in out, out)
    sent = hooks.sent("/validate", "good")
    t.check("the webhook was sent an AdmissionReview v1 of the write",
            len(sent) == 1 and sent[0]["operation"] == "CREATE" and
            sent[0]["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"} and
            sent[0]["resource"] == {"group": "", "version": "v1", "resource": "configmaps"} and
            sent[0]["namespace"] == "hooked" and sent[0]["object"]["data"] == {"a": "b"} and
            sent[0]["oldObject"] is None and sent[0]["dryRun"] is False and
            sent[0]["options"]["kind"] == "CreateOptions" and len(sent[0]["uid"]) == 36,
            json.dumps(sent)[:600])
    calls = [q for p, _, q in hooks.reviews if p == "/validate"]
    t.check("the call carries ?timeout=10s", all(q.endswith("?timeout=10s") for q in calls), calls[:3])
    code, out = kc("create", "configmap", "free", "-n", "plain", "--from-literal=forbidden=x")
    t.check("a namespace the selector does not match is not sent to the webhook",
            code == 0 and not hooks.sent("/validate", "free"), out)
    code, out = kc("create", "configmap", "dry", "-n", "hooked", "--from-literal=a=b",
                   "--dry-run=server")
    dry = hooks.sent("/validate", "dry")
    t.check("a dry run is sent with dryRun: true (sideEffects None)",
            code == 0 and len(dry) == 1 and dry[0]["dryRun"] is True, out)
    t.check("the refusals and calls are counted as kube counts them",
            (metric(server, "apiserver_admission_webhook_rejection_count", name="deny.example.com",
                           type="validating", operation="CREATE", error_type="no_error",
                           rejection_code="400") or 0) >= 1 and
            (metric(server, "apiserver_admission_webhook_request_total", name="deny.example.com",
                           type="validating", operation="CREATE", code="200",
                           rejected="false") or 0) >= 1 and
            (metric(server, "apiserver_admission_webhook_admission_duration_seconds_count",
                           name="deny.example.com", type="validating", operation="CREATE",
                           rejected="true") or 0) >= 1)
    # The Python client sees the refusal as a Status.
    try:
        from kubernetes import client as kclient, config as kconfig
        kconfig.load_kube_config(config_file=server.kubeconfig(tmp))
        api = kclient.CoreV1Api()
        try:
            api.create_namespaced_config_map("hooked", kclient.V1ConfigMap(
                metadata=kclient.V1ObjectMeta(name="py-bad"), data={"forbidden": "1"}))
            t.check("the Python client is refused", False, "created")
        except kclient.ApiException as e:
            body = json.loads(e.body)
            t.check("the Python client is refused with the webhook's Status (400)",
                    e.status == 400 and body.get("kind") == "Status" and
                    "data.forbidden is not allowed" in body.get("message", ""), e.body)
    except ImportError:
        print("python3-kubernetes is not installed: its check is skipped")

    # ---- mutating ----
    code, out = kc("apply", "-f", "-", stdin=configuration(
        "MutatingWebhookConfiguration", "b-label",
        [webhook(hooks, "label.example.com", "/label")]))
    t.check("a mutating webhook configuration applies", code == 0, out)

    def labelled():
        n[0] += 1
        code, out = kc("create", "configmap", f"m-{n[0]}", "-n", "hooked", "-o", "json")
        return code == 0 and '"mutated-by-webhook": "yes"' in out and (f"m-{n[0]}", out)
    got = wait_for(labelled, timeout=10, what="the mutating webhook in force")
    t.check("a mutating webhook's label is in the create's response", bool(got))
    if got:
        code, out = kc("get", "configmap", got[0], "-n", "hooked", "-o",
                       "jsonpath={.metadata.labels.mutated-by-webhook}")
        t.check("... and in what is stored", out.strip() == "yes", out)

    # Reinvocation: an IfNeeded webhook that ran before a later change is called once more.
    code, out = kc("apply", "-f", "-", stdin=configuration(
        "MutatingWebhookConfiguration", "a-observe",
        [webhook(hooks, "observe.example.com", "/observe", reinvocationPolicy="IfNeeded")]))
    t.check("an IfNeeded webhook applies", code == 0, out)

    def observed_twice():
        n[0] += 1
        name = f"r-{n[0]}"
        kc("create", "configmap", name, "-n", "hooked")
        seen = hooks.sent("/observe", name)
        return len(seen) == 2 and seen
    seen = wait_for(observed_twice, timeout=10, what="reinvocation")
    t.check("a webhook with reinvocationPolicy IfNeeded is called again after a later change",
            bool(seen) and "mutated-by-webhook" not in (seen[0]["object"]["metadata"].get("labels") or {})
            and seen[1]["object"]["metadata"]["labels"].get("mutated-by-webhook") == "yes",
            json.dumps(seen)[:400] if seen else "")
    kc("delete", "mutatingwebhookconfiguration", "a-observe")

    # Match conditions: a condition that is false skips the webhook.
    code, out = kc("apply", "-f", "-", stdin=configuration(
        "ValidatingWebhookConfiguration", "deny-forbidden",
        [webhook(hooks, "deny.example.com", "/validate", matchConditions=[
            {"name": "not-exempt", "expression": "object.metadata.name != 'exempt'"}])]))
    t.check("a match condition applies", code == 0, out)

    def exempt_passes():
        kc("delete", "configmap", "exempt", "-n", "hooked", "--ignore-not-found")
        code, out = kc("create", "configmap", "exempt", "-n", "hooked",
                       "--from-literal=forbidden=x")
        return code == 0
    t.check("a write whose match condition is false is not sent",
            wait_for(exempt_passes, timeout=10, what="match condition") and
            not hooks.sent("/validate", "exempt"))
    code, out = kc("create", "configmap", "not-exempt", "-n", "hooked", "--from-literal=forbidden=x")
    t.check("... and one whose condition holds still is", code != 0 and "denied" in out, out)
    kc("delete", "mutatingwebhookconfiguration", "b-label")
    kc("delete", "validatingwebhookconfiguration", "deny-forbidden")

    # A configuration takes effect within a second of its change while writes go on.
    writes = BackgroundWrites(server, "/api/v1/namespaces/hooked/configmaps",
                              lambda prefix, i: {"metadata": {"name": f"l{prefix}{i}"},
                                                 "data": {"a": "b"}})
    with writes:
        began = time.monotonic()
        code, out = kc("apply", "-f", "-", stdin=configuration(
            "ValidatingWebhookConfiguration", "late",
            [webhook(hooks, "late.example.com", "/validate")]))
        t.check("a webhook configuration is applied while writes go on", code == 0, out)

        def refusing():
            n[0] += 1
            status, _ = server.request("POST", "/api/v1/namespaces/hooked/configmaps",
                                       {"metadata": {"name": f"late-{n[0]}"},
                                        "data": {"forbidden": "x"}})
            return status == 400
        wait_for(refusing, 5, "the late webhook to take effect")
        took = time.monotonic() - began
    results = writes.statuses
    print(f"the webhook took effect after {took * 1000:.0f} ms; {len(results)} writes meanwhile")
    t.check("the configuration takes effect within a second of the change", took < 1.0,
            f"{took:.2f} s")
    t.check("the writes meanwhile all succeed", results and all(r == 201 for r in results),
            str(sorted(set(results))))
    kc("delete", "validatingwebhookconfiguration", "late")

    # Object selector: only objects with the label are sent.
    code, out = kc("apply", "-f", "-", stdin=configuration(
        "ValidatingWebhookConfiguration", "selected",
        [webhook(hooks, "selected.example.com", "/validate",
                 objectSelector={"matchLabels": {"checked": "yes"}})]))
    t.check("a webhook with an object selector applies", code == 0, out)

    def selected_refused():
        n[0] += 1
        code, out = kc("apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"sel-{n[0]}", "namespace": "hooked", "labels": {"checked": "yes"}},
            "data": {"forbidden": "x"}}))
        return code != 0 and "denied" in out
    t.check("an object the selector matches is sent",
            bool(wait_for(selected_refused, timeout=10, what="object selector")))
    code, out = kc("create", "configmap", "unlabelled", "-n", "hooked", "--from-literal=forbidden=x")
    t.check("... one it does not match is not", code == 0 and not hooks.sent("/validate", "unlabelled"),
            out)
    kc("delete", "validatingwebhookconfiguration", "selected")

    # Validating webhooks are called in parallel: two that each answer only once the other's
    # call has arrived let the write through.
    code, out = kc("apply", "-f", "-", stdin=configuration(
        "ValidatingWebhookConfiguration", "parallel",
        [webhook(hooks, "one.example.com", "/barrier"), webhook(hooks, "two.example.com", "/barrier")]))

    def met():
        n[0] += 1
        name = f"par-{n[0]}"
        code, out = kc("create", "configmap", name, "-n", "hooked")
        return len(hooks.sent("/barrier", name)) == 2 and (code, out)
    got = wait_for(met, timeout=20, what="both validating webhooks in force")
    t.check("validating webhooks are called in parallel", bool(got) and got[0] == 0, got)
    kc("delete", "validatingwebhookconfiguration", "parallel")

    # ---- failures ----
    check_failures(t, server, kc, hooks)


def check_failures(t, server, kc, hooks):
    def apply(policy, path, name="fail.example.com", timeout=1):
        return kc("apply", "-f", "-", stdin=configuration(
            "ValidatingWebhookConfiguration", "failing",
            [webhook(hooks, name, path, failurePolicy=policy, timeoutSeconds=timeout,
                     resources=("secrets",))]))
    code, out = apply("Fail", "/hang")
    t.check("a hanging webhook's configuration applies", code == 0, out)
    n = [0]

    def refused_with(marker):
        def attempt():
            n[0] += 1
            start = time.monotonic()
            code, out = kc("create", "secret", "generic", f"s-{n[0]}", "-n", "hooked")
            return code != 0 and marker in out and (out, time.monotonic() - start)
        return attempt
    got = wait_for(refused_with("context deadline exceeded"), timeout=15, what="hanging webhook")
    t.check("a webhook that hangs past timeoutSeconds refuses the write under Fail (500, kube's "
            "words)", bool(got) and 'failed calling webhook "fail.example.com": failed to call '
            'webhook: Post "' in got[0] and "Internal error" in got[0], got)
    t.check("... after its timeout, not much later", bool(got) and got[1] < 5, got)
    code, out = apply("Ignore", "/hang")
    got = wait_for(lambda: kc("create", "secret", "generic", f"ig-{time.monotonic_ns()}", "-n",
                              "hooked")[0] == 0, timeout=15, what="Ignore")
    t.check("under Ignore, a hanging webhook lets the write through after its timeout", bool(got))
    t.check("... counted as failed open",
            (metric(server, "apiserver_admission_webhook_fail_open_count", name="fail.example.com",
                           type="validating") or 0) >= 1)

    # While writes wait on a hanging webhook, the server answers everything else at once.
    apply("Fail", "/hang-long", timeout=10)
    # In force once a write reaches it (each probe waits on whichever webhook is in force).
    deadline = time.monotonic() + 15
    while not hooks.sent("/hang-long") and time.monotonic() < deadline:
        threading.Thread(target=lambda: server.request(
            "POST", "/api/v1/namespaces/hooked/secrets",
            {"metadata": {"name": f"probe-{time.monotonic_ns()}"}}), daemon=True).start()
        try:
            wait_for(lambda: hooks.sent("/hang-long"), timeout=1.5, what="the 10 s webhook")
        except AssertionError:
            pass
    before = len(hooks.sent("/hang-long"))
    waiting = []
    for i in range(100):
        th = threading.Thread(target=lambda i=i: server.request(
            "POST", "/api/v1/namespaces/hooked/secrets", {"metadata": {"name": f"wait-{i}"}}))
        th.start()
        waiting.append(th)
    arrived = wait_for(lambda: len(hooks.sent("/hang-long")) >= before + 100, timeout=10,
                       what="100 writes waiting on the webhook")
    worst = 0.0
    status = 0
    for _ in range(10):
        start = time.monotonic()
        status, _ = server.request("GET", "/healthz")
        worst = max(worst, time.monotonic() - start)
    t.check("the health check answers within 100 ms while 100 writes wait on a hanging webhook",
            bool(arrived) and status == 200 and worst < 0.1, f"{worst * 1000:.0f} ms")
    hooks.release.set()
    for th in waiting:
        th.join()
    hooks.release = threading.Event()
    code, out = apply("Fail", "/garbage", timeout=5)
    got = wait_for(refused_with("failed to call webhook"), timeout=10, what="garbage")
    t.check("an answer that is no AdmissionReview refuses the write under Fail", bool(got), got)
    code, out = apply("Fail", "/wrong-uid", timeout=5)
    got = wait_for(refused_with("expected response.uid"), timeout=10, what="wrong uid")
    t.check("an answer for another request refuses the write, in kube's words",
            bool(got) and 'received invalid webhook response: expected response.uid="' in got[0]
            and 'got "not-the-one"' in got[0], got)

    code, out = apply("Fail", "/huge", timeout=10)
    got = wait_for(refused_with("failed to call webhook"), timeout=15, what="huge answer")
    t.check("an answer of 10 MB refuses the write under Fail", bool(got), got)
    code, out = apply("Fail", "/redirect", timeout=5)
    got = wait_for(refused_with("307"), timeout=10, what="redirect")
    t.check("a redirect is not followed: the write is refused under Fail", bool(got), got)
    other = CA(os.path.dirname(hooks.ca.cert_file), "other-ca")
    with open(other.cert_file, "rb") as f:
        wrong_bundle = base64.b64encode(f.read()).decode()
    code, out = kc("apply", "-f", "-", stdin=configuration(
        "ValidatingWebhookConfiguration", "failing",
        [webhook(hooks, "fail.example.com", "/validate", resources=("secrets",),
                 timeoutSeconds=5, clientConfig={"url": hooks.url("/validate"),
                                                 "caBundle": wrong_bundle})]))
    got = wait_for(refused_with("certificate verify failed"), timeout=10, what="wrong CA")
    t.check("a webhook whose certificate the caBundle does not sign is not called: refused",
            bool(got) and "failed calling webhook" in got[0], got)
    kc("delete", "validatingwebhookconfiguration", "failing")

    # Patches that break the object or do not apply: clear errors, nothing stored.
    for path, what, words in (
            ("/break", "a patch that breaks the object's schema", "data in body must be of type object"),
            ("/unappliable", "a patch that does not apply",
             "Internal error occurred: replace operation does not apply"),
            # 40 levels are read as a patch (the schema then refuses the value); 150 are not.
            ("/deep40", "a patch nested 40 levels deep", "data.a in body must be of type string"),
            ("/deep150", "a patch nested past the depth limit",
             "received undecodable patch in webhook response")):
        kc("apply", "-f", "-", stdin=configuration(
            "MutatingWebhookConfiguration", "patching",
            [webhook(hooks, "patch.example.com", path)]))

        def broken(path=path):
            name = f"p-{time.monotonic_ns()}"
            code, out = kc("create", "configmap", name, "-n", "hooked")
            stored = kc("get", "configmap", name, "-n", "hooked")[0] == 0
            return hooks.sent(path, name) and (code, out, stored)
        got = wait_for(broken, timeout=10, what=what)
        t.check(what + " refuses the write with a clear error, nothing stored",
                bool(got) and got[0] != 0 and words in got[1] and not got[2], got)
    kc("delete", "mutatingwebhookconfiguration", "patching")

    # A mutating webhook cannot move an object to another namespace or forge what the server owns.
    kc("apply", "-f", "-", stdin=configuration(
        "MutatingWebhookConfiguration", "hijacking", [webhook(hooks, "hijack.example.com", "/hijack")]))

    def moved():
        name = f"move-{time.monotonic_ns()}"
        code, out = kc("create", "configmap", name, "-n", "hooked")
        return hooks.sent("/hijack", name) and (code, out, kc("get", "configmap", name, "-n", "plain")[0])
    got = wait_for(moved, timeout=10, what="the hijacking webhook")
    t.check("a webhook's patch that moves the object to another namespace refuses the write",
            bool(got) and got[0] != 0 and "does not match the namespace" in got[1] and got[2] != 0,
            got)
    name = f"forge-{time.monotonic_ns()}"
    code, out = kc("create", "configmap", name, "-n", "hooked", "-o", "json")
    stored = json.loads(out) if code == 0 else {}
    t.check("a webhook's patch cannot forge the uid or the creation time",
            code == 0 and stored["metadata"]["uid"] != "forged-uid" and
            not stored["metadata"]["creationTimestamp"].startswith("2001"), out[:300])
    kc("delete", "mutatingwebhookconfiguration", "hijacking")

    # A configuration matching everything with a dead webhook cannot lock out its own deletion.
    kc("delete", "validatingwebhookconfiguration", "failing")
    code, out = kc("apply", "-f", "-", stdin=configuration(
        "ValidatingWebhookConfiguration", "everything",
        [{"name": "dead.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
          "clientConfig": {"url": "https://127.0.0.1:1/dead"}, "timeoutSeconds": 1,
          "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"],
                     "resources": ["*/*"]}]}]))
    t.check("a configuration sending every write to a dead webhook applies", code == 0, out)
    got = wait_for(lambda: kc("create", "configmap", f"d-{time.monotonic_ns()}", "-n",
                              "plain")[0] != 0, timeout=10, what="dead webhook")
    t.check("... and every write is refused", bool(got))
    code, out = kc("delete", "validatingwebhookconfiguration", "everything")
    t.check("... except the deletion of the configuration itself", code == 0, out)
    got = wait_for(lambda: kc("create", "configmap", f"a-{time.monotonic_ns()}", "-n",
                              "plain")[0] == 0, timeout=10, what="webhook gone")
    t.check("writes go through again once it is gone", bool(got))


def check_service_routing(t, server, tmp, hooks, allowed):
    """A webhook named by a Service, whose Endpoints hold 127.0.0.1: refused by default (the
    loopback guard), called when the server runs with --unsafe-webhook-loopback-endpoints."""
    kc = kubectl_runner(server, tmp)
    kc("create", "namespace", "webhooks")
    kc("create", "namespace", "hooked")
    kc("label", "namespace", "hooked", "webhooks=on")
    kc("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook", "namespace": "webhooks"},
             "spec": {"ports": [{"name": "https", "port": 443, "targetPort": hooks.port}]}},
            {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "hook", "namespace": "webhooks"},
             "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                          "ports": [{"name": "https", "port": hooks.port}]}]}]}))
    hook = webhook(hooks, "deny.example.com", "/validate")
    hook["clientConfig"] = {"service": {"namespace": "webhooks", "name": "hook", "port": 443,
                                        "path": "/validate"}, "caBundle": hooks.ca_bundle()}
    code, out = kc("apply", "-f", "-", stdin=configuration(
        "ValidatingWebhookConfiguration", "by-service", [hook]))
    t.check("a webhook named by a Service applies", code == 0, out)
    n = [0]

    def answered(marker):
        def attempt():
            n[0] += 1
            code, out = kc("create", "configmap", f"svc-{n[0]}", "-n", "hooked",
                           "--from-literal=forbidden=x")
            return code != 0 and marker in out and out
        return attempt
    if allowed:
        got = wait_for(answered("data.forbidden is not allowed"), timeout=10, what="service routing")
        t.check("with --unsafe-webhook-loopback-endpoints, the Service's endpoint is called "
                "(TLS verified for hook.webhooks.svc)", bool(got), got)
    else:
        got = wait_for(answered("no endpoints available"), timeout=10, what="loopback guard")
        t.check("by default a Service whose endpoint is loopback is not called: the write is "
                "refused under Fail with the reason",
                bool(got) and 'failed calling webhook "deny.example.com": could not get REST '
                'client: no endpoints available for service "hook" (endpoint 127.0.0.1 may not '
                'be in the loopback range (127.0.0.0/8, ::1/128))' in got, got)
        # Nor the cloud metadata address a Service could name to reach the node's secrets:
        # kube's ValidateEndpointIP refuses it in the Endpoints themselves.
        code, out = kc("apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "hook", "namespace": "webhooks"},
            "subsets": [{"addresses": [{"ip": "169.254.169.254"}],
                         "ports": [{"name": "https", "port": 80}]}]}))
        t.check("... nor one in the link-local range (169.254.169.254 may not be stored)",
                code != 0 and 'subsets[0].addresses[0].ip: Invalid value: "169.254.169.254": may '
                "not be in the link-local range (169.254.0.0/16, fe80::/10)" in out, out)


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        hooks = Webhooks(tmp)
        server = Server(binary).start()
        try:
            checks_of(t, server, tmp, hooks)
            check_service_routing(t, server, tmp, hooks, allowed=False)
            t.check("server alive", server.alive())
        finally:
            server.stop()
        server = Server(binary, extra_args=("--unsafe-webhook-loopback-endpoints=true",)).start()
        try:
            second = os.path.join(tmp, "second")
            os.makedirs(second)
            check_service_routing(t, server, second, hooks, allowed=True)
        finally:
            server.stop()
            hooks.stop()
    t.finish()


if __name__ == "__main__":
    main()
