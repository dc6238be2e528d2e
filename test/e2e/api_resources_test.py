"""What kubectl sees: `kubectl api-resources -o wide` and `kubectl api-versions` against kwatch,
compared with what they show against kube-apiserver 1.34 with its default feature gates (the
lists below, written from Kubernetes' API reference for 1.34). Every difference must be one
docs/compatibility.md lists and explains, and every difference listed there must still be one:
a resource kwatch gains or loses, or a column that changes, fails this test until the document
says so.

Usage: api_resources_test.py <path to kwatch-apiserver>
"""
import os
import re
import shutil
import subprocess
import sys

from harness import SKIP, Checks, Server, TempDir, wait_for

ALL = "create,delete,deletecollection,get,list,patch,update,watch"

# kube-apiserver 1.34, default feature gates: (apiVersion, name, shortnames, namespaced, kind,
# verbs, categories).
KUBE_1_34 = [
    ("v1", "bindings", "", True, "Binding", "create", ""),
    ("v1", "componentstatuses", "cs", False, "ComponentStatus", "get,list", ""),
    ("v1", "configmaps", "cm", True, "ConfigMap", ALL, ""),
    ("v1", "endpoints", "ep", True, "Endpoints", ALL, ""),
    ("v1", "events", "ev", True, "Event", ALL, ""),
    ("v1", "limitranges", "limits", True, "LimitRange", ALL, ""),
    ("v1", "namespaces", "ns", False, "Namespace", "create,delete,get,list,patch,update,watch", ""),
    ("v1", "nodes", "no", False, "Node", ALL, ""),
    ("v1", "persistentvolumeclaims", "pvc", True, "PersistentVolumeClaim", ALL, ""),
    ("v1", "persistentvolumes", "pv", False, "PersistentVolume", ALL, ""),
    ("v1", "pods", "po", True, "Pod", ALL, "all"),
    ("v1", "podtemplates", "", True, "PodTemplate", ALL, ""),
    ("v1", "replicationcontrollers", "rc", True, "ReplicationController", ALL, "all"),
    ("v1", "resourcequotas", "quota", True, "ResourceQuota", ALL, ""),
    ("v1", "secrets", "", True, "Secret", ALL, ""),
    ("v1", "serviceaccounts", "sa", True, "ServiceAccount", ALL, ""),
    ("v1", "services", "svc", True, "Service", ALL, "all"),
    ("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", "", False,
     "MutatingWebhookConfiguration", ALL, "api-extensions"),
    ("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", "", False,
     "ValidatingAdmissionPolicy", ALL, "api-extensions"),
    ("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", "", False,
     "ValidatingAdmissionPolicyBinding", ALL, "api-extensions"),
    ("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", "", False,
     "ValidatingWebhookConfiguration", ALL, "api-extensions"),
    ("apiextensions.k8s.io/v1", "customresourcedefinitions", "crd,crds", False,
     "CustomResourceDefinition", ALL, "api-extensions"),
    ("apiregistration.k8s.io/v1", "apiservices", "", False, "APIService", ALL, "api-extensions"),
    ("apps/v1", "controllerrevisions", "", True, "ControllerRevision", ALL, ""),
    ("apps/v1", "daemonsets", "ds", True, "DaemonSet", ALL, "all"),
    ("apps/v1", "deployments", "deploy", True, "Deployment", ALL, "all"),
    ("apps/v1", "replicasets", "rs", True, "ReplicaSet", ALL, "all"),
    ("apps/v1", "statefulsets", "sts", True, "StatefulSet", ALL, "all"),
    ("authentication.k8s.io/v1", "selfsubjectreviews", "", False, "SelfSubjectReview", "create", ""),
    ("authentication.k8s.io/v1", "tokenreviews", "", False, "TokenReview", "create", ""),
    ("authorization.k8s.io/v1", "localsubjectaccessreviews", "", True, "LocalSubjectAccessReview",
     "create", ""),
    ("authorization.k8s.io/v1", "selfsubjectaccessreviews", "", False, "SelfSubjectAccessReview",
     "create", ""),
    ("authorization.k8s.io/v1", "selfsubjectrulesreviews", "", False, "SelfSubjectRulesReview",
     "create", ""),
    ("authorization.k8s.io/v1", "subjectaccessreviews", "", False, "SubjectAccessReview", "create", ""),
    ("autoscaling/v2", "horizontalpodautoscalers", "hpa", True, "HorizontalPodAutoscaler", ALL, "all"),
    ("batch/v1", "cronjobs", "cj", True, "CronJob", ALL, "all"),
    ("batch/v1", "jobs", "", True, "Job", ALL, "all"),
    ("certificates.k8s.io/v1", "certificatesigningrequests", "csr", False,
     "CertificateSigningRequest", ALL, ""),
    ("coordination.k8s.io/v1", "leases", "", True, "Lease", ALL, ""),
    ("discovery.k8s.io/v1", "endpointslices", "", True, "EndpointSlice", ALL, ""),
    ("events.k8s.io/v1", "events", "ev", True, "Event", ALL, ""),
    ("flowcontrol.apiserver.k8s.io/v1", "flowschemas", "", False, "FlowSchema", ALL, ""),
    ("flowcontrol.apiserver.k8s.io/v1", "prioritylevelconfigurations", "", False,
     "PriorityLevelConfiguration", ALL, ""),
    ("networking.k8s.io/v1", "ingressclasses", "", False, "IngressClass", ALL, ""),
    ("networking.k8s.io/v1", "ingresses", "ing", True, "Ingress", ALL, ""),
    ("networking.k8s.io/v1", "ipaddresses", "ip", False, "IPAddress", ALL, ""),
    ("networking.k8s.io/v1", "networkpolicies", "netpol", True, "NetworkPolicy", ALL, ""),
    ("networking.k8s.io/v1", "servicecidrs", "", False, "ServiceCIDR", ALL, ""),
    ("node.k8s.io/v1", "runtimeclasses", "", False, "RuntimeClass", ALL, ""),
    ("policy/v1", "poddisruptionbudgets", "pdb", True, "PodDisruptionBudget", ALL, ""),
    ("rbac.authorization.k8s.io/v1", "clusterrolebindings", "", False, "ClusterRoleBinding", ALL, ""),
    ("rbac.authorization.k8s.io/v1", "clusterroles", "", False, "ClusterRole", ALL, ""),
    ("rbac.authorization.k8s.io/v1", "rolebindings", "", True, "RoleBinding", ALL, ""),
    ("rbac.authorization.k8s.io/v1", "roles", "", True, "Role", ALL, ""),
    ("resource.k8s.io/v1", "deviceclasses", "", False, "DeviceClass", ALL, ""),
    ("resource.k8s.io/v1", "resourceclaims", "", True, "ResourceClaim", ALL, ""),
    ("resource.k8s.io/v1", "resourceclaimtemplates", "", True, "ResourceClaimTemplate", ALL, ""),
    ("resource.k8s.io/v1", "resourceslices", "", False, "ResourceSlice", ALL, ""),
    ("scheduling.k8s.io/v1", "priorityclasses", "pc", False, "PriorityClass", ALL, ""),
    ("storage.k8s.io/v1", "csidrivers", "", False, "CSIDriver", ALL, ""),
    ("storage.k8s.io/v1", "csinodes", "", False, "CSINode", ALL, ""),
    ("storage.k8s.io/v1", "csistoragecapacities", "", True, "CSIStorageCapacity", ALL, ""),
    ("storage.k8s.io/v1", "storageclasses", "sc", False, "StorageClass", ALL, ""),
    ("storage.k8s.io/v1", "volumeattachments", "", False, "VolumeAttachment", ALL, ""),
    ("storage.k8s.io/v1", "volumeattributesclasses", "vac", False, "VolumeAttributesClass", ALL, ""),
]

