"""The everyday kinds, as kubectl users meet them: one manifest of every kind applied with
kubectl, read back with kubectl's columns, `kubectl get all`, `kubectl scale` of the workloads
that scale, and the same manifests with mistakes refused with kube-apiserver's causes.

Usage: kinds_test.py <path to kwatch-apiserver>
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import time

import yaml

from harness import SKIP, Checks, Server, TempDir

NS = "default"

# One valid object of every kind, as a user would write it.
CORPUS = {
    "rc": """apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec:
  replicas: 1
  selector: {app: legacy, tier: back}
  template:
    metadata: {labels: {app: legacy, tier: back}}
    spec:
      containers: [{name: c, image: "busybox:1.36"}]
""",
    "pv": """apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  hostPath: {path: /data/pv1}
""",
    "pvc": """apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  resources: {requests: {storage: 1Gi}}
""",
    "quota": """apiVersion: v1
kind: ResourceQuota
metadata: {name: compute}
spec:
  hard: {pods: "10", requests.cpu: "4", limits.memory: 8Gi}
""",
    "limits": """apiVersion: v1
kind: LimitRange
metadata: {name: defaults}
spec:
  limits:
  - type: Container
    max: {cpu: "2"}
    min: {memory: 64Mi}
""",
    "podtemplate": """apiVersion: v1
kind: PodTemplate
metadata: {name: tmpl}
template:
  metadata: {labels: {app: tmpl}}
  spec:
    containers: [{name: c, image: "nginx:1.25"}]
""",
    "deploy": """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: nginx, image: "nginx:1.25"}]
""",
    "rs": """apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: frontend}
spec:
  replicas: 2
  selector:
    matchLabels: {app: frontend}
    matchExpressions: [{key: tier, operator: In, values: [front, cache]}]
  template:
    metadata: {labels: {app: frontend, tier: front}}
    spec:
      containers: [{name: php, image: "php:8"}]
""",
    "sts": """apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: pg, image: "postgres:16"}]
  volumeClaimTemplates:
  - metadata: {name: pgdata}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
""",
    "ds": """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      containers: [{name: agent, image: "fluent-bit:3"}]
""",
    # Owned by the stateful set once it exists (its uid is known then): see check_apply.
    "controllerrevision": """apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: db-rev1}
data: {spec: {template: {}}}
revision: 1
""",
    "job": """apiVersion: batch/v1
kind: Job
metadata: {name: pi}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: pi, image: "perl:5.34", command: [perl, -e, "print 1"]}]
""",
    "cj": """apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: backup, image: "busybox:1.36"}]
""",
    "ingressclass": """apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
""",
    "ing": """apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: site}
spec:
  ingressClassName: nginx
  rules:
  - host: www.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: web, port: {number: 80}}}
""",
    "netpol": """apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all}
spec:
  podSelector: {}
  policyTypes: [Ingress]
""",
    "endpointslice": """apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 80}]
endpoints:
- addresses: [10.0.0.5]
  conditions: {ready: true}
""",
    "pdb": """apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web-pdb}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
""",
    "pc": """apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 100000
globalDefault: false
description: for the important ones
""",
    "sc": """apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
""",
    "csidriver": """apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: hostpath.csi.k8s.io}
spec:
  attachRequired: false
  podInfoOnMount: true
  volumeLifecycleModes: [Persistent, Ephemeral]
""",
    "volumeattachment": """apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: va1}
spec:
  attacher: hostpath.csi.k8s.io
  nodeName: node-1
  source: {persistentVolumeName: pv1}
""",
    "runtimeclass": """apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
""",
    "hpa": """apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web-hpa}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 50}
""",
    "hpa-v1": """apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata: {name: legacy-hpa}
spec:
  scaleTargetRef: {apiVersion: v1, kind: ReplicationController, name: legacy}
  maxReplicas: 4
  targetCPUUtilizationPercentage: 70
