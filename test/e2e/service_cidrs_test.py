"""networking.k8s.io/v1 ServiceCIDRs and IPAddresses as kube 1.34 keeps them: the `kubernetes`
ServiceCIDR from --service-cluster-ip-range with its finalizer and Ready condition, an IPAddress
per cluster IP (created with the Service, deleted with it, none on a dry run), a ServiceCIDR an
administrator adds widening what Services may ask for, one being deleted kept while a Service
holds an address only it covers (Ready False, Terminating), kube's refusals word for word, and
an IPAddress deleted by hand recreated at the next start.

Usage: service_cidrs_test.py <path to kwatch-apiserver>
"""
import json
import os
import sys

from harness import Checks, Server, TempDir, kubectl_runner, wait_for

GROUP = "/apis/networking.k8s.io/v1"
SVCS = "/api/v1/namespaces/default/services"


def service(name, **spec):
    spec.setdefault("ports", [{"port": 80}])
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


def message(body):
    return body.get("message", "") if isinstance(body, dict) else str(body)


def get(server, path):
    status, body = server.request("GET", path)
    return body if status == 200 else None


def ready_condition(cidr):
    for c in (cidr or {}).get("status", {}).get("conditions", []):
        if c.get("type") == "Ready":
            return c
    return None


def default_range(t, server):
    cidr = wait_for(lambda: (lambda c: c if ready_condition(c) else None)(
        get(server, f"{GROUP}/servicecidrs/kubernetes")), what="the default ServiceCIDR's Ready")
    t.check("the kubernetes ServiceCIDR holds --service-cluster-ip-range",
            cidr["spec"] == {"cidrs": ["10.0.0.0/24"]}, cidr)
    t.check("it carries kube's finalizer",
            cidr["metadata"].get("finalizers") == ["networking.k8s.io/service-cidr-finalizer"], cidr)
    cond = ready_condition(cidr)
    t.check("and a True Ready condition", cond["status"] == "True"
            and cond["message"] == "Kubernetes Service CIDR is ready", cond)
    ip = get(server, f"{GROUP}/ipaddresses/10.0.0.1")
    t.check("the kubernetes Service's address is an IPAddress pointing at it",
            ip is not None and ip["spec"]["parentRef"] == {
                "resource": "services", "namespace": "default", "name": "kubernetes"}
            and ip["metadata"]["labels"] == {"ipaddress.kubernetes.io/ip-family": "IPv4",
                                             "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"},
            ip)


def addresses_follow_services(t, server):
    status, svc = server.request("POST", SVCS, body=service("web"))
    t.check("a Service is created", status == 201, svc)
    ip = svc.get("spec", {}).get("clusterIP", "")
    held = get(server, f"{GROUP}/ipaddresses/{ip}")
    t.check("its cluster IP is an IPAddress naming it",
            held is not None and held["spec"]["parentRef"]["name"] == "web", held)
    status, body = server.request("POST", SVCS, body=service("web2", clusterIP=ip))
    t.check("another Service asking for it is refused as kube words it",
            status == 422 and message(body) == (
                f'Service "web2" is invalid: spec.clusterIPs: Invalid value: []string{{"{ip}"}}: '
                f"failed to allocate IP {ip}: provided IP is already allocated"), body)
    status, _ = server.request("DELETE", f"{SVCS}/web")
    t.check("the Service is deleted", status == 200)
    t.check("and its IPAddress with it",
            wait_for(lambda: server.request("GET", f"{GROUP}/ipaddresses/{ip}")[0] == 404,
                     what="the IPAddress's deletion"))
    status, body = server.request("GET", f"{GROUP}/ipaddresses")
    before = len(body["items"])
    status, svc = server.request("POST", SVCS + "?dryRun=All", body=service("dry"))
    t.check("a dry-run create shows an address", status == 201 and svc["spec"].get("clusterIP"), svc)
    status, body = server.request("GET", f"{GROUP}/ipaddresses")
    t.check("and writes no IPAddress", len(body["items"]) == before, body["items"])
    status, body = server.request("POST", SVCS, body=service("far", clusterIP="10.5.0.10"))
    t.check("an address outside every ServiceCIDR is refused as kube words it",
            status == 422 and message(body) == (
                'Service "far" is invalid: spec.clusterIPs: Invalid value: []string{"10.5.0.10"}: '
                "failed to allocate IP 10.5.0.10: the provided network does not match the current "
                "range"), body)
    status, body = server.request("POST", SVCS, body=service("edge", clusterIP="10.0.0.255"))
    t.check("the broadcast address is not in the valid range",
            status == 422 and "the provided IP (10.0.0.255) is not in the valid range. The range "
            "of valid IPs is 10.0.0.0/24" in message(body), body)