KUBE_1_34_VERSIONS = [
    "admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1", "apiregistration.k8s.io/v1",
    "apps/v1", "authentication.k8s.io/v1", "authorization.k8s.io/v1", "autoscaling/v1",
    "autoscaling/v2", "batch/v1", "certificates.k8s.io/v1", "coordination.k8s.io/v1",
    "discovery.k8s.io/v1", "events.k8s.io/v1", "flowcontrol.apiserver.k8s.io/v1",
    "networking.k8s.io/v1", "node.k8s.io/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
    "resource.k8s.io/v1", "scheduling.k8s.io/v1", "storage.k8s.io/v1", "v1",
]


def documented(doc_path):
    """The differences docs/compatibility.md lists: rows `| <kind of difference> | <what> | ... |`
    of its "Resources and versions" table."""
    rows = set()
    in_table = False
    with open(doc_path) as f:
        for line in f:
            if line.startswith("## "):
                in_table = line.strip() == "## Resources and versions"
                continue
            if not in_table or not line.startswith("| ") or line.startswith("| difference") \
                    or line.startswith("| ---"):
                continue
            cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            rows.add((cells[0], cells[1]))
    return rows


def parse_wide(text):
    """`kubectl api-resources -o wide` rows by (apiVersion, name)."""
    lines = text.splitlines()
    header = lines[0]
    cols = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    out = {}
    for line in lines[1:]:
        cells = {}
        for i, start in enumerate(cols):
            end = cols[i + 1] if i + 1 < len(cols) else len(line)
            cells[names[i]] = line[start:end].strip()
        out[(cells["APIVERSION"], cells["NAME"])] = (
            cells["SHORTNAMES"], cells["NAMESPACED"] == "true", cells["KIND"],
            cells["VERBS"].strip("[]").replace(" ", ","), cells.get("CATEGORIES", "").strip("[]").replace(" ", ","))
    return out


