"""Built-in kinds have a shape: unknown fields, wrong types and bad values are refused as
kube-apiserver refuses them, objects come back defaulted, and kubectl and the Python client see
what they see against kube-apiserver.

Usage: schema_test.py <path to kwatch-apiserver>
"""
import http.client
import json
import os
import shutil
import subprocess
import sys

from harness import Checks, Server, TempDir

PODS = "/api/v1/namespaces/default/pods"


def pod(name, **spec_extra):
    container = {"name": "c", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}
    container.update(spec_extra.pop("container", {}))
    spec = {"containers": [container]}
    spec.update(spec_extra)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def send(server, method, path, body, content_type="application/json"):
    """(status, parsed body, [Warning header values])."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        data = body if isinstance(body, str) else json.dumps(body)
        conn.request(method, path, body=data, headers={"Content-Type": content_type})
        resp = conn.getresponse()
        payload = json.loads(resp.read())
        return resp.status, payload, resp.headers.get_all("Warning") or []
    finally:
        conn.close()


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary, data_dir=tmp + "/data").start()
        try:
            check_field_validation(t, server)
            check_types_and_values(t, server)
            check_defaults(t, server)
            check_openapi(t, server)
            check_python_client(t, server)
            check_kubectl(t, server, tmp)
        finally:
            server.stop()
    t.finish()


def check_field_validation(t, server):
    bogus = pod("strict-1")
    bogus["bogusTop"] = 1
    bogus["spec"]["containers"][0]["imagee"] = "typo"
    status, body, _ = send(server, "POST", PODS + "?fieldValidation=Strict", bogus)
    t.check("Strict: unknown fields -> 400 BadRequest", status == 400 and body.get("reason") == "BadRequest",
            f"{status} {body}")
    t.check("Strict: the message names every unknown field as kube does",
            'Pod in version "v1" cannot be handled as a Pod: strict decoding error: ' in body.get("message", "")
            and 'unknown field "bogusTop"' in body.get("message", "")
            and 'unknown field "spec.containers[0].imagee"' in body.get("message", ""), body.get("message"))
    status, _, _ = send(server, "GET", f"{PODS}/strict-1", "")
    t.check("Strict: nothing was stored", status == 404, status)

    bogus["metadata"]["name"] = "warn-1"
    status, body, warnings = send(server, "POST", PODS + "?fieldValidation=Warn", bogus)
    t.check("Warn: created", status == 201, f"{status} {body}")
    t.check("Warn: one Warning header per unknown field",
            sorted(warnings) == sorted(['299 - "unknown field \\"bogusTop\\""',
                                        '299 - "unknown field \\"spec.containers[0].imagee\\""']), warnings)
    t.check("Warn: unknown fields are dropped", "bogusTop" not in body
            and "imagee" not in body["spec"]["containers"][0], body)

    bogus["metadata"]["name"] = "default-1"
    status, body, warnings = send(server, "POST", PODS, bogus)
    t.check("no fieldValidation: warns, as kube's default does", status == 201 and len(warnings) == 2,
            f"{status} {warnings}")
    bogus["metadata"]["name"] = "ignore-1"
    status, body, warnings = send(server, "POST", PODS + "?fieldValidation=Ignore", bogus)
    t.check("Ignore: created silently and pruned", status == 201 and not warnings and "bogusTop" not in body,
            f"{status} {warnings}")

    dup = '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"dup-1","name":"dup-1"},' \
          '"spec":{"containers":[{"name":"c","image":"nginx"}]}}'
    status, body, _ = send(server, "POST", PODS + "?fieldValidation=Strict", dup)
    t.check("Strict: a duplicate field -> 400 naming it",
            status == 400 and 'duplicate field "metadata.name"' in body.get("message", ""), f"{status} {body}")
    status, body, warnings = send(server, "POST", PODS + "?fieldValidation=Warn", dup)
    t.check("Warn: a duplicate field is a warning", status == 201 and
            warnings == ['299 - "duplicate field \\"metadata.name\\""'], f"{status} {warnings}")

    meta = pod("meta-1")
    meta["metadata"]["bogusMeta"] = "x"
    status, body, _ = send(server, "POST", PODS + "?fieldValidation=Strict", meta)
    t.check("Strict: an unknown metadata field is refused",
            status == 400 and 'unknown field "metadata.bogusMeta"' in body.get("message", ""), f"{status} {body}")

    # Patches are checked on their result.
    patch = {"spec": {"bogusPatched": True}}
    status, body, _ = send(server, "PATCH", f"{PODS}/warn-1?fieldValidation=Strict", patch,
                           "application/merge-patch+json")
    t.check("Strict: a merge patch adding an unknown field -> 400",
            status == 400 and 'unknown field "spec.bogusPatched"' in body.get("message", ""), f"{status} {body}")
    status, body, warnings = send(server, "PATCH", f"{PODS}/warn-1", patch, "application/merge-patch+json")
    t.check("Warn: the same patch succeeds without the field", status == 200
            and "bogusPatched" not in body["spec"] and len(warnings) == 1, f"{status} {warnings}")


def check_types_and_values(t, server):
    for fv in ("Strict", "Ignore"):
        bad = pod("type-1", container={"ports": [{"containerPort": "eighty"}]})
        status, body, _ = send(server, "POST", f"{PODS}?fieldValidation={fv}", bad)
        t.check(f"{fv}: containerPort \"eighty\" -> 400 as a decoding error",
                status == 400 and body.get("reason") == "BadRequest"
                and 'cannot be handled as a Pod' in body.get("message", "")
                and "spec.containers[0].ports[0].containerPort" in body.get("message", ""), f"{status} {body}")

    status, body, _ = send(server, "POST", PODS, pod("policy-1", restartPolicy="Sometimes"))
    causes = body.get("details", {}).get("causes", [])
    t.check("restartPolicy: Sometimes -> 422 Invalid with a cause at spec.restartPolicy",
            status == 422 and body.get("reason") == "Invalid"
            and any(c.get("field") == "spec.restartPolicy" and "Sometimes" in c.get("message", "")
                    for c in causes), f"{status} {body}")

    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "neg"},
              "spec": {"replicas": -3, "selector": {"matchLabels": {"a": "b"}},
                       "template": {"metadata": {"labels": {"a": "b"}},
                                    "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    status, body, _ = send(server, "POST", "/apis/apps/v1/namespaces/default/deployments", deploy)
    causes = body.get("details", {}).get("causes", [])
    t.check("Deployment replicas: -3 -> 422 with a cause at spec.replicas",
            status == 422 and any(c.get("field") == "spec.replicas" for c in causes), f"{status} {body}")

    many = pod("many-1", restartPolicy="Sometimes", dnsPolicy="Whatever",
               container={"imagePullPolicy": "Sometimes"})
    status, body, _ = send(server, "POST", PODS, many)
    fields = sorted(c.get("field") for c in body.get("details", {}).get("causes", []))
    t.check("every violation is listed", status == 422 and fields == sorted(
        ["spec.restartPolicy", "spec.dnsPolicy", "spec.containers[0].imagePullPolicy"]), f"{status} {fields}")

    big = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "big-annotations", "annotations": {"a": "x" * (256 * 1024)}}}
    status, body, _ = send(server, "POST", "/api/v1/namespaces/default/configmaps", big)
    t.check("annotations over 256 KiB in all are 422, as kube's limit",
            status == 422 and body["details"]["causes"][0]["field"] == "metadata.annotations"
            and "Too long: must have at most 262144 bytes" in body["message"], f"{status} {body}"[:300])

    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad-b64"}, "data": {"k": "%%%"}}
    status, body, _ = send(server, "POST", "/api/v1/namespaces/default/secrets", secret)
    t.check("Secret data that is not base64 is refused", status in (400, 422), f"{status} {body}")


def check_defaults(t, server):
    status, body, _ = send(server, "POST", PODS, pod("defaults-1"))
    spec = body.get("spec", {})
    c = spec.get("containers", [{}])[0]
    t.check("a pod comes back defaulted", status == 201 and spec.get("restartPolicy") == "Always"
            and spec.get("dnsPolicy") == "ClusterFirst" and spec.get("terminationGracePeriodSeconds") == 30
            and spec.get("schedulerName") == "default-scheduler"
            and c.get("imagePullPolicy") == "IfNotPresent"
            and c.get("terminationMessagePath") == "/dev/termination-log"
            and c.get("ports", [{}])[0].get("protocol") == "TCP"
            and body.get("status", {}).get("phase") == "Pending", json.dumps(body)[:800])
    status, got = server.request("GET", f"{PODS}/defaults-1")
    t.check("the stored pod is the defaulted one", got.get("spec") == spec, json.dumps(got)[:400])

    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
           "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}
    status, body, _ = send(server, "POST", "/api/v1/namespaces/default/services", svc)
    sspec = body.get("spec", {})
    t.check("a service gets type, sessionAffinity, protocol and targetPort", status == 201
            and sspec.get("type") == "ClusterIP" and sspec.get("sessionAffinity") == "None"
            and sspec.get("ports") == [{"port": 80, "protocol": "TCP", "targetPort": 80}], json.dumps(body)[:500])

    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"user": "admin"}}
    status, body, _ = send(server, "POST", "/api/v1/namespaces/default/secrets", secret)
    t.check("a secret's stringData is folded into data", status == 201
            and body.get("data") == {"user": "YWRtaW4="} and "stringData" not in body
            and body.get("type") == "Opaque", json.dumps(body)[:400])

    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
              "spec": {"selector": {"matchLabels": {"a": "b"}},
                       "template": {"metadata": {"labels": {"a": "b"}},
                                    "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    status, body, _ = send(server, "POST", "/apis/apps/v1/namespaces/default/deployments", deploy)
    dspec = body.get("spec", {})
    t.check("a deployment gets replicas, strategy, history and deadline", status == 201
            and dspec.get("replicas") == 1 and dspec.get("revisionHistoryLimit") == 10
            and dspec.get("progressDeadlineSeconds") == 600
            and dspec.get("strategy", {}).get("type") == "RollingUpdate", json.dumps(body)[:500])
    generation = body.get("metadata", {}).get("generation")
    status, body, _ = send(server, "PUT", "/apis/apps/v1/namespaces/default/deployments/web",
                           dict(deploy, metadata={"name": "web"}))
    t.check("re-sending the undefaulted spec does not bump the generation", status == 200
            and body.get("metadata", {}).get("generation") == generation, json.dumps(body)[:300])

    status, body = server.request("GET", "/api/v1/namespaces/default")
    t.check("a namespace carries kubernetes.io/metadata.name",
            body.get("metadata", {}).get("labels", {}).get("kubernetes.io/metadata.name") == "default", body)


def check_openapi(t, server):
    status, root = server.request("GET", "/openapi/v3")
    url = root.get("paths", {}).get("api/v1", {}).get("serverRelativeURL", "")
    status, doc = server.request("GET", url)
    schemas = doc.get("components", {}).get("schemas", {}) if isinstance(doc, dict) else {}
    pod_schema = schemas.get("io.k8s.api.core.v1.Pod", {})
    t.check("OpenAPI v3 api/v1 has the Pod schema with its group-version-kind",
            status == 200 and pod_schema.get("x-kubernetes-group-version-kind") ==
            [{"group": "", "kind": "Pod", "version": "v1"}], str(pod_schema)[:300])


def check_python_client(t, server):
    script = f"""