def added_range(t, server, kc):
    extra = {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
             "metadata": {"name": "extra"}, "spec": {"cidrs": ["10.5.0.0/24"]}}
    if kc is not None:
        code, out = kc("create", "-f", "-", stdin=json.dumps(extra))
        t.check("kubectl creates a ServiceCIDR", code == 0, out)
    else:
        status, body = server.request("POST", f"{GROUP}/servicecidrs", body=extra)
        t.check("a ServiceCIDR is created", status == 201, body)
    wait_for(lambda: ready_condition(get(server, f"{GROUP}/servicecidrs/extra")),
             what="the added ServiceCIDR's Ready")
    status, svc = wait_for(lambda: (lambda r: r if r[0] == 201 else None)(
        server.request("POST", SVCS, body=service("far", clusterIP="10.5.0.10"))),
        what="an address of the added range")
    t.check("a Service may ask for an address of the added range",
            svc["spec"]["clusterIPs"] == ["10.5.0.10"], svc)
    if kc is not None:
        code, out = kc("get", "servicecidrs")
        lines = out.splitlines()
        t.check("kubectl get servicecidrs shows kube's columns",
                code == 0 and lines[0].split() == ["NAME", "CIDRS", "AGE"]
                and any(line.split()[:2] == ["extra", "10.5.0.0/24"] for line in lines)
                and any(line.split()[:2] == ["kubernetes", "10.0.0.0/24"] for line in lines), out)
        code, out = kc("get", "ipaddresses", "10.5.0.10")
        lines = out.splitlines()
        t.check("kubectl get ipaddresses shows kube's columns",
                code == 0 and lines[0].split() == ["NAME", "PARENTREF"]
                and lines[1].split() == ["10.5.0.10", "services/default/far"], out)
        code, out = kc("get", "ip")
        t.check("`ip` is the short name of ipaddresses", code == 0 and "10.0.0.1" in out, out)

    status, body = server.request("DELETE", f"{GROUP}/servicecidrs/extra")
    t.check("deleting a ServiceCIDR that holds a Service's address is accepted", status == 200, body)
    cidr = wait_for(lambda: (lambda c: c if c and (ready_condition(c) or {}).get("status") == "False"
                             else None)(get(server, f"{GROUP}/servicecidrs/extra")),
                    what="the Terminating condition")
    cond = ready_condition(cidr)
    t.check("it stays, Ready False with reason Terminating",
            cidr["metadata"].get("deletionTimestamp") and cond["reason"] == "Terminating"
            and cond["message"] == "There are still IPAddresses referencing the ServiceCIDR, please "
            "remove them or create a new ServiceCIDR", cidr)
    status, body = server.request("POST", SVCS, body=service("late", clusterIP="10.5.0.11"))
    t.check("a range being deleted gives no new address",
            status == 422 and "the provided network does not match the current range" in message(body),
            body)
    server.request("DELETE", f"{SVCS}/far")
    t.check("once the Service is gone, the ServiceCIDR goes (after kube's 10 s grace)",
            wait_for(lambda: server.request("GET", f"{GROUP}/servicecidrs/extra")[0] == 404,
                     timeout=30, what="the ServiceCIDR's deletion"))