# kube-apiserver 1.34's GET /apis, in its order: kube-aggregator's own group first, then its
# APIServices by groupPriorityMinimum (highest first), then by name ("<version>.<group>"), each
# group listing its versions by versionPriority (the first preferred). The priorities are kube's
# apiVersionPriorities table. The aggregated (v2) document orders groups by their highest
# priority, then by group name: the same order for these groups.
KUBE_1_34_GROUP_ORDER = [
    ("apiregistration.k8s.io", ["v1"]),
    ("apps", ["v1"]),
    ("events.k8s.io", ["v1"]),
    ("authentication.k8s.io", ["v1"]),
    ("authorization.k8s.io", ["v1"]),
    ("autoscaling", ["v2", "v1"]),
    ("batch", ["v1"]),
    ("certificates.k8s.io", ["v1"]),
    ("networking.k8s.io", ["v1"]),
    ("policy", ["v1"]),
    ("rbac.authorization.k8s.io", ["v1"]),
    ("storage.k8s.io", ["v1"]),
    ("admissionregistration.k8s.io", ["v1", "v1beta1"]),  # v1beta1: kwatch adds it (compatibility.md)
    ("apiextensions.k8s.io", ["v1"]),
    ("scheduling.k8s.io", ["v1"]),
    ("coordination.k8s.io", ["v1"]),
    ("node.k8s.io", ["v1"]),
    ("discovery.k8s.io", ["v1"]),
    ("flowcontrol.apiserver.k8s.io", ["v1"]),
    ("resource.k8s.io", ["v1"]),
]

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def check_group_order(t, server, kubectl, env):
    """The groups of /apis and of the aggregated document in kube's order, then two CRDs' groups
    after them (priority 1000), by APIService name in /apis and by group name in the aggregated
    document; a CRD's versions in kube's version order whatever its spec lists first, and the
    first (a GA version over the beta one that is stored) is what kubectl reads."""
    status, doc = server.request("GET", "/apis")
    legacy = [(g["name"], [v["version"] for v in g["versions"]]) for g in doc.get("groups", [])]
    t.check("/apis lists the groups in kube's order", legacy == KUBE_1_34_GROUP_ORDER,
            f"{legacy}")
    t.check("/apis: each group's preferred version is its first",
            all(g["preferredVersion"] == g["versions"][0] for g in doc["groups"]))
    status, doc = server.request("GET", "/apis", headers={"Accept": AGGREGATED})
    aggregated = [(g["metadata"]["name"], [v["version"] for v in g["versions"]])
                  for g in doc.get("items", [])]
    t.check("the aggregated /apis lists the groups in kube's order",
            aggregated == KUBE_1_34_GROUP_ORDER, f"{aggregated}")

    def crd(group, plural, kind, versions):
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.{group}"},
                "spec": {"group": group, "scope": "Namespaced",
                         "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                         "versions": [{"name": v, "served": True, "storage": v == versions[0],
                                       "schema": {"openAPIV3Schema": {
                                           "type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}}}
                                      for v in versions]}}

    # "v1.zeta..." sorts before "v1alpha1.alpha...": /apis lists zeta first, the aggregated
    # document alpha first.
    for body in (crd("zeta.example.com", "widgets", "Widget", ["v1beta1", "v1", "v2alpha1"]),
                 crd("alpha.example.com", "gadgets", "Gadget", ["v1alpha1"])):
        status, _ = server.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                   body)
        t.check(f"{body['metadata']['name']} created", status == 201, status)

    def served():
        _, doc = server.request("GET", "/apis")
        names = [g["name"] for g in doc.get("groups", [])]
        return "zeta.example.com" in names and "alpha.example.com" in names

    wait_for(served, what="the definitions' groups in discovery")
    _, doc = server.request("GET", "/apis")
    legacy = [(g["name"], [v["version"] for v in g["versions"]]) for g in doc["groups"]]
    t.check("/apis: the definitions' groups last, by APIService name, versions in kube's order",
            legacy[len(KUBE_1_34_GROUP_ORDER):] == [
                ("zeta.example.com", ["v1", "v1beta1", "v2alpha1"]),
                ("alpha.example.com", ["v1alpha1"])], f"{legacy[len(KUBE_1_34_GROUP_ORDER):]}")
    _, doc = server.request("GET", "/apis", headers={"Accept": AGGREGATED})
    aggregated = [(g["metadata"]["name"], [v["version"] for v in g["versions"]])
                  for g in doc["items"]]
    t.check("aggregated /apis: the definitions' groups last, by group name",
            aggregated[len(KUBE_1_34_GROUP_ORDER):] == [
                ("alpha.example.com", ["v1alpha1"]),
                ("zeta.example.com", ["v1", "v1beta1", "v2alpha1"])],
            f"{aggregated[len(KUBE_1_34_GROUP_ORDER):]}")
    _, group = server.request("GET", "/apis/zeta.example.com")
    t.check("/apis/zeta.example.com prefers v1",
            group.get("preferredVersion", {}).get("version") == "v1", f"{group}")
    manifest = "apiVersion: zeta.example.com/v1beta1\nkind: Widget\nmetadata: {name: w1, namespace: default}\n"
    made = subprocess.run([kubectl, "create", "-f", "-"], input=manifest, capture_output=True,
                          text=True, env=env, timeout=60)
    t.check("kubectl create a Widget", made.returncode == 0, made.stderr)
    read = subprocess.run([kubectl, "get", "widgets", "w1", "-o", "jsonpath={.apiVersion}"],
                          capture_output=True, text=True, env=env, timeout=60)
    t.check("kubectl get reads the preferred version, v1", read.stdout == "zeta.example.com/v1",
            read.stdout + read.stderr)