import sys
from kubernetes import client
cfg = client.Configuration()
cfg.host = "http://127.0.0.1:{server.port}"
api = client.CoreV1Api(client.ApiClient(cfg))
pods = api.list_pod_for_all_namespaces()
print("listed", len(pods.items))
for p in pods.items:
    assert p.spec.containers[0].ports is None or isinstance(p.spec.containers[0].ports[0].container_port, int)
body = client.V1Pod(metadata=client.V1ObjectMeta(name="py-1"),
                    spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]))
created = api.create_namespaced_pod("default", body)
print("restartPolicy", created.spec.restart_policy)
try:
    # python3-kubernetes 22 predates the field_validation argument: the query parameter by hand.
    api.api_client.call_api("/api/v1/namespaces/default/pods", "POST",
        query_params=[("fieldValidation", "Strict")], header_params={{"Content-Type": "application/json"}},
        body={{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "py-2"}},
              "spec": {{"containers": [{{"name": "c", "image": "nginx", "imagee": "x"}}]}}}},
        response_type="V1Pod", auth_settings=[], _return_http_data_only=True)
    print("typo accepted")
except client.exceptions.ApiException as e:
    print("typo refused", e.status)
"""
    p = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, timeout=60)
    if "No module named 'kubernetes'" in p.stderr:
        print("python3-kubernetes is not installed: skipping its checks")
        return
    t.check("Python client lists every pod after bad input was refused",
            "listed" in p.stdout, p.stdout + p.stderr[-800:])
    t.check("Python client script ran to its end", p.returncode == 0, p.stderr[-800:])
    t.check("Python client sees the defaults", "restartPolicy Always" in p.stdout, p.stdout)
    t.check("Python client: a typo with field_validation=Strict is refused", "typo refused 400" in p.stdout,
            p.stdout)


def check_kubectl(t, server, tmp):
    kubectl = shutil.which("kubectl")
    if not kubectl:
        print("kubectl is not installed: skipping its checks")
        return
    env = dict(os.environ, KUBECONFIG=server.kubeconfig(tmp), HOME=tmp)

    def run(*args, stdin=None):
        p = subprocess.run([kubectl, *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)
        return p.returncode, p.stdout + p.stderr

    typo = """apiVersion: v1
kind: Pod
metadata: {name: kubectl-typo}
spec:
  containers:
  - name: c
    image: nginx
    imagePullPolicyy: Always
"""
    code, out = run("apply", "-f", "-", stdin=typo)
    t.check("kubectl apply refuses a typo (default Strict)", code != 0
            and 'strict decoding error: unknown field "spec.containers[0].imagePullPolicyy"' in out, out)
    code, out = run("apply", "--validate=false", "-f", "-", stdin=typo)
    t.check("kubectl apply --validate=false stores it pruned", code == 0, out)
    code, out = run("get", "pod", "kubectl-typo", "-o", "json")
    container = json.loads(out)["spec"]["containers"][0] if code == 0 else {}
    t.check("the pruned pod has no typo field", "imagePullPolicyy" not in container
            and container.get("imagePullPolicy") == "Always", out[-500:])
    code, out = run("explain", "pod.spec.containers")
    t.check("kubectl explain pod.spec.containers", code == 0 and "image" in out and "FIELDS" in out, out[-800:])
    code, out = run("explain", "deployment.spec.strategy")
    t.check("kubectl explain deployment.spec.strategy", code == 0 and "rollingUpdate" in out, out[-800:])


if __name__ == "__main__":
    main()