def refusals(t, server):
    status, body = server.request("POST", f"{GROUP}/servicecidrs", body={
        "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "two"},
        "spec": {"cidrs": ["10.6.0.0/24", "10.7.0.0/24"]}})
    t.check("two IPv4 ranges are refused as kube words it",
            status == 422 and message(body) == (
                'ServiceCIDR.networking.k8s.io "two" is invalid: spec.cidrs: Invalid value: '
                '[]string{"10.6.0.0/24", "10.7.0.0/24"}: may specify no more than one IP for each '
                "IP family, i.e 192.168.0.0/24 and 2001:db8::/64"), body)
    status, body = server.request("POST", f"{GROUP}/servicecidrs", body={
        "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "loose"},
        "spec": {"cidrs": ["10.6.0.1/24"]}})
    t.check("a range with host bits is refused",
            status == 422 and "must not have bits set beyond the prefix length" in message(body), body)
    status, body = server.request("PUT", f"{GROUP}/servicecidrs/kubernetes", body=dict(
        get(server, f"{GROUP}/servicecidrs/kubernetes"), spec={"cidrs": ["10.9.0.0/24"]}))
    t.check("a ServiceCIDR's range is immutable",
            status == 422 and 'spec.cidrs[0]: Invalid value: "10.9.0.0/24": field is immutable'
            in message(body), body)
    manual = {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
              "metadata": {"name": "192.168.1.010"},
              "spec": {"parentRef": {"group": "gateway.networking.k8s.io", "resource": "gateways",
                                     "namespace": "default", "name": "gw"}}}
    status, body = server.request("POST", f"{GROUP}/ipaddresses", body=manual)
    t.check("an IPAddress name that is no canonical address is refused",
            status == 422 and 'metadata.name: Invalid value: "192.168.1.010": must not have '
            "leading 0s" in message(body), body)
    manual["metadata"]["name"] = "192.168.1.10"
    status, body = server.request("POST", f"{GROUP}/ipaddresses", body=manual)
    t.check("an IPAddress for another kind of parent is stored", status == 201, body)
    changed = dict(body, spec={"parentRef": dict(manual["spec"]["parentRef"], name="other")})
    status, body = server.request("PUT", f"{GROUP}/ipaddresses/192.168.1.10", body=changed)
    t.check("its parentRef is immutable",
            status == 422 and "spec.parentRef: Invalid value: networking.ParentReference{Group:"
            '"gateway.networking.k8s.io", Resource:"gateways", Namespace:"default", Name:"other"}: '
            "field is immutable" in message(body), body)


def whole_space(t, server):
    status, body = server.request("POST", f"{GROUP}/servicecidrs", body={
        "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "all"},
        "spec": {"cidrs": ["0.0.0.0/0"]}})
    t.check("an administrator may hand out the whole IPv4 space", status == 201, body)
    wait_for(lambda: ready_condition(get(server, f"{GROUP}/servicecidrs/all")),
             what="the whole space's Ready")
    status, svc = server.request("POST", SVCS, body=service("anywhere", clusterIP="203.0.113.7"))
    t.check("an address anywhere is given then", status == 201, svc)
    status, svc = server.request("POST", SVCS, body=service("dynamic-anywhere"))
    t.check("and dynamic ones come from it", status == 201 and svc["spec"]["clusterIP"], svc)
    for name in ("anywhere", "dynamic-anywhere"):
        server.request("DELETE", f"{SVCS}/{name}")
    server.request("DELETE", f"{GROUP}/servicecidrs/all")
    t.check("and it goes once nothing holds an address only it covers",
            wait_for(lambda: server.request("GET", f"{GROUP}/servicecidrs/all")[0] == 404,
                     timeout=30, what="the whole space's deletion"))


