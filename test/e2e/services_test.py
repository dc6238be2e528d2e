"""Services get what kube-apiserver gives them: a cluster IP from --service-cluster-ip-range and
node ports from --service-node-port-range, each held by one Service at a time (also under
concurrent creates), kept across updates, released on delete; the `kubernetes` Service on the
range's first address; a `default` ServiceAccount in every namespace.

Usage: services_test.py <path to kwatch-apiserver>
"""
import ipaddress
import os
import shutil
import subprocess
import sys
import threading

from harness import Checks, Server, TempDir, wait_for

SVCS = "/api/v1/namespaces/default/services"


def service(name, **spec):
    spec.setdefault("ports", [{"port": 80}])
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


def message(body):
    return body.get("message", "") if isinstance(body, dict) else str(body)


def allocation(checks, server):
    status, k8s = server.request("GET", f"{SVCS}/kubernetes")
    checks.check("the kubernetes Service holds the range's first address, port 443",
                 status == 200 and k8s["spec"]["clusterIP"] == "10.0.0.1"
                 and k8s["spec"]["ports"][0]["port"] == 443, k8s)
    status, ep = server.request("GET", "/api/v1/namespaces/default/endpoints/kubernetes")
    # The secure port when the server serves HTTPS (as kube's), else the plain one.
    port = server.secure_port or server.port
    checks.check("and its Endpoints point at this server",
                 status == 200 and ep["subsets"][0]["addresses"][0]["ip"] == "127.0.0.1"
                 and ep["subsets"][0]["ports"][0]["port"] == port, ep)

    ips, errors = [], []
    lock = threading.Lock()

    def create(i):
        status, body = server.request("POST", SVCS, body=service(f"many-{i}"))
        with lock:
            if status == 201:
                ips.append(body["spec"]["clusterIP"])
            else:
                errors.append((status, message(body)))
    threads = [threading.Thread(target=create, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    net = ipaddress.ip_network("10.0.0.0/24")
    checks.check("40 concurrent creates get 40 different cluster IPs in the range",
                 not errors and len(set(ips)) == 40
                 and all(ipaddress.ip_address(ip) in net and ip not in ("10.0.0.0", "10.0.0.255", "10.0.0.1")
                         for ip in ips), (errors[:3], sorted(ips)[:5]))
    status, body = server.request("POST", SVCS, body=service("mine", clusterIP="10.0.0.5"))
    checks.check("an IP the client asks for is given",
                 status == 201 and body["spec"]["clusterIPs"] == ["10.0.0.5"]
                 and body["spec"]["ipFamilies"] == ["IPv4"]
                 and body["spec"]["ipFamilyPolicy"] == "SingleStack", body)
    status, body = server.request("POST", SVCS, body=service("clash", clusterIP="10.0.0.5"))
    checks.check("an IP another Service holds is 422 'provided IP is already allocated'",
                 status == 422 and "provided IP is already allocated" in message(body)
                 and body["details"]["causes"][0]["field"] == "spec.clusterIPs", body)
    status, body = server.request("POST", SVCS, body=service("far", clusterIP="192.168.9.9"))
    checks.check("an IP outside every ServiceCIDR is 422",
                 status == 422 and "the provided network does not match the current range"
                 in message(body), body)
    status, body = server.request("POST", SVCS, body=service("bad", clusterIP="ten.0.0.9"))
    checks.check("a cluster IP that is no IP is 422", status == 422
                 and "must be a valid IP address" in message(body), body)
    status, body = server.request("POST", SVCS, body=service("headless", clusterIP="None"))
    checks.check("clusterIP None: headless", status == 201 and body["spec"]["clusterIPs"] == ["None"], body)
    status, body = server.request("POST", SVCS, body={"apiVersion": "v1", "kind": "Service",
                                                      "metadata": {"name": "ext"},
                                                      "spec": {"type": "ExternalName",
                                                               "externalName": "example.com"}})
    checks.check("ExternalName: no cluster IP", status == 201 and "clusterIP" not in body["spec"], body)
    status, body = server.request("POST", SVCS + "?dryRun=All", body=service("dry", clusterIP="10.0.0.6"))
    status2, _ = server.request("POST", SVCS, body=service("after-dry", clusterIP="10.0.0.6"))
    checks.check("a dry run shows an IP and keeps none", status == 201 and status2 == 201, body)

    # Node ports.
    status, np = server.request("POST", SVCS, body=service("np", type="NodePort",
                                                           ports=[{"port": 80, "name": "http"},
                                                                  {"port": 443, "name": "tls"}]))
    ports = [p.get("nodePort") for p in np.get("spec", {}).get("ports", [])]
    checks.check("a NodePort Service gets a node port per port, in 30000-32767",
                 status == 201 and len(set(ports)) == 2 and all(30000 <= p <= 32767 for p in ports), np)
    status, body = server.request("POST", SVCS, body=service("np-clash", type="NodePort",
                                                             ports=[{"port": 80, "nodePort": ports[0]}]))
    checks.check("a node port another Service holds is 422",
                 status == 422 and "provided port is already allocated" in message(body), body)
    status, body = server.request("POST", SVCS, body=service("np-low", type="NodePort",
                                                             ports=[{"port": 80, "nodePort": 8080}]))
    checks.check("a node port outside the range is 422 naming it",
                 status == 422 and "The range of valid ports is 30000-32767" in message(body), body)
    status, body = server.request("POST", SVCS, body=service("cip-np", ports=[{"port": 80, "nodePort": 30500}]))
    checks.check("a node port on a ClusterIP Service is 422 Forbidden",
                 status == 422 and "may not be used when `type` is 'ClusterIP'" in message(body), body)

    # Updates keep what was allocated.
    status, body = server.request("PATCH", f"{SVCS}/np", body={"spec": {"ports": [{"port": 80, "name": "http"},
                                                                              {"port": 81, "name": "b"}]}},
                                  headers={"Content-Type": "application/merge-patch+json"})
    new_ports = {p["port"]: p.get("nodePort") for p in body.get("spec", {}).get("ports", [])}
    checks.check("a merge patch that rewrites the ports keeps port 80's node port and allocates 81's",
                 status == 200 and new_ports.get(80) == ports[0] and new_ports.get(81)
                 and new_ports[81] not in ports, body)
    status, _ = server.request("POST", SVCS, body=service("reuse-443", type="NodePort",
                                                          ports=[{"port": 80, "nodePort": ports[1]}]))
    checks.check("the node port of the port that went is free again", status == 201)
    current = server.request("GET", f"{SVCS}/mine")[1]
    del current["spec"]["clusterIP"], current["spec"]["clusterIPs"]
    status, body = server.request("PUT", f"{SVCS}/mine", body=current)
    checks.check("a PUT without clusterIP keeps it", status == 200 and body["spec"]["clusterIP"] == "10.0.0.5", body)
    status, body = server.request("PATCH", f"{SVCS}/mine", body={"spec": {"clusterIP": "10.0.0.9"}},
                                  headers={"Content-Type": "application/merge-patch+json"})
    checks.check("changing a cluster IP is 422 'may not change once set'",
                 status == 422 and "may not change once set" in message(body), body)
    status, body = server.request("PATCH", f"{SVCS}/np", body={"spec": {"type": "ClusterIP", "ports": [{"port": 80}]}},
                                  headers={"Content-Type": "application/merge-patch+json"})
    checks.check("NodePort -> ClusterIP drops the node ports",
                 status == 200 and all("nodePort" not in p for p in body["spec"]["ports"]), body)
    status, _ = server.request("POST", SVCS, body=service("reuse-80", type="NodePort",
                                                          ports=[{"port": 80, "nodePort": ports[0]}]))
    checks.check("and frees them", status == 201)

    # A LoadBalancer Service keeping its traffic on the node gets a health check node port.
    status, lb = server.request("POST", SVCS, body=service("lb-local", type="LoadBalancer",
                                                           externalTrafficPolicy="Local"))
    health = lb.get("spec", {}).get("healthCheckNodePort", 0)
    checks.check("LoadBalancer with externalTrafficPolicy Local gets a healthCheckNodePort in range",
                 status == 201 and 30000 <= health <= 32767
                 and health not in [p.get("nodePort") for p in lb["spec"]["ports"]], lb)
    status, body = server.request("POST", SVCS, body=service("hc-thief", type="NodePort",
                                                             ports=[{"port": 80, "nodePort": health}]))
    checks.check("and nobody else gets it", status == 422 and "already allocated" in message(body), body)
    current = server.request("GET", f"{SVCS}/lb-local")[1]
    current["spec"].pop("healthCheckNodePort", None)
    status, body = server.request("PUT", f"{SVCS}/lb-local", body=current)
    checks.check("a PUT without it keeps it",
                 status == 200 and body["spec"].get("healthCheckNodePort") == health, body)
    status, body = server.request("PATCH", f"{SVCS}/lb-local", body={"spec": {"healthCheckNodePort": 31999}},
                                  headers={"Content-Type": "application/merge-patch+json"})
    checks.check("it cannot change",
                 status == 422 and "cannot change healthCheckNodePort" in message(body), body)
    status, body = server.request("PATCH", f"{SVCS}/lb-local", body={"spec": {"externalTrafficPolicy": "Cluster"}},
                                  headers={"Content-Type": "application/merge-patch+json"})
    checks.check("externalTrafficPolicy Cluster drops it",
                 status == 200 and "healthCheckNodePort" not in body["spec"], body)
    status, body = server.request("POST", SVCS, body=service("hc-reuse", type="NodePort",
                                                             ports=[{"port": 80, "nodePort": health}]))
    checks.check("and frees it", status == 201, body)

    # Deletes release.
    server.request("DELETE", f"{SVCS}/mine")
    status, _ = server.request("POST", SVCS, body=service("mine-again", clusterIP="10.0.0.5"))
    checks.check("a deleted Service's IP can be taken again", status == 201)
    status, body = server.request("DELETE", f"{SVCS}/mine-again")
    checks.check("a Service delete answers with the Service", status == 200 and body.get("kind") == "Service", body)


def accounts(checks, server):
    server.create_namespace("team")
    path = "/api/v1/namespaces/team/serviceaccounts/default"
    try:
        wait_for(lambda: server.request("GET", path)[0] == 200, what="default ServiceAccount")
        checks.check("a new namespace gets its default ServiceAccount", True)
    except AssertionError as e:
        checks.check("a new namespace gets its default ServiceAccount", False, str(e))
    server.request("DELETE", path)
    try:
        wait_for(lambda: server.request("GET", path)[0] == 200, what="default ServiceAccount again")
        checks.check("a deleted default ServiceAccount comes back", True)
    except AssertionError as e:
        checks.check("a deleted default ServiceAccount comes back", False, str(e))


def kubectl(checks, server, tmp):
    exe = shutil.which("kubectl")
    if not exe:
        print("kubectl is not installed: skipping the kubectl checks")
        return
    env = dict(os.environ, KUBECONFIG=server.kubeconfig(tmp))
    p = subprocess.run([exe, "create", "service", "nodeport", "kc-web", "--tcp=80:8080"],
                       capture_output=True, text=True, env=env, timeout=30)
    out = subprocess.run([exe, "get", "service", "kc-web"], capture_output=True, text=True, env=env,
                         timeout=30).stdout
    checks.check("kubectl create service nodeport; get shows CLUSTER-IP and the node port",
                 p.returncode == 0 and "10.0.0." in out and "80:3" in out, p.stderr + out)


def small_range(checks, binary):
    server = Server(binary, extra_args=["--service-cluster-ip-range=10.96.0.0/28",
                                        "--service-node-port-range=31000-31001"]).start()
    try:
        status, k8s = server.request("GET", f"{SVCS}/kubernetes")
        checks.check("--service-cluster-ip-range: the kubernetes Service on its first address",
                     status == 200 and k8s["spec"]["clusterIP"] == "10.96.0.1", k8s)
        a = server.request("POST", SVCS, body=service("np1", type="NodePort"))[0]
        b = server.request("POST", SVCS, body=service("np2", type="NodePort"))[0]
        c, body = server.request("POST", SVCS, body=service("np3", type="NodePort"))
        checks.check("--service-node-port-range 31000-31001 holds two node ports",
                     (a, b) == (201, 201) and c == 500 and "range is full" in message(body), (a, b, c, body))
        d, body = server.request("POST", SVCS, body=service("np-headless", type="NodePort", clusterIP="None"))
        checks.check("a headless NodePort Service is 422", d == 422 and "may not be set to 'None'" in message(body),
                     body)
        # 14 addresses: the kubernetes Service's, np1's, np2's and 11 more.
        created = [server.request("POST", SVCS, body=service(f"s{i}"))[0] for i in range(11)]
        status, body = server.request("POST", SVCS, body=service("one-too-many"))
        checks.check("a /28 holds 14 Services, the 15th is refused: range is full",
                     created == [201] * 11 and status == 500 and "range is full" in message(body),
                     (created, status, body))
    finally:
        server.stop()
    status = subprocess.run([binary, "--service-cluster-ip-range=10.0.0.0/33"], capture_output=True,
                            text=True, timeout=10)
    checks.check("a bad --service-cluster-ip-range is refused at start", status.returncode != 0
                 and "service-cluster-ip-range" in status.stderr + status.stdout, status.stderr)


def main():
    binary = sys.argv[1]
    checks = Checks()
    with TempDir() as tmp:
        server = Server(binary).start()
        try:
            allocation(checks, server)
            accounts(checks, server)
            kubectl(checks, server, tmp)
            checks.check("server alive", server.alive())
        finally:
            server.stop()
        small_range(checks, binary)
    checks.finish()


if __name__ == "__main__":
    main()