def main():
    binary = sys.argv[1]
    kubectl = shutil.which("kubectl")
    if not kubectl:
        print("kubectl is not installed")
        sys.exit(SKIP)
    t = Checks()
    doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                       "compatibility.md")
    with TempDir() as tmp:
        server = Server(binary).start()
        try:
            env = dict(os.environ, KUBECONFIG=server.kubeconfig(tmp), HOME=tmp)
            wide = subprocess.run([kubectl, "api-resources", "-o", "wide"], capture_output=True,
                                  text=True, env=env, timeout=60)
            versions = subprocess.run([kubectl, "api-versions"], capture_output=True, text=True,
                                      env=env, timeout=60)
            t.check("kubectl api-resources -o wide", wide.returncode == 0, wide.stderr)
            t.check("kubectl api-versions", versions.returncode == 0, versions.stderr)
            kwatch = parse_wide(wide.stdout)
            found = set()
            kube = {(v, n): (s, ns, k, verbs, cats) for v, n, s, ns, k, verbs, cats in KUBE_1_34}
            for key, row in kube.items():
                what = f"{key[0]} {key[1]}"
                if key not in kwatch:
                    found.add(("kwatch lacks", what))
                elif kwatch[key] != row:
                    found.add(("differs", what))
                    print(f"     {what}: kube {row}, kwatch {kwatch[key]}")
            for key in kwatch:
                if key not in kube:
                    found.add(("kwatch adds", f"{key[0]} {key[1]}"))
            have = set(versions.stdout.split())
            for v in sorted(set(KUBE_1_34_VERSIONS) - have):
                found.add(("kwatch lacks", v))
            for v in sorted(have - set(KUBE_1_34_VERSIONS)):
                found.add(("kwatch adds", v))
            listed = documented(doc)
            for diff in sorted(found - listed):
                t.check(f"the difference `{diff[0]}: {diff[1]}` is in docs/compatibility.md", False)
            for diff in sorted(listed - found):
                t.check(f"docs/compatibility.md lists `{diff[0]}: {diff[1]}`, which is no longer one",
                        False)
            t.check(f"every difference from kube 1.34 ({len(found)}) is documented, and only those",
                    found == listed)
            check_group_order(t, server, kubectl, env)
            t.check("server alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