def single_stack_refusals(t, server):
    """What a single-stack IPv4 cluster cannot give, in kube's words."""
    status, body = server.request("POST", SVCS, body=service("both", ipFamilyPolicy="RequireDualStack"))
    t.check("RequireDualStack on a single-stack cluster is refused",
            status == 422 and 'spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster '
            "is not configured for dual-stack services" in message(body), body)
    status, body = server.request("POST", SVCS, body=service("six", ipFamilies=["IPv6"]))
    t.check("an IPv6 Service on an IPv4 cluster is refused",
            status == 422 and 'spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this '
            "cluster" in message(body), body)
    status, body = server.request("POST", SVCS, body=service("prefer", ipFamilyPolicy="PreferDualStack"))
    t.check("PreferDualStack gets what there is: one IPv4 address",
            status == 201 and body["spec"]["ipFamilies"] == ["IPv4"]
            and len(body["spec"]["clusterIPs"]) == 1, body)
    status, body = server.request("POST", SVCS, body=service(
        "mismatch", clusterIP="10.0.0.77", clusterIPs=["10.0.0.77"], ipFamilies=["IPv6"]))
    t.check("an address of another family than ipFamilies says is refused",
            status == 422 and "expected an IPv6 value as indicated by `ipFamilies[0]`" in message(body),
            body)
    status, body = server.request("POST", SVCS, body={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "nowhere"},
        "spec": {"type": "ExternalName"}})
    t.check("an ExternalName Service without a name is refused",
            status == 422 and "spec.externalName: Required value" in message(body), body)
    server.request("DELETE", f"{SVCS}/prefer")


def dual_stack(t, binary):
    """--service-cluster-ip-range with an IPv4 and an IPv6 range: Services of either family or
    both, an IPAddress per address, upgrades and downgrades as kube allows them."""
    server = Server(binary, extra_args=["--service-cluster-ip-range=10.96.0.0/24,fd00:10:96::/112"]).start()
    try:
        cidr = wait_for(lambda: get(server, f"{GROUP}/servicecidrs/kubernetes"), what="default ServiceCIDR")
        t.check("dual-stack: the kubernetes ServiceCIDR holds both ranges",
                cidr["spec"]["cidrs"] == ["10.96.0.0/24", "fd00:10:96::/112"], cidr)
        kubernetes = get(server, "/api/v1/namespaces/default/services/kubernetes")
        t.check("dual-stack: the kubernetes Service has the primary range's first address",
                kubernetes["spec"]["clusterIP"] == "10.96.0.1"
                and kubernetes["spec"]["ipFamilies"] == ["IPv4"], kubernetes)
        status, single = server.request("POST", SVCS, body=service("single"))
        t.check("dual-stack: a Service is SingleStack in the primary family by default",
                status == 201 and single["spec"]["ipFamilyPolicy"] == "SingleStack"
                and single["spec"]["ipFamilies"] == ["IPv4"] and len(single["spec"]["clusterIPs"]) == 1,
                single)
        status, both = server.request("POST", SVCS, body=service("both", ipFamilyPolicy="PreferDualStack"))
        ips = both.get("spec", {}).get("clusterIPs", [])
        t.check("dual-stack: PreferDualStack gets an IPv4 and an IPv6 address",
                status == 201 and both["spec"]["ipFamilies"] == ["IPv4", "IPv6"] and len(ips) == 2
                and ":" not in ips[0] and ips[1].startswith("fd00:10:96::"), both)
        six = get(server, f"{GROUP}/ipaddresses/{ips[1]}") if len(ips) == 2 else None
        t.check("dual-stack: the IPv6 address has its IPAddress, labelled IPv6",
                six is not None and six["metadata"]["labels"]["ipaddress.kubernetes.io/ip-family"] == "IPv6"
                and six["spec"]["parentRef"]["name"] == "both", six)
        status, v6 = server.request("POST", SVCS, body=service(
            "six-first", ipFamilyPolicy="RequireDualStack", ipFamilies=["IPv6", "IPv4"]))
        t.check("dual-stack: RequireDualStack with IPv6 first has an IPv6 primary",
                status == 201 and ":" in v6["spec"]["clusterIP"] and len(v6["spec"]["clusterIPs"]) == 2, v6)
        status, asked = server.request("POST", SVCS, body=service(
            "asked", ipFamilyPolicy="RequireDualStack", clusterIP="10.96.0.10",
            clusterIPs=["10.96.0.10", "fd00:10:96::a"]))  # in the static bands
        t.check("dual-stack: addresses asked for in both families are given",
                status == 201 and asked["spec"]["clusterIPs"] == ["10.96.0.10", "fd00:10:96::a"]
                and asked["spec"]["ipFamilies"] == ["IPv4", "IPv6"], asked)
        merge = {"Content-Type": "application/merge-patch+json"}
        status, body = server.request("PATCH", f"{SVCS}/both", body=json.dumps({"spec": {
            "ipFamilyPolicy": "SingleStack", "clusterIPs": ips[:1], "ipFamilies": ["IPv4"]}}),
            headers=merge)
        t.check("dual-stack: a downgrade to SingleStack keeps the primary",
                status == 200 and body["spec"]["clusterIPs"] == ips[:1], body)
        t.check("... and releases the secondary's IPAddress",
                wait_for(lambda: server.request("GET", f"{GROUP}/ipaddresses/{ips[1]}")[0] == 404,
                         what="the released IPv6 address") if len(ips) == 2 else False)
        status, body = server.request("PATCH", f"{SVCS}/single", body=json.dumps(
            {"spec": {"ipFamilyPolicy": "PreferDualStack"}}), headers=merge)
        t.check("dual-stack: an upgrade to PreferDualStack adds an IPv6 address",
                status == 200 and body["spec"]["ipFamilies"] == ["IPv4", "IPv6"]
                and len(body["spec"]["clusterIPs"]) == 2
                and body["spec"]["clusterIPs"][0] == single["spec"]["clusterIPs"][0], body)
        status, body = server.request("PATCH", f"{SVCS}/six-first", body=json.dumps(
            {"spec": {"clusterIPs": [v6["spec"]["clusterIPs"][0]]}}), headers=merge)
        t.check("dual-stack: dropping the secondary without SingleStack is refused",
                status == 422 and "must be 'SingleStack' to release the secondary cluster IP"
                in message(body), body)
        t.check("dual-stack: server alive", server.alive())
    finally:
        server.stop()
    server = Server(binary, extra_args=["--service-cluster-ip-range=fd00:20::/108"]).start()
    try:
        kubernetes = wait_for(lambda: get(server, "/api/v1/namespaces/default/services/kubernetes"),
                              what="the kubernetes Service")
        t.check("IPv6 only: the kubernetes Service is fd00:20::1",
                kubernetes["spec"]["clusterIP"] == "fd00:20::1"
                and kubernetes["spec"]["ipFamilies"] == ["IPv6"], kubernetes)
        status, svc = server.request("POST", SVCS, body=service("web"))
        t.check("IPv6 only: a Service gets an IPv6 address",
                status == 201 and svc["spec"]["clusterIP"].startswith("fd00:20::")
                and svc["spec"]["ipFamilies"] == ["IPv6"], svc)
    finally:
        server.stop()