""",
}

# kubectl's resource name, the object's name, the API path of its collection, the header
# `kubectl get` prints, the cells of its row (None: not compared) and, for workloads, the
# header of `-o wide`.
GETS = [
    ("horizontalpodautoscalers", "web-hpa", "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
     "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE",
     ["web-hpa", "Deployment/web", "cpu: <unknown>/50%", None, None, None, None], None),
    ("replicationcontrollers", "legacy", "/api/v1/namespaces/default/replicationcontrollers",
     "NAME DESIRED CURRENT READY AGE",
     ["legacy", 1, 0, 0, None, "c", "busybox:1.36", "app=legacy,tier=back"],
     "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR"),
    ("persistentvolumes", "pv1", "/api/v1/persistentvolumes",
     "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS "
     "REASON AGE",
     ["pv1", "5Gi", "RWO", "Retain", "Pending", "", "manual", "<unset>", "", None, "Filesystem"],
     "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS "
     "REASON AGE VOLUMEMODE"),
    ("persistentvolumeclaims", "data", "/api/v1/namespaces/default/persistentvolumeclaims",
     "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE",
     ["data", "Pending", "", "", "", "manual", "<unset>", None, "Filesystem"],
     "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE VOLUMEMODE"),
    ("resourcequotas", "compute", "/api/v1/namespaces/default/resourcequotas",
     "NAME REQUEST LIMIT AGE", ["compute", "", "", None], None),
    ("limitranges", "defaults", "/api/v1/namespaces/default/limitranges",
     "NAME CREATED AT", ["defaults", None], None),
    ("podtemplates", "tmpl", "/api/v1/namespaces/default/podtemplates",
     "NAME CONTAINERS IMAGES POD LABELS", ["tmpl", "c", "nginx:1.25", "app=tmpl"], None),
    ("deployments", "web", "/apis/apps/v1/namespaces/default/deployments",
     "NAME READY UP-TO-DATE AVAILABLE AGE", ["web", "0/1", 0, 0, None, "nginx", "nginx:1.25", "app=web"],
     "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR"),
    ("replicasets", "frontend", "/apis/apps/v1/namespaces/default/replicasets",
     "NAME DESIRED CURRENT READY AGE",
     ["frontend", 2, 0, 0, None, "php", "php:8", "app=frontend,tier in (cache,front)"],
     "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR"),
    ("statefulsets", "db", "/apis/apps/v1/namespaces/default/statefulsets",
     "NAME READY AGE", ["db", "0/1", None, "pg", "postgres:16"],
     "NAME READY AGE CONTAINERS IMAGES"),
    ("daemonsets", "agent", "/apis/apps/v1/namespaces/default/daemonsets",
     "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE",
     ["agent", 0, 0, 0, 0, 0, "kubernetes.io/os=linux", None, "agent", "fluent-bit:3", "app=agent"],
     "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE CONTAINERS IMAGES "
     "SELECTOR"),
    ("controllerrevisions", "db-rev1", "/apis/apps/v1/namespaces/default/controllerrevisions",
     "NAME CONTROLLER REVISION AGE", ["db-rev1", "statefulset.apps/db", 1, None], None),
    ("jobs", "pi", "/apis/batch/v1/namespaces/default/jobs",
     "NAME STATUS COMPLETIONS DURATION AGE", ["pi", "Running", "0/1", "", None, "pi", "perl:5.34", None],
     "NAME STATUS COMPLETIONS DURATION AGE CONTAINERS IMAGES SELECTOR"),
    ("cronjobs", "nightly", "/apis/batch/v1/namespaces/default/cronjobs",
     "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE",
     ["nightly", "0 3 * * *", "<none>", "False", 0, "<none>", None, "backup", "busybox:1.36",
      "<none>"],
     "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE CONTAINERS IMAGES SELECTOR"),
    ("ingressclasses", "nginx", "/apis/networking.k8s.io/v1/ingressclasses",
     "NAME CONTROLLER PARAMETERS AGE", ["nginx", "k8s.io/ingress-nginx", "<none>", None], None),
    ("ingresses", "site", "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
     "NAME CLASS HOSTS ADDRESS PORTS AGE", ["site", "nginx", "www.example.com", "", "80", None],
     None),
    ("networkpolicies", "deny-all", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
     "NAME POD-SELECTOR AGE", ["deny-all", "<none>", None], None),
    ("endpointslices", "web-abc", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
     "NAME ADDRESSTYPE PORTS ENDPOINTS AGE", ["web-abc", "IPv4", "80", "10.0.0.5", None], None),
    ("poddisruptionbudgets", "web-pdb", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
     "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE",
     ["web-pdb", "1", "N/A", 0, None], None),
    ("priorityclasses", "high", "/apis/scheduling.k8s.io/v1/priorityclasses",
     "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY",
     ["high", 100000, False, None, "PreemptLowerPriority"], None),
    ("storageclasses", "standard", "/apis/storage.k8s.io/v1/storageclasses",
     "NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE",
     ["standard (default)", "kubernetes.io/no-provisioner", "Delete", "WaitForFirstConsumer",
      False, None], None),
    ("csidrivers", "hostpath.csi.k8s.io", "/apis/storage.k8s.io/v1/csidrivers",
     "NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS REQUIRESREPUBLISH MODES AGE",
     ["hostpath.csi.k8s.io", False, True, False, "<unset>", False, "Persistent,Ephemeral", None],
     None),
    ("volumeattachments", "va1", "/apis/storage.k8s.io/v1/volumeattachments",
     "NAME ATTACHER PV NODE ATTACHED AGE",
     ["va1", "hostpath.csi.k8s.io", "pv1", "node-1", False, None], None),
    ("runtimeclasses", "gvisor", "/apis/node.k8s.io/v1/runtimeclasses",
     "NAME HANDLER AGE", ["gvisor", "runsc", None], None),
]

# kind -> (group/version, plural, namespaced, short names, categories, status subresource)
DISCOVERY = {
    "ReplicationController": ("v1", "replicationcontrollers", True, ["rc"], ["all"], True),
    "PersistentVolume": ("v1", "persistentvolumes", False, ["pv"], [], True),
    "PersistentVolumeClaim": ("v1", "persistentvolumeclaims", True, ["pvc"], [], True),
    "ResourceQuota": ("v1", "resourcequotas", True, ["quota"], [], True),
    "LimitRange": ("v1", "limitranges", True, ["limits"], [], False),
    "PodTemplate": ("v1", "podtemplates", True, [], [], False),
    "ReplicaSet": ("apps/v1", "replicasets", True, ["rs"], ["all"], True),
    "StatefulSet": ("apps/v1", "statefulsets", True, ["sts"], ["all"], True),
    "DaemonSet": ("apps/v1", "daemonsets", True, ["ds"], ["all"], True),
    "ControllerRevision": ("apps/v1", "controllerrevisions", True, [], [], False),
    "Job": ("batch/v1", "jobs", True, [], ["all"], True),
    "CronJob": ("batch/v1", "cronjobs", True, ["cj"], ["all"], True),
    "Ingress": ("networking.k8s.io/v1", "ingresses", True, ["ing"], [], True),
    "IngressClass": ("networking.k8s.io/v1", "ingressclasses", False, [], [], False),
    "NetworkPolicy": ("networking.k8s.io/v1", "networkpolicies", True, ["netpol"], [], False),
    "EndpointSlice": ("discovery.k8s.io/v1", "endpointslices", True, [], [], False),
    "PodDisruptionBudget": ("policy/v1", "poddisruptionbudgets", True, ["pdb"], [], True),
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses", False, ["pc"], [], False),
    "StorageClass": ("storage.k8s.io/v1", "storageclasses", False, ["sc"], [], False),
    "CSIDriver": ("storage.k8s.io/v1", "csidrivers", False, [], [], False),
    "VolumeAttachment": ("storage.k8s.io/v1", "volumeattachments", False, [], [], True),
    "RuntimeClass": ("node.k8s.io/v1", "runtimeclasses", False, [], [], False),
    "HorizontalPodAutoscaler": ("autoscaling/v2", "horizontalpodautoscalers", True, ["hpa"],
                                ["all"], True),
}

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def columns(line):
    """A kubectl header line as words separated the way kubectl pads them (2+ spaces)."""
    return " ".join(re.split(r"\s{2,}", line.strip()))


def main():
    binary = sys.argv[1]
    kubectl = shutil.which("kubectl")
    if not kubectl:
        print("kubectl is not installed: skipping the kinds suite")
        sys.exit(SKIP)
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary, data_dir=os.path.join(tmp, "data")).start()
        env = dict(os.environ, HOME=tmp, KUBECONFIG=server.kubeconfig(tmp))

        def kc(*args, stdin=None):
            p = subprocess.run([kubectl, *args], input=stdin, capture_output=True, text=True,
                               env=env, timeout=60)
            return p.returncode, p.stdout + p.stderr

        def write(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            return path

        try:
            check_discovery(t, server)
            check_apply(t, server, kc, tmp)
            check_get(t, server, kc)
            check_defaults(t, server)
            check_protobuf_get(t, server)
            check_get_all(t, kc)
            check_scale(t, server, kc)
            check_field_selectors(t, kc)
            check_kubectl_create(t, server, kc)
            check_mistakes(t, server, kc, write)
            check_updates(t, server, kc, write)
            check_events_v1(t, server, kc)
            check_generations(t, server)
            check_list_files(t, server, kc, write)
        finally:
            server.stop()
            if t.failed:
                print(server.read_log()[-4000:])
    t.finish()


def check_discovery(t, server):
    for kind, (gv, plural, namespaced, short, categories, has_status) in DISCOVERY.items():
        path = "/api/" + gv if gv == "v1" else "/apis/" + gv
        status, body = server.request("GET", path)
        entries = {r["name"]: r for r in body.get("resources", [])} if status == 200 else {}
        r = entries.get(plural, {})
        t.check(f"discovery: {plural} is {kind} with kube's names",
                r.get("kind") == kind and r.get("namespaced") == namespaced
                and r.get("singularName") == kind.lower() and r.get("shortNames", []) == short
                and r.get("categories", []) == categories, r)
        t.check(f"discovery: {plural}/status {'served' if has_status else 'absent'}",
                (plural + "/status" in entries) == has_status, sorted(entries))
    for plural, gv in [("deployments", "apps/v1"), ("replicasets", "apps/v1"),
                       ("statefulsets", "apps/v1"), ("replicationcontrollers", "v1")]:
        path = "/api/" + gv if gv == "v1" else "/apis/" + gv
        _, body = server.request("GET", path)
        scale = {r["name"]: r for r in body.get("resources", [])}.get(plural + "/scale", {})
        t.check(f"discovery: {plural}/scale is an autoscaling/v1 Scale",
                scale.get("group") == "autoscaling" and scale.get("version") == "v1"
                and scale.get("kind") == "Scale"
                and scale.get("verbs") == ["get", "patch", "update"], scale)
    # What the router serves, both discovery forms list: kube's entries for the three that are
    # routed without a status or scale of their own.
    _, core = server.request("GET", "/api/v1")
    entries = {r["name"]: r for r in core.get("resources", [])}
    t.check("discovery: namespaces/finalize, services/proxy and nodes/proxy as kube lists them",
            entries.get("namespaces/finalize", {}).get("verbs") == ["update"]
            and entries.get("namespaces/finalize", {}).get("kind") == "Namespace"
            and entries.get("services/proxy", {}).get("kind") == "ServiceProxyOptions"
            and entries.get("nodes/proxy", {}).get("kind") == "NodeProxyOptions"
            and entries.get("nodes/proxy", {}).get("verbs") == ["create", "delete", "get", "patch",
                                                                 "update"],
            {k: v for k, v in entries.items() if "/" in k and k.split("/")[0] in
             ("namespaces", "services", "nodes")})
    _, aggregated = server.request("GET", "/api", headers={
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})
    listed = set()
    for group in aggregated.get("items", []):
        for version in group.get("versions", []):
            for r in version.get("resources", []):
                for sub in r.get("subresources", []):
                    listed.add(r["resource"] + "/" + sub["subresource"])
    legacy = {k for k in entries if "/" in k}
    t.check("discovery: the aggregated form lists the same core subresources as the legacy one",
            listed == legacy, sorted(listed ^ legacy))
    status, _ = server.request("GET", "/apis/apps/v1/namespaces/default/deployments/x/finalize")
    t.check("a subresource discovery does not list is 404", status == 404, status)


def resource_versions(server):
    out = {}
    for resource, name, path, *_ in GETS:
        status, body = server.request("GET", f"{path}/{name}")
        out[resource] = body.get("metadata", {}).get("resourceVersion") if status == 200 else None
    return out


def check_apply(t, server, kc, tmp):
    corpus = os.path.join(tmp, "corpus")
    os.makedirs(corpus)
    for name, text in CORPUS.items():
        with open(os.path.join(corpus, name + ".yaml"), "w") as f:
            f.write(text)
    code, out = kc("apply", "-f", corpus)
    t.check("kubectl apply -f of the whole corpus succeeds", code == 0, out)
    for name, text in CORPUS.items():
        obj = yaml.safe_load(text)
        kind = obj["kind"].lower()
        t.check(f"apply created the {obj['kind']}",
                re.search(rf"^{re.escape(kind)}(\.[a-z0-9.]+)?/{re.escape(obj['metadata']['name'])} "
                          r"created$", out, re.M) is not None, out)
    # The revision's controller, as a stateful set's revisions have it.
    _, sts = server.request("GET", "/apis/apps/v1/namespaces/default/statefulsets/db")
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
             "uid": sts.get("metadata", {}).get("uid"), "controller": True}
    status, body = server.request(
        "PATCH", "/apis/apps/v1/namespaces/default/controllerrevisions/db-rev1",
        body={"metadata": {"ownerReferences": [owner]}},
        headers={"Content-Type": "application/merge-patch+json"})
    t.check("the revision is owned by the stateful set", status == 200, body)
    # kubectl sends what it cannot prove unchanged (lists kube replaces whole, a budget's
    # selector); the server writes nothing when the result is the stored object.
    before = resource_versions(server)
    code, out = kc("apply", "-f", corpus)
    t.check("applying the corpus again succeeds", code == 0 and out.count("\n") == len(CORPUS), out)
    after = resource_versions(server)
    t.check("applying the corpus again writes nothing", before == after and None not in after.values(),
            (before, after))


def check_get(t, server, kc):
    for resource, name, path, header, cells, wide in GETS:
        code, out = kc("get", resource, name)
        lines = out.splitlines()
        t.check(f"kubectl get {resource}: {header}", code == 0 and lines
                and columns(lines[0]) == header, out)
        if wide:
            code, out = kc("get", resource, name, "-o", "wide")
            lines = out.splitlines()
            t.check(f"kubectl get {resource} -o wide: {wide}", code == 0 and lines
                    and columns(lines[0]) == wide, out)
        status, table = server.request("GET", f"{path}/{name}", headers={"Accept": TABLE})
        row = table.get("rows", [{}])[0].get("cells", []) if status == 200 else []
        got = [c if want is not None else None for c, want in zip(row, cells)]
        t.check(f"{resource} row: {cells}", status == 200 and len(row) == len(cells)
                and got == cells, f"{status} {row}")
        t.check(f"{resource}: the wide columns are priority 1",
                [d["priority"] for d in table.get("columnDefinitions", [])]
                == [0] * len(header_names(header)) + [1] * (len(cells) - len(header_names(header))),
                table.get("columnDefinitions"))


def header_names(header):
    """The column names of a header as kubectl prints it (names may hold one space)."""
    known = ["ACCESS MODES", "RECLAIM POLICY", "POD LABELS", "NODE SELECTOR", "LAST SCHEDULE",
             "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "CREATED AT"]
    for k in known:
        header = header.replace(k, k.replace(" ", "_"))
    return header.split()


def check_defaults(t, server):
    def get(path):
        status, body = server.request("GET", path)
        return body if status == 200 else {}

    sts = get("/apis/apps/v1/namespaces/default/statefulsets/db")
    spec = sts.get("spec", {})
    claim = (spec.get("volumeClaimTemplates") or [{}])[0]
    t.check("a stateful set comes back defaulted as kube defaults it",
            spec.get("podManagementPolicy") == "OrderedReady"
            and spec.get("updateStrategy") == {"type": "RollingUpdate",
                                               "rollingUpdate": {"partition": 0}}
            and spec.get("persistentVolumeClaimRetentionPolicy") == {"whenDeleted": "Retain",
                                                                     "whenScaled": "Retain"}
            and spec.get("revisionHistoryLimit") == 10
            and claim.get("apiVersion") == "v1" and claim.get("kind") == "PersistentVolumeClaim"
            and claim.get("spec", {}).get("volumeMode") == "Filesystem"
            and claim.get("status") == {"phase": "Pending"}
            and sts.get("status") == {"replicas": 0, "availableReplicas": 0},
            json.dumps(sts)[:1500])
    tmpl = spec.get("template", {}).get("spec", {})
    t.check("a template's pod spec is defaulted as a template (no enableServiceLinks)",
            tmpl.get("dnsPolicy") == "ClusterFirst" and tmpl.get("schedulerName") == "default-scheduler"
            and "enableServiceLinks" not in tmpl
            and tmpl.get("containers", [{}])[0].get("terminationMessagePolicy") == "File", tmpl)

    job = get("/apis/batch/v1/namespaces/default/jobs/pi")
    uid = job.get("metadata", {}).get("uid")
    jspec = job.get("spec", {})
    labels = jspec.get("template", {}).get("metadata", {}).get("labels", {})
    t.check("a job gets kube's generated selector and pod labels",
            jspec.get("selector") == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            and labels == {"batch.kubernetes.io/controller-uid": uid,
                           "batch.kubernetes.io/job-name": "pi", "controller-uid": uid,
                           "job-name": "pi"}
            and job["metadata"].get("labels") == labels
            and jspec.get("completions") == 1 and jspec.get("parallelism") == 1
            and jspec.get("backoffLimit") == 6 and jspec.get("completionMode") == "NonIndexed"
            and jspec.get("suspend") is False
            and jspec.get("podReplacementPolicy") == "TerminatingOrFailed", json.dumps(job)[:1500])

    rc = get("/api/v1/namespaces/default/replicationcontrollers/legacy")
    t.check("a replication controller is labelled like its template",
            rc.get("metadata", {}).get("labels") == {"app": "legacy", "tier": "back"}
            and rc.get("status") == {"replicas": 0}, rc)
    cj = get("/apis/batch/v1/namespaces/default/cronjobs/nightly")
    t.check("a cron job gets its policy, suspend and history limits",
            {k: cj.get("spec", {}).get(k) for k in ("concurrencyPolicy", "suspend",
                                                    "successfulJobsHistoryLimit",
                                                    "failedJobsHistoryLimit")}
            == {"concurrencyPolicy": "Allow", "suspend": False, "successfulJobsHistoryLimit": 3,
                "failedJobsHistoryLimit": 1}, cj.get("spec"))
    ds = get("/apis/apps/v1/namespaces/default/daemonsets/agent")
    t.check("a daemon set rolls one pod at a time",
            ds.get("spec", {}).get("updateStrategy") == {
                "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
            and ds.get("status") == {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                                     "desiredNumberScheduled": 0, "numberReady": 0}, ds)
    pv = get("/api/v1/persistentvolumes/pv1")
    t.check("a volume starts Pending with Retain and Filesystem",
            pv.get("spec", {}).get("persistentVolumeReclaimPolicy") == "Retain"
            and pv.get("spec", {}).get("volumeMode") == "Filesystem"
            and pv.get("status", {}).get("phase") == "Pending"
            and "lastPhaseTransitionTime" in pv.get("status", {}), pv)
    lr = get("/api/v1/namespaces/default/limitranges/defaults")
    item = lr.get("spec", {}).get("limits", [{}])[0]
    t.check("a limit range's container item gets default and defaultRequest",
            item.get("default") == {"cpu": "2"}
            and item.get("defaultRequest") == {"cpu": "2", "memory": "64Mi"}, item)
    drv = get("/apis/storage.k8s.io/v1/csidrivers/hostpath.csi.k8s.io")
    t.check("a CSI driver gets kube's defaults", drv.get("spec") == {
        "attachRequired": False, "podInfoOnMount": True, "storageCapacity": False,
        "fsGroupPolicy": "ReadWriteOnceWithFSType", "volumeLifecycleModes": ["Persistent", "Ephemeral"],
        "requiresRepublish": False, "seLinuxMount": False}, drv.get("spec"))
    pdb = get("/apis/policy/v1/namespaces/default/poddisruptionbudgets/web-pdb")
    t.check("a disruption budget starts with kube's zero status", pdb.get("status") == {
        "disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
        pdb.get("status"))
    for path in ["/apis/apps/v1/namespaces/default/deployments/web",
                 "/apis/batch/v1/namespaces/default/cronjobs/nightly",
                 "/api/v1/namespaces/default/resourcequotas/compute"]:
        status = get(path).get("status")
        t.check(f"{path.rsplit('/', 2)[1]} start with an empty status, as Go writes it",
                status == {}, status)
    va = get("/apis/storage.k8s.io/v1/volumeattachments/va1")
    t.check("a volume attachment starts detached", va.get("status") == {"attached": False}, va)

    def create(path, obj):
        status, body = server.request("POST", path, body=json.dumps(obj),
                                      headers={"Content-Type": "application/json"})
        return body if status == 201 else {"error": status, "body": body}

    # The zeros Go writes as null: a list without omitempty (and one sent empty), times that
    # are no pointers.
    role = create("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
                  {"metadata": {"name": "empty"}})
    t.check("a Role without rules reads back rules: null", "rules" in role and role["rules"] is None,
            role)
    event = create("/api/v1/namespaces/default/events",
                   {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p"},
                    "reason": "Tested"})
    t.check("an event's unset times read back null",
            all(k in event and event[k] is None
                for k in ("firstTimestamp", "lastTimestamp", "eventTime")), event)
    deploy = get("/apis/apps/v1/namespaces/default/deployments/web")
    t.check("a template's metadata has no creationTimestamp (omitzero since 1.34)",
            "creationTimestamp" not in deploy.get("spec", {}).get("template", {}).get("metadata", {"x": 1}),
            deploy.get("spec", {}).get("template", {}).get("metadata"))
    # Pod-level resources: requests from the containers (cpu) and the pod's limits (memory).
    pod = create("/api/v1/namespaces/default/pods", {
        "metadata": {"name": "sized"},
        "spec": {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
                 "containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "250m"}}},
                                {"name": "b", "image": "x", "resources": {"limits": {"cpu": "0.5"}}}]}})
    t.check("a pod's pod-level requests are defaulted as kube 1.34 defaults them",
            pod.get("spec", {}).get("resources") == {"limits": {"cpu": "2", "memory": "1Gi"},
                                                     "requests": {"cpu": "750m", "memory": "1Gi"}},
            pod.get("spec", pod))
    crd = create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
        "metadata": {"name": "gizmos.zero.example.com"},
        "spec": {"group": "zero.example.com", "scope": "Namespaced",
                 "names": {"plural": "gizmos", "kind": "Gizmo"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]},
        "status": {"acceptedNames": {"plural": "forged", "kind": "Forged"}}})
    t.check("a new CustomResourceDefinition answers with kube's zero status",
            crd.get("status") == {"acceptedNames": {"plural": "", "kind": ""},
                                  "storedVersions": ["v1"]}, crd.get("status", crd))


def check_protobuf_get(t, server):
    """Issue #30: built-in objects, their lists (cached and paged), writes' answers and Statuses
    in kube's protobuf form, read back with protoc's own wire decoder; what has no protobuf form
    falls back to JSON when the client accepts it."""
    pb = "application/vnd.kubernetes.protobuf"
    status, body = server.request("GET", "/apis/apps/v1/namespaces/default/deployments/web",
                                  headers={"Accept": pb}, raw=True)
    t.check("a GET asking for protobuf gets kube's k8s\\0 envelope",
            status == 200 and isinstance(body, bytes) and body[:4] == b"k8s\x00", body[:40])
    protoc = shutil.which("protoc")
    if protoc and status == 200:
        p = subprocess.run([protoc, "--decode_raw"], input=body[4:], capture_output=True, timeout=30)
        text = p.stdout.decode(errors="replace")
        # runtime.Unknown {typeMeta 1 {apiVersion 1, kind 2}, raw 2 {Deployment: metadata 1
        # {name 1}, spec 2 {replicas 1}}}, kube's generated.proto numbers.
        t.check("protoc reads it: Unknown's typeMeta, then the Deployment's metadata.name",
                p.returncode == 0 and '1: "apps/v1"' in text and '2: "Deployment"' in text
                and '1: "web"' in text, text[:600])
    def decoded(body):
        """protoc's reading of a protobuf answer (its envelope after the magic), or None."""
        if not protoc or not isinstance(body, bytes) or body[:4] != b"k8s\x00":
            return None
        p = subprocess.run([protoc, "--decode_raw"], input=body[4:], capture_output=True, timeout=30)
        return p.stdout.decode(errors="replace") if p.returncode == 0 else None

    cms = "/api/v1/namespaces/default/configmaps"
    for name in ("pb-1", "pb-2"):
        server.request("POST", cms, body=json.dumps({"metadata": {"name": name}, "data": {"k": name}}),
                       headers={"Content-Type": "application/json"})
    status, whole = server.request("GET", cms)
    names = [i["metadata"]["name"] for i in whole["items"]]
    status, body = server.request("GET", cms, headers={"Accept": pb}, raw=True)
    text = decoded(body)
    t.check("a list in protobuf: a ConfigMapList envelope", status == 200 and body[:4] == b"k8s\x00",
            body[:80])
    if protoc:
        # Unknown {typeMeta {apiVersion, kind}, raw {ListMeta 1 {resourceVersion 2}, items 2
        # {ObjectMeta 1 {name 1}}}}: every item's name, in the JSON list's order.
        positions = [text.find(f'1: "{n}"') for n in names] if text else [-1]
        t.check("protoc reads it: ConfigMapList, its resourceVersion and every item in order",
                text is not None and '2: "ConfigMapList"' in text and
                f'2: "{whole["metadata"]["resourceVersion"]}"' in text and
                -1 not in positions and positions == sorted(positions), (text or "")[:800])
    status, body = server.request("GET", cms + "?limit=1", headers={"Accept": pb}, raw=True)
    text = decoded(body)
    status_json, page = server.request("GET", cms + "?limit=1")
    t.check("a page of a list in protobuf carries its continue token (ListMeta field 3)",
            status == 200 and (not protoc or (text is not None and
                                              f'3: "{page["metadata"]["continue"]}"' in text)),
            (text or str(body[:80]))[:600])
    status, body = server.request("GET", cms + "/absent", headers={"Accept": pb}, raw=True)
    text = decoded(body)
    t.check("an error is kube's Status in protobuf (reason NotFound, code 404)",
            status == 404 and body[:4] == b"k8s\x00" and
            (not protoc or (text is not None and '2: "Status"' in text and '4: "NotFound"' in text
                            and "6: 404" in text)), (text or str(body[:200]))[:600])
    # Refused before the endpoint (a token nobody issued): the filters' Status in protobuf too.
    status, body = server.request("GET", cms, headers={"Accept": pb, "Authorization": "Bearer nobody"},
                                  raw=True)
    text = decoded(body)
    t.check("a refusal before the endpoint (401) is a Status in protobuf",
            status == 401 and body[:4] == b"k8s\x00" and
            (not protoc or (text is not None and '4: "Unauthorized"' in text and "6: 401" in text)),
            (text or str(body[:200]))[:600])
    status, body = server.request("POST", cms, body=json.dumps({"metadata": {"name": "pb-answer"}}),
                                  headers={"Accept": pb + ", application/json",
                                           "Content-Type": "application/json"}, raw=True)
    t.check("a create's answer in protobuf when the client accepts JSON too (Go's clients)",
            status == 201 and body[:4] == b"k8s\x00" and
            (not protoc or '1: "pb-answer"' in (decoded(body) or "")), body[:80])
    status, body = server.request("POST", cms, body=json.dumps({"metadata": {"name": "pb-only"}}),
                                  headers={"Accept": pb, "Content-Type": "application/json"},
                                  raw=True)
    t.check("a write accepting protobuf alone is 406 before anything is written",
            status == 406 and server.request("GET", cms + "/pb-only")[0] == 404, (status, body[:200]))
    status, body = server.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                  headers={"Accept": pb + ", application/json"})
    t.check("a list whose objects have no protobuf form here falls back to JSON",
            status == 200 and isinstance(body, dict) and
            body.get("kind") == "CustomResourceDefinitionList", str(body)[:200])
    # A watch in protobuf: length-prefixed WatchEvents, each object in its envelope.
    status, listed = server.request("GET", cms)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    conn.request("GET", f"{cms}?watch=1&resourceVersion={listed['metadata']['resourceVersion']}",
                 headers={"Accept": pb + ", application/json"})
    resp = conn.getresponse()
    t.check("a watch asked for in protobuf is kube's protobuf stream",
            resp.status == 200 and
            resp.getheader("Content-Type") == pb + ";stream=watch", resp.getheaders())
    server.request("POST", cms, body=json.dumps({"metadata": {"name": "pbw"}, "data": {"a": "1"}}),
                   headers={"Content-Type": "application/json"})
    server.request("PATCH", cms + "/pbw", body=json.dumps({"data": {"a": "2"}}),
                   headers={"Content-Type": "application/merge-patch+json"})
    server.request("DELETE", cms + "/pbw")
    events = []
    for _ in range(3):
        length = int.from_bytes(resp.read(4), "big")
        events.append(resp.read(length))
    conn.close()
    if protoc:
        texts = []
        for e in events:
            p = subprocess.run([protoc, "--decode_raw"], input=e, capture_output=True, timeout=30)
            texts.append(p.stdout.decode(errors="replace") if p.returncode == 0 else "")
        # WatchEvent {type 1, object 2 {raw 1: "k8s\0" + Unknown {typeMeta, raw {ConfigMap}}}}:
        # protoc shows the raw bytes (they start with the magic) as a string.
        ok = [texts[i].startswith(f'1: "{kind}"') and "pbw" in texts[i] and "ConfigMap" in texts[i]
              for i, kind in enumerate(("ADDED", "MODIFIED", "DELETED"))]
        t.check("protoc reads each frame: ADDED, MODIFIED, DELETED of the ConfigMap", all(ok),
                texts)
    # The envelope inside each event is the object's protobuf form, as a GET answers it.
    t.check("each event's object is the \"k8s\\0\" envelope of a ConfigMap",
            all(b"k8s\x00" in e and b"ConfigMap" in e and b"pbw" in e for e in events),
            [e[:60] for e in events])
    gizmos = "/apis/zero.example.com/v1/namespaces/default/gizmos"
    deadline = time.monotonic() + 20
    while server.request("GET", gizmos)[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    status, body = server.request("GET", gizmos, headers={"Accept": pb + ", application/json"})
    t.check("... and so does an empty list of custom resources (kube serves them as JSON)",
            status == 200 and isinstance(body, dict) and body.get("kind") == "GizmoList",
            str(body)[:200])


def check_generations(t, server):
    """metadata.generation as each kind's strategy in kube-apiserver 1.32 counts it."""
    merge = {"Content-Type": "application/merge-patch+json"}

    def generation(method, path, body=None):
        status, obj = server.request(method, path, body=None if body is None else json.dumps(body),
                                     headers=merge if method == "PATCH" else
                                     {"Content-Type": "application/json"})
        if status not in (200, 201):
            return f"{status} {obj}"
        return obj.get("metadata", {}).get("generation")

    cms = "/api/v1/namespaces/default/configmaps"
    t.check("a ConfigMap counts no generation",
            generation("POST", cms, {"metadata": {"name": "gen"}, "data": {"a": "1"}}) is None)
    t.check("not after a change of its data either",
            generation("PATCH", cms + "/gen", {"data": {"a": "2"}}) is None)
    t.check("a generation a client sends with a ConfigMap is kept, as kube keeps it",
            generation("POST", cms, {"metadata": {"name": "gen2", "generation": 7}}) == 7)
    t.check("and an update cannot change it",
            generation("PATCH", cms + "/gen2", {"metadata": {"generation": 9}}) == 7)
    svc = "/api/v1/namespaces/default/services"
    t.check("a Service counts none", generation("POST", svc, {
        "metadata": {"name": "gen"}, "spec": {"ports": [{"port": 80}]}}) is None)
    deploy = "/apis/apps/v1/namespaces/default/deployments"
    template = {"metadata": {"labels": {"app": "gen"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    t.check("a Deployment starts at generation 1", generation("POST", deploy, {
        "metadata": {"name": "gen"},
        "spec": {"selector": {"matchLabels": {"app": "gen"}}, "template": template}}) == 1)
    t.check("a label is no new generation",
            generation("PATCH", deploy + "/gen", {"metadata": {"labels": {"x": "1"}}}) == 1)
    t.check("a spec change is", generation("PATCH", deploy + "/gen", {"spec": {"replicas": 4}}) == 2)
    eps = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
    t.check("an EndpointSlice starts at generation 1", generation("POST", eps, {
        "metadata": {"name": "gen"}, "addressType": "IPv4", "endpoints": []}) == 1)
    t.check("its labels count", generation("PATCH", eps + "/gen", {"metadata": {"labels": {"x": "1"}}}) == 2)
    t.check("its annotations do not",
            generation("PATCH", eps + "/gen", {"metadata": {"annotations": {"x": "1"}}}) == 2)
    t.check("its endpoints do", generation("PATCH", eps + "/gen", {
        "endpoints": [{"addresses": ["10.0.0.9"]}]}) == 3)
    drivers = "/apis/storage.k8s.io/v1/csidrivers"
    t.check("a CSIDriver is created without a generation",
            generation("POST", drivers, {"metadata": {"name": "gen.csi.example.com"},
                                        "spec": {"attachRequired": True}}) is None)
    t.check("and counts from its first spec change", generation(
        "PATCH", drivers + "/gen.csi.example.com", {"spec": {"requiresRepublish": True}}) == 1)


def check_list_files(t, server, kc, write):
    """A `kind: List` file, as `kubectl get -o yaml` writes one: kubectl validates its items with
    the OpenAPI v2 models (/openapi/v2, protobuf) before it creates them."""
    status, body = server.request("GET", "/openapi/v2")
    defs = body.get("definitions", {}) if status == 200 else {}
    t.check("/openapi/v2 serves the kinds' definitions",
            defs.get("io.k8s.api.core.v1.ConfigMap", {}).get("x-kubernetes-group-version-kind") ==
            [{"group": "", "kind": "ConfigMap", "version": "v1"}], status)
    config_map = defs.get("io.k8s.api.core.v1.ConfigMap", {})
    t.check("with kube's descriptions (its doc comments)",
            config_map.get("description") == "ConfigMap holds configuration data for pods to consume."
            and config_map.get("properties", {}).get("immutable", {}).get("description") ==
            "Immutable, if set to true, ensures that data stored in the ConfigMap cannot be updated "
            "(only object metadata can be modified). If not set to true, the field can be modified "
            "at any time. Defaulted to nil.", config_map)
    ops = body.get("paths", {}) if status == 200 else {}
    listing = ops.get("/api/v1/namespaces/{namespace}/configmaps", {}).get("get", {})
    limit = [p for p in listing.get("parameters", []) if p.get("name") == "limit"]
    t.check("/openapi/v2 lists kube's operations with their parameters and descriptions",
            listing.get("operationId") == "listCoreV1NamespacedConfigMap"
            and listing.get("description") == "list or watch objects of kind ConfigMap"
            and listing.get("tags") == ["core_v1"] and listing.get("x-kubernetes-action") == "list"
            and listing.get("responses", {}).get("200", {}).get("schema") ==
            {"$ref": "#/definitions/io.k8s.api.core.v1.ConfigMapList"}
            and limit and limit[0].get("type") == "integer" and limit[0].get("in") == "query"
            and limit[0].get("description", "").startswith("limit is a maximum number of responses"),
            json.dumps(listing)[:800])
    scale = ops.get("/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", {})
    t.check("subresources too: a Deployment's scale is patched as autoscaling/v1 Scale",
            scale.get("patch", {}).get("operationId") == "patchAppsV1NamespacedDeploymentScale"
            and scale.get("patch", {}).get("x-kubernetes-group-version-kind") ==
            {"group": "autoscaling", "kind": "Scale", "version": "v1"}, json.dumps(scale)[:600])
    refs = set(re.findall(r'"\$ref": ?"#/definitions/([^"]+)"', json.dumps(body)))
    t.check("every reference of /openapi/v2 names a definition it has",
            refs and not sorted(refs - set(defs)), sorted(refs - set(defs))[:10])
    status, v3 = server.request("GET", "/openapi/v3/apis/rbac.authorization.k8s.io/v1")
    binding = v3.get("paths", {}).get(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings/{name}", {})
    refs = set(re.findall(r'"\$ref": ?"#/components/schemas/([^"]+)"', json.dumps(v3)))
    t.check("and /openapi/v3 per group-version, every reference resolved",
            binding.get("put", {}).get("operationId") == "replaceRbacAuthorizationV1NamespacedRoleBinding"
            and refs and not sorted(refs - set(v3.get("components", {}).get("schemas", {}))),
            (json.dumps(binding)[:300], sorted(refs - set(v3.get("components", {}).get("schemas", {})))[:10]))
    code, out = kc("explain", "deployment.spec.replicas")
    t.check("kubectl explain prints kube's description of a field",
            code == 0 and "Number of desired pods. This is a pointer to distinguish between explicit "
            "zero and not specified. Defaults to 1." in " ".join(out.split()), out)
    code, out = kc("explain", "pods")
    t.check("and of a kind",
            code == 0 and "Pod is a collection of containers that can run on a host." in
            " ".join(out.split()), out[:600])
    kc("create", "configmap", "listed-1", "--from-literal=a=1")
    kc("create", "secret", "generic", "listed-2", "--from-literal=b=2")
    code, text = kc("get", "configmap/listed-1", "secret/listed-2", "-o", "yaml")
    t.check("kubectl get -o yaml of two objects writes a List", code == 0 and "kind: List" in text, text)
    path = write("listed.yaml", text)
    kc("delete", "-f", path)
    code, out = kc("create", "-f", path)
    t.check("kubectl create -f of that List creates both", code == 0 and
            "configmap/listed-1 created" in out and "secret/listed-2 created" in out, out)
    bad = write("bad-list.yaml", """apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: listed-3}, foo: bar}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: listed-4}
  spec: {replicas: three, selector: {matchLabels: {a: b}},
         template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}}
""")
    code, out = kc("create", "-f", bad)
    t.check("kubectl names a List's bad items as kube's v2 models do", code != 0 and
            'unknown field "foo" in io.k8s.api.core.v1.ConfigMap' in out and
            'invalid type for io.k8s.api.apps.v1.DeploymentSpec.replicas: got "string", '
            'expected "integer"' in out, out)


def check_get_all(t, kc):
    code, out = kc("get", "all")
    for name in ["replicationcontroller/legacy", "deployment.apps/web",
                 "replicaset.apps/frontend", "statefulset.apps/db", "daemonset.apps/agent",
                 "job.batch/pi", "cronjob.batch/nightly"]:
        t.check(f"kubectl get all lists {name}", code == 0 and re.search(
            rf"^{re.escape(name)}\s", out, re.M) is not None, out)
    t.check("kubectl get all leaves out kinds outside the category",
            "persistentvolumeclaim/" not in out and "poddisruptionbudget" not in out, out)


def check_scale(t, server, kc):
    cases = [("deployment", "web", "/apis/apps/v1/namespaces/default/deployments", "app=web"),
             ("rs", "frontend", "/apis/apps/v1/namespaces/default/replicasets",
              "app=frontend,tier in (cache,front)"),
             ("sts", "db", "/apis/apps/v1/namespaces/default/statefulsets", "app=db"),
             ("rc", "legacy", "/api/v1/namespaces/default/replicationcontrollers",
              "app=legacy,tier=back")]
    for resource, name, path, selector in cases:
        code, out = kc("scale", resource, name, "--replicas=3")
        t.check(f"kubectl scale {resource} {name} --replicas=3", code == 0 and "scaled" in out, out)
        status, scale = server.request("GET", f"{path}/{name}/scale")
        t.check(f"{resource} Scale: spec.replicas 3 and the selector as a string",
                status == 200 and scale.get("kind") == "Scale"
                and scale.get("apiVersion") == "autoscaling/v1"
                and scale.get("metadata", {}).get("name") == name
                and scale.get("spec") == {"replicas": 3}
                and scale.get("status") == {"replicas": 0, "selector": selector}, scale)
        status, obj = server.request("GET", f"{path}/{name}")
        t.check(f"{resource} {name} has spec.replicas 3 and a new generation",
                obj.get("spec", {}).get("replicas") == 3
                and obj.get("metadata", {}).get("generation") == 2, obj.get("metadata"))
    code, out = kc("scale", "rs", "frontend", "--replicas=-1")
    t.check("a negative scale is refused", code != 0, out)
    # A stale resourceVersion on the Scale is a conflict.
    status, scale = server.request("GET", "/apis/apps/v1/namespaces/default/replicasets/frontend/scale")
    stale = dict(scale, metadata=dict(scale["metadata"], resourceVersion="1"), spec={"replicas": 5})
    status, body = server.request("PUT", "/apis/apps/v1/namespaces/default/replicasets/frontend/scale",
                                  body=stale)
    t.check("a Scale with a stale resourceVersion is a 409", status == 409, f"{status} {body}")


def check_field_selectors(t, kc):
    for args, expect in [(("rs", "--field-selector", "status.replicas=0"), "replicaset.apps/frontend"),
                         (("rc", "--field-selector", "status.replicas!=0"), None),
                         (("jobs", "--field-selector", "status.successful=0"), "job.batch/pi"),
                         (("pv", "--field-selector", "name=pv1"), "persistentvolume/pv1"),
                         (("pvc", "--field-selector", "name=other"), None)]:
        code, out = kc("get", *args, "-o", "name")
        found = out.strip() == (expect or "")
        t.check(f"kubectl get {' '.join(args)}", code == 0 and found, out)
    code, out = kc("get", "rs", "--field-selector", "spec.replicas=1")
    t.check("a field the kind does not select on is refused", code != 0
            and 'field label not supported: spec.replicas' in out, out)


def check_kubectl_create(t, server, kc):
    """kubectl's typed create commands send these kinds as protobuf."""
    for args, created in [
        (("job", "once", "--image=busybox:1.36", "--", "echo", "hi"), "job.batch/once created"),
        (("cronjob", "every5", "--image=busybox:1.36", "--schedule=*/5 * * * *"),
         "cronjob.batch/every5 created"),
        (("job", "now", "--from=cronjob/every5"), "job.batch/now created"),
        (("quota", "small", "--hard=pods=3,requests.cpu=2", "--scopes=BestEffort"),
         "resourcequota/small created"),
        (("poddisruptionbudget", "half", "--selector=app=web", "--min-available=50%"),
         "poddisruptionbudget.policy/half created"),
        (("priorityclass", "low", "--value=0", "--description=best effort"),
         "priorityclass.scheduling.k8s.io/low created"),
        (("ingress", "shop", "--class=nginx", "--rule=shop.example.com/*=web:80,tls=shop-cert"),
         "ingress.networking.k8s.io/shop created"),
    ]:
        code, out = kc("create", *args)
        t.check(f"kubectl create {' '.join(args[:2])}", code == 0 and created in out, out)
    _, job = server.request("GET", "/apis/batch/v1/namespaces/default/jobs/now")
    meta = job.get("metadata", {})
    t.check("a job made from a cron job is owned by it and runs its template",
            meta.get("annotations") == {"cronjob.kubernetes.io/instantiate": "manual"}
            and [r.get("name") for r in meta.get("ownerReferences", [])] == ["every5"]
            and job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure", job)
    _, ing = server.request("GET", "/apis/networking.k8s.io/v1/namespaces/default/ingresses/shop")
    t.check("an ingress from kubectl create has its rule, backend and TLS", ing.get("spec") == {
        "ingressClassName": "nginx",
        "rules": [{"host": "shop.example.com", "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}],
        "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-cert"}]}, ing.get("spec"))
    _, pc = server.request("GET", "/apis/scheduling.k8s.io/v1/priorityclasses/low")
    t.check("a priority class of value 0 keeps its value", pc.get("value") == 0
            and pc.get("description") == "best effort", pc)
    _, pdb = server.request("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/half")
    t.check("a disruption budget from kubectl create", pdb.get("spec") == {
        "minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}, pdb.get("spec"))


def apply_text(kc, write, name, text):
    return kc("apply", "-f", write(name + ".yaml", text))


def check_events_v1(t, server, kc):
    """events.k8s.io/v1 Events are core Events in storage, each readable as the other."""
    v1 = "/apis/events.k8s.io/v1/namespaces/default/events"
    core = "/api/v1/namespaces/default/events"
    status, created = server.request("POST", v1, body={
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "scaled"},
        "eventTime": "2026-11-23T10:00:00.000000Z", "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-1", "action": "Scale", "reason": "Scaled", "note": "up to 3",
        "type": "Normal", "regarding": {"kind": "Deployment", "name": "web", "namespace": "default",
                                        "apiVersion": "apps/v1"}})
    t.check("events.k8s.io/v1: create an Event", status == 201 and created.get("note") == "up to 3",
            created)
    status, as_core = server.request("GET", f"{core}/scaled")
    t.check("and read it as a core Event (message, involvedObject, reportingComponent)",
            status == 200 and as_core.get("message") == "up to 3"
            and as_core.get("involvedObject", {}).get("name") == "web"
            and as_core.get("reportingComponent") == "example.com/ctl"
            and as_core["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"],
            as_core)
    server.request("POST", core, body={
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "started"},
        "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started", "message": "hello",
        "type": "Normal", "count": 2})
    status, as_v1 = server.request("GET", f"{v1}/started")
    t.check("a core Event read as events.k8s.io/v1 (note, regarding, deprecatedCount)",
            status == 200 and as_v1.get("apiVersion") == "events.k8s.io/v1"
            and as_v1.get("note") == "hello" and as_v1.get("deprecatedCount") == 2
            and "message" not in as_v1, as_v1)
    status, listed = server.request("GET", v1)
    t.check("events.k8s.io/v1 lists both", status == 200 and
            {"scaled", "started"} <= {i["metadata"]["name"] for i in listed.get("items", [])}, listed)
    rc, out = kc("get", "events.events.k8s.io")
    t.check("kubectl get events.events.k8s.io", rc == 0 and "deployment/web" in out
            and "up to 3" in out and "pod/p" in out, out)


def check_mistakes(t, server, kc, write):
    typo = CORPUS["job"].replace("name: pi}", "name: typo}").replace(
        "template:", "backoffLimt: 3\n  template:")
    code, out = apply_text(kc, write, "typo", typo)
    t.check("Strict: a typo'd field is refused with kube's strict decoding error", code != 0
            and 'Job in version "v1" cannot be handled as a Job: strict decoding error: '
                'unknown field "spec.backoffLimt"' in out, out)

    wrong = CORPUS["sts"].replace("name: db}", "name: wrong}").replace("replicas: 1", 'replicas: "two"')
    code, out = apply_text(kc, write, "wrong", wrong)
    t.check("a value of the wrong type is refused as a decoding error", code != 0
            and 'StatefulSet in version "v1" cannot be handled as a StatefulSet' in out
            and "spec.replicas" in out, out)

    cases = [
        ("rs", CORPUS["rs"].replace("name: frontend}", "name: mismatch}").replace(
            "labels: {app: frontend, tier: front}", "labels: {app: backend, tier: front}"),
         "ReplicaSet.apps", "mismatch", "spec.template.metadata.labels",
         'Invalid value: map[string]string{"app":"backend", "tier":"front"}: `selector` does not '
         'match template `labels`'),
        ("deploy", CORPUS["deploy"].replace("name: web}", "name: empty}").replace(
            "selector: {matchLabels: {app: web}}", "selector: {}"),
         "Deployment.apps", "empty", "spec.selector",
         "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
         "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for "
         "deployment"),
        ("rc", CORPUS["rc"].replace("name: legacy}", "name: strayrc}").replace(
            "selector: {app: legacy, tier: back}", "selector: {app: other}"),
         "ReplicationController", "strayrc", "spec.template.metadata.labels",
         'Invalid value: map[string]string{"app":"legacy", "tier":"back"}: `selector` does not '
         'match template `labels`'),
        ("ds", CORPUS["ds"].replace("name: agent}", "name: strayds}").replace(
            "labels: {app: agent}", "labels: {app: x}"),
         "DaemonSet.apps", "strayds", "spec.template.metadata.labels",
         'Invalid value: map[string]string{"app":"x"}: `selector` does not match template `labels`'),
        ("job", CORPUS["job"].replace("name: pi}", "name: restarts}").replace(
            "restartPolicy: Never", "restartPolicy: Always"),
         "Job.batch", "restarts", "spec.template.spec.restartPolicy",
         'Unsupported value: "Always": supported values: "OnFailure", "Never"'),
        ("job", CORPUS["job"].replace("name: pi}", "name: picked}").replace(
            "template:", "selector: {matchLabels: {app: pi}}\n  template:\n    metadata: {labels: {app: pi}}"),
         "Job.batch", "picked", "spec.selector",
         "Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"pi\", "),
        ("hpa", CORPUS["hpa"].replace("name: web-hpa}", "name: inverted}").replace(
            "minReplicas: 1", "minReplicas: 5"),
         "HorizontalPodAutoscaler.autoscaling", "inverted", "spec.maxReplicas",
         "Invalid value: 3: must be greater than or equal to `minReplicas`"),
        ("cj", CORPUS["cj"].replace("name: nightly}", "name: badcron}").replace(
            '"0 3 * * *"', '"0 3 * *"'),
         "CronJob.batch", "badcron", "spec.schedule",
         'Invalid value: "0 3 * *": expected exactly 5 fields, found 4: [0 3 * *]'),
    ]
    for key, text, group_kind, name, field, message in cases:
        code, out = apply_text(kc, write, name, text)
        t.check(f"kubectl apply refuses {name}: {field}", code != 0
                and f'The {group_kind.split(".")[0]} "{name}" is invalid' in out
                and f"{field}: {message}" in out, out)
        obj = yaml.safe_load(text)
        path = next(p for r, n, p, *_ in GETS if r.startswith(obj["kind"].lower()))
        status, body = server.request("POST", path, body=obj)
        causes = body.get("details", {}).get("causes", []) if isinstance(body, dict) else []
        t.check(f"{name}: 422 Invalid with a cause at {field}",
                status == 422 and body.get("reason") == "Invalid"
                and body.get("message", "").startswith(f'{group_kind} "{name}" is invalid: ')
                and any(c.get("field") == field and c.get("message", "").startswith(message)
                        for c in causes), f"{status} {body}")


def check_updates(t, server, kc, write):
    """Fields kube does not let an update change."""
    moved = CORPUS["deploy"].replace("{app: web}", "{app: web2}")
    code, out = apply_text(kc, write, "deploy-moved", moved)
    t.check("a deployment's selector is immutable", code != 0 and
            'The Deployment "web" is invalid: spec.selector: Invalid value: v1.LabelSelector{'
            'MatchLabels:map[string]string{"app":"web2"}, '
            'MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable' in out, out)
    moved = CORPUS["rs"].replace("matchLabels: {app: frontend}", "matchLabels: {app: frontend, v: '2'}") \
        .replace("labels: {app: frontend, tier: front}", "labels: {app: frontend, tier: front, v: '2'}")
    code, out = apply_text(kc, write, "rs-moved", moved)
    t.check("a replica set's selector is immutable", code != 0
            and "spec.selector: Invalid value: v1.LabelSelector{" in out
            and "field is immutable" in out, out)

    renamed = CORPUS["sts"].replace("serviceName: db", "serviceName: db2")
    code, out = apply_text(kc, write, "sts-renamed", renamed)
    t.check("a stateful set's serviceName may not change", code != 0 and
            'The StatefulSet "db" is invalid: spec: Forbidden: updates to statefulset spec for '
            "fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
            "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden" in out, out)
    retemplated = CORPUS["sts"].replace("postgres:16", "postgres:17")
    code, out = apply_text(kc, write, "sts-image", retemplated)
    t.check("a stateful set's template may change", code == 0 and "configured" in out, out)

    resized = CORPUS["pvc"].replace("[ReadWriteOnce]", "[ReadWriteMany]")
    code, out = apply_text(kc, write, "pvc-modes", resized)
    t.check("a claim's access modes may not change", code != 0 and
            'The PersistentVolumeClaim "data" is invalid: spec: Forbidden: spec is immutable after '
            "creation except resources.requests and volumeAttributesClassName for bound claims" in out,
            out)
    grown = CORPUS["pvc"].replace("storage: 1Gi", "storage: 2Gi")
    code, out = apply_text(kc, write, "pvc-grown", grown)
    t.check("a claim that is not bound may not grow", code != 0 and "spec is immutable" in out, out)
    status, _ = server.request("PATCH", "/api/v1/namespaces/default/persistentvolumeclaims/data/status",
                               body={"status": {"phase": "Bound"}},
                               headers={"Content-Type": "application/merge-patch+json"})
    code, out = apply_text(kc, write, "pvc-grown-bound", grown)
    t.check("a bound claim may grow", status == 200 and code == 0 and "configured" in out,
            f"{status} {out}")
    code, out = apply_text(kc, write, "pvc-shrunk", CORPUS["pvc"].replace("storage: 1Gi", "storage: 1500Mi"))
    t.check("but not shrink", code != 0 and "spec.resources.requests.storage: Forbidden: field can "
            "not be less than previous value" in out, out)

    frozen = """apiVersion: v1
kind: ConfigMap
metadata: {name: frozen}
immutable: true
data: {mode: fast}
"""
    code, out = apply_text(kc, write, "frozen", frozen)
    t.check("an immutable config map is created", code == 0, out)
    code, out = apply_text(kc, write, "frozen2", frozen.replace("mode: fast", "mode: slow"))
    t.check("an immutable config map's data may not change", code != 0 and
            'The ConfigMap "frozen" is invalid: data: Forbidden: field is immutable when '
            "`immutable` is set" in out, out)
    code, out = kc("patch", "configmap", "frozen", "--type", "merge", "-p", '{"immutable":false}')
    t.check("nor may it become mutable again", code != 0 and
            "immutable: Forbidden: field is immutable when `immutable` is set" in out, out)
    code, out = kc("label", "configmap", "frozen", "team=a")
    t.check("its labels may still change", code == 0, out)
    secret = """apiVersion: v1
kind: Secret
metadata: {name: sealed}
immutable: true
stringData: {password: one}
"""
    code, out = apply_text(kc, write, "sealed", secret)
    t.check("an immutable secret is created", code == 0, out)
    code, out = apply_text(kc, write, "sealed2", secret.replace("password: one", "password: two"))
    t.check("an immutable secret's stringData may not change", code != 0 and
            "data: Forbidden: field is immutable when `immutable` is set" in out, out)

    pod = """apiVersion: v1
kind: Pod
metadata: {name: p1}
spec:
  containers:
  - {name: c, image: "nginx:1.25", ports: [{containerPort: 80}]}
"""
    code, out = apply_text(kc, write, "pod", pod)
    t.check("a pod is created", code == 0, out)
    code, out = apply_text(kc, write, "pod-image", pod.replace("nginx:1.25", "nginx:1.26"))
    t.check("a pod's image may change", code == 0 and "configured" in out, out)
    code, out = apply_text(kc, write, "pod-port", pod.replace("containerPort: 80", "containerPort: 81"))
    t.check("a pod's ports may not change", code != 0 and
            'The Pod "p1" is invalid: spec: Forbidden: pod updates may not change fields other than '
            "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
            "`spec.tolerations` (only additions to existing tolerations),"
            "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
            "negative)" in out, out)
    status, current = server.request("GET", "/api/v1/namespaces/default/pods/p1")
    replaced = dict(current)
    replaced["spec"] = dict(current["spec"])
    replaced["spec"].pop("tolerations", None)
    replaced["spec"].pop("priority", None)
    status, body = server.request("PUT", "/api/v1/namespaces/default/pods/p1", body=replaced)
    t.check("a PUT that leaves out what admission added keeps it (priority, tolerations)",
            status == 200 and body["spec"].get("priority") == 0
            and len(body["spec"].get("tolerations", [])) == 2, f"{status} {body}")

    job = server.request("GET", "/apis/batch/v1/namespaces/default/jobs/pi")[1]
    job["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": "other"}}
    status, body = server.request("PUT", "/apis/batch/v1/namespaces/default/jobs/pi", body=job)
    fields = [c.get("field") for c in body.get("details", {}).get("causes", [])]
    t.check("a job's selector is immutable", status == 422 and "spec.selector" in fields
            and any(c.get("message", "").endswith("field is immutable")
                    for c in body["details"]["causes"]), f"{status} {body}")

    status, sts = server.request("GET", "/apis/apps/v1/namespaces/default/statefulsets/db")
    t.check("the refused updates left the stateful set as it was",
            status == 200 and sts["spec"]["serviceName"] == "db"
            and sts["spec"]["template"]["spec"]["containers"][0]["image"] == "postgres:17",
            sts.get("spec"))


if __name__ == "__main__":
    main()