def repaired_at_start(t, binary, tmp):
    data = os.path.join(tmp, "restart")
    server = Server(binary, data_dir=data).start()
    try:
        status, svc = server.request("POST", SVCS, body=service("kept"))
        ip = svc["spec"]["clusterIP"]
        status, body = server.request("DELETE", f"{GROUP}/ipaddresses/{ip}")
        t.check("an IPAddress can be deleted by hand", status == 200, body)
    finally:
        server.stop()
    server = Server(binary, data_dir=data).start()
    try:
        held = wait_for(lambda: get(server, f"{GROUP}/ipaddresses/{ip}"), timeout=15,
                        what="the repaired IPAddress")
        t.check("the next start gives the Service's address its IPAddress again",
                held["spec"]["parentRef"]["name"] == "kept", held)
        status, body = server.request("POST", SVCS, body=service("thief", clusterIP=ip))
        t.check("and nobody else gets it", status == 422, body)
        t.check("server alive after restart", server.alive())
    finally:
        server.stop()


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary).start()
        try:
            default_range(t, server)
            addresses_follow_services(t, server)
            added_range(t, server, kubectl_runner(server, tmp))
            refusals(t, server)
            whole_space(t, server)
            single_stack_refusals(t, server)
            t.check("server alive", server.alive())
        finally:
            server.stop()
        repaired_at_start(t, binary, tmp)
        dual_stack(t, binary)
    t.finish()


if __name__ == "__main__":
    main()
