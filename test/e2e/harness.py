"""Starts a kwatch-apiserver for an end-to-end test and talks to it like a client would.

Only 127.0.0.1. Every wait has a deadline; nothing sleeps for a fixed time to let things settle.
"""
import atexit
import http.client
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque

SKIP = 77  # ctest SKIP_RETURN_CODE


def wait_for(condition, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


_ports_given = set()


def rss_kib(pid):
    """A process's resident memory (VmRSS) in KiB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def free_port():
    """A loopback port that is free now and that this process has not handed out before: the
    kernel may give a just-released port again, and a suite that takes one for kwatch and then
    starts etcd must not get the same port twice."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _ports_given:
            _ports_given.add(port)
            return port
    raise AssertionError("no free loopback port the suite has not used")


class Etcd:
    """A real etcd cluster (one or more members) on free loopback ports, stopped by PID."""

    _running = []

    def __init__(self, data_dir, members=1):
        self.data_dir = data_dir
        os.makedirs(data_dir, exist_ok=True)
        self.members = []
        names = [f"m{i}" for i in range(members)]
        ports = [(free_port(), free_port()) for _ in names]
        cluster = ",".join(f"{n}=http://127.0.0.1:{p[1]}" for n, p in zip(names, ports))
        for name, (client, peer) in zip(names, ports):
            self.members.append({"name": name, "client": client, "peer": peer, "proc": None,
                                 "args": ["etcd", "--name", name,
                                          "--data-dir", os.path.join(data_dir, name),
                                          "--listen-client-urls", f"http://127.0.0.1:{client}",
                                          "--advertise-client-urls", f"http://127.0.0.1:{client}",
                                          "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                                          "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                                          "--initial-cluster", cluster,
                                          "--initial-cluster-state", "new",
                                          "--heartbeat-interval", "10", "--election-timeout", "100",
                                          "--log-level", "error"]})

    @staticmethod
    def available():
        return shutil.which("etcd") is not None

    def endpoints(self):
        return ",".join(f"http://127.0.0.1:{m['client']}" for m in self.members)

    def start(self, index=None):
        for i, m in enumerate(self.members):
            if index is not None and i != index:
                continue
            if m["proc"] is None or m["proc"].poll() is not None:
                m["log"] = open(os.path.join(self.data_dir, m["name"] + ".log"), "a")
                m["proc"] = subprocess.Popen(m["args"], stdout=m["log"], stderr=subprocess.STDOUT)
        if self not in Etcd._running:
            Etcd._running.append(self)
        wait_for(self.healthy, timeout=20, what="etcd to serve")
        return self

    def healthy(self):
        return self.etcdctl("endpoint", "health", check=False).returncode == 0

    def etcdctl(self, *args, check=True, endpoints=None):
        env = dict(os.environ, ETCDCTL_API="3")
        live = endpoints or ",".join(f"127.0.0.1:{m['client']}" for m in self.members
                                     if m["proc"] is not None and m["proc"].poll() is None)
        p = subprocess.run(["etcdctl", f"--endpoints={live}", "--command-timeout=5s", *args],
                           capture_output=True, text=True, env=env, timeout=30)
        if check and p.returncode != 0:
            raise AssertionError(f"etcdctl {args} failed: {p.stderr}")
        return p

    def stop(self, index=None, kill=False):
        for i, m in enumerate(self.members):
            if index is not None and i != index:
                continue
            proc = m["proc"]
            if proc is None:
                continue
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            m["log"].close()
            m["proc"] = None
        if index is None and self in Etcd._running:
            Etcd._running.remove(self)


# Data directories the harness made for itself (not a suite's own data_dir): removed at exit,
# after their etcd stopped. Each holds a whole etcd (tens of MB); a suite run must not leave them.
_temporary_dirs = []


def _stop_all_etcd():
    for e in list(Etcd._running):
        e.stop()
    for d in _temporary_dirs:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_stop_all_etcd)


def storage_backend():
    """The backend the suites run against: KWATCH_TEST_STORAGE=etcd3 or the embedded default."""
    return os.environ.get("KWATCH_TEST_STORAGE", "memory")


class Server:
    """One kwatch-apiserver process on a free loopback port.

    With KWATCH_TEST_STORAGE=etcd3 it runs on a real etcd started for it (one per data_dir, so a
    restarted server finds its data again), else on the embedded store in data_dir.
    """

    _etcd_by_dir = {}

    def __init__(self, binary, data_dir=None, extra_args=(), etcd=None, max_open_files=None,
                 https=False):
        self.binary = binary
        # https=True: HTTPS on a port the harness picks (self.secure_port, kept across restarts);
        # taken again if another process bound it between the pick and the server's start.
        # KWATCH_TEST_KUBECTL_HTTP2=1: kubectl reaches the server over HTTPS (where Go clients
        # negotiate HTTP/2) with a token of system:masters; other clients keep plain HTTP.
        self.kubectl_http2 = os.environ.get("KWATCH_TEST_KUBECTL_HTTP2") == "1"
        self.https = https or self.kubectl_http2
        self.secure_port = None
        self.max_open_files = max_open_files  # RLIMIT_NOFILE of the server process (n or (soft, hard))
        self.data_dir = data_dir
        # KWATCH_TEST_SERVER_ARGS: flags every server of a suite gets first (ctest runs some suites
        # again with the I/O threads writing watch events themselves).
        self.extra_args = os.environ.get("KWATCH_TEST_SERVER_ARGS", "").split() + list(extra_args)
        self.proc = None
        self.port = None
        self.log_path = None
        self.etcd = etcd
        if self.etcd is None and storage_backend() == "etcd3":
            if not Etcd.available():
                print("etcd is not installed: skipping the etcd3 run of this suite")
                sys.exit(SKIP)
            key = data_dir
            if not key:
                key = tempfile.mkdtemp(prefix="kwatch-etcd-")
                _temporary_dirs.append(key)
            if key not in Server._etcd_by_dir:
                os.makedirs(key, exist_ok=True)
                Server._etcd_by_dir[key] = Etcd(os.path.join(key, "etcd") if data_dir else key).start()
            self.etcd = Server._etcd_by_dir[key]

    def start(self):
        if not self.https or self.secure_port is not None:
            return self._start()
        for attempt in range(5):
            self.secure_port = free_port()
            try:
                return self._start()
            except AssertionError as err:
                if "Address already in use" not in str(err) or attempt == 4:
                    raise
                print(f"HTTPS port {self.secure_port} was taken by another process before the server "
                      "bound it: trying another")

    def _start(self):
        fd, self.log_path = tempfile.mkstemp(prefix="kwatch-log-")
        os.close(fd)
        # Plain HTTP on a free port, open to everyone; suites about TLS and access control
        # override these in extra_args (the last value of a flag wins).
        args = [self.binary, "--port=0", "--bind-address=127.0.0.1", "--io-threads=2",
                "--secure-port=0", "--authorization-mode=AlwaysAllow", "--anonymous-auth=true",
                # Stopped by SIGTERM after every suite: no load balancer to wait for.
                "--shutdown-delay-duration=0s"]
        if self.etcd is not None:
            args += ["--storage-backend=etcd3", f"--etcd-servers={self.etcd.endpoints()}"]
        elif self.data_dir:
            args.append(f"--data-dir={self.data_dir}")
        if self.secure_port is not None:
            args.append(f"--secure-port={self.secure_port}")
        if self.kubectl_http2:
            home = self.kubectl_home()
            with open(os.path.join(home, "tokens.csv"), "w") as f:
                f.write('kubectl-admin,kubectl-admin,1,"system:masters"\n')
            args += [f"--cert-dir={home}/certs", f"--token-auth-file={home}/tokens.csv"]
        args += self.extra_args
        self.log = open(self.log_path, "w")
        limit = None
        if self.max_open_files is not None:
            # A number (soft and hard limit alike) or (soft, hard).
            n = self.max_open_files
            soft, hard = n if isinstance(n, tuple) else (n, n)
            limit = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))  # noqa: E731
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     preexec_fn=limit)

        def bound_port():
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}:\n{self.read_log()}")
            m = re.search(r"serving on http://127\.0\.0\.1:(\d+)", self.read_log())
            return int(m.group(1)) if m else None

        self.port = wait_for(bound_port, what="the server to listen")
        wait_for(lambda: self.request("GET", "/readyz")[0] == 200, what="/readyz")
        return self

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()
        self.proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def request(self, method, path, body=None, headers=None, raw=False):
        """Returns (status, parsed JSON body or text)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            hdrs = dict(headers or {})
            if body is not None and not isinstance(body, (bytes, str)):
                body = json.dumps(body)
                hdrs.setdefault("Content-Type", "application/json")
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
        except ConnectionError:
            return 0, None
        finally:
            conn.close()
        if raw:
            return resp.status, data
        try:
            return resp.status, json.loads(data)
        except ValueError:
            return resp.status, data.decode(errors="replace")

    def session(self):
        """A keep-alive connection for many requests from one thread (see Session)."""
        return Session(self.port)

    def create_namespace(self, name):
        status, body = self.request("POST", "/api/v1/namespaces",
                                    body={"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": name}})
        if status != 201:
            raise AssertionError(f"creating namespace {name}: {status} {body!r}"[:500])
        return body

    def list_rv(self, path):
        """The resourceVersion of a list of path, as an int."""
        status, body = self.request("GET", path)
        if status != 200:
            raise AssertionError(f"GET {path}: {status} {body!r}"[:500])
        return int(body["metadata"]["resourceVersion"])

    def metrics(self):
        """/metrics as a list of (name, {label: value}, float); [] when it cannot be read."""
        status, text = self.request("GET", "/metrics", raw=True)
        return parse_metrics(text.decode(errors="replace")) if status == 200 else []

    def metric(self, name, **labels):
        """Sum of the samples of name whose labels include labels; None when there is none."""
        values = [v for n, lbl, v in self.metrics()
                  if n == name and all(lbl.get(k) == str(want) for k, want in labels.items())]
        return sum(values) if values else None

    _kubectl_home_by_dir = {}

    def kubectl_home(self):
        """Where KWATCH_TEST_KUBECTL_HTTP2's certificates and token live: one per server, or per
        data_dir, so that a server restarted on its data keeps its CA as a deployment keeps its
        --cert-dir (a new CA would be published again, a write after the restart)."""
        if getattr(self, "_kubectl_home", None) is None:
            home = Server._kubectl_home_by_dir.get(self.data_dir) if self.data_dir else None
            if home is None:
                home = tempfile.mkdtemp(prefix="kwatch-kubectl-")
                _temporary_dirs.append(home)
                if self.data_dir:
                    Server._kubectl_home_by_dir[self.data_dir] = home
            self._kubectl_home = home
        return self._kubectl_home

    def kubeconfig(self, directory):
        path = os.path.join(directory, "kubeconfig")
        if self.kubectl_http2:
            home = self.kubectl_home()
            cluster = (f"    server: https://127.0.0.1:{self.secure_port}\n"
                       f"    certificate-authority: {home}/certs/ca.crt")
            user = "{token: kubectl-admin}"
        else:
            cluster, user = f"    server: http://127.0.0.1:{self.port}", "{}"
        with open(path, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: kwatch
  cluster:
{cluster}
contexts:
- name: kwatch
  context: {{cluster: kwatch, user: kwatch}}
current-context: kwatch
users:
- name: kwatch
  user: {user}
""")
        return path


def kubectl_runner(server, home):
    """A function running kubectl against server with HOME and KUBECONFIG in home:
    kc(*args, stdin=None) -> (exit code, stdout + stderr). None when kubectl is not installed."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return None
    env = dict(os.environ, HOME=home, KUBECONFIG=server.kubeconfig(home))

    checked = []

    def kc(*args, stdin=None):
        p = subprocess.run([kubectl, *args], input=stdin, capture_output=True, text=True,
                           env=env, timeout=60)
        if server.kubectl_http2 and not checked:
            # The suite's point in this mode: kubectl's requests went over HTTP/2.
            if "(HTTP/2)" not in server.read_log():
                raise AssertionError("KWATCH_TEST_KUBECTL_HTTP2: kubectl did not use HTTP/2")
            checked.append(True)
        return p.returncode, p.stdout + p.stderr
    return kc


def python_api_client(t, server, home):
    """The official Python client's ApiClient for server (kubeconfig in home); None, with a
    passing "skipped" check, where python3-kubernetes is not installed."""
    try:
        from kubernetes import config
    except ImportError:
        t.check("python3-kubernetes present (skipped)", True)
        return None
    return config.new_client_from_config(config_file=server.kubeconfig(home))


def run_suite(checks_of):
    """The usual main of a suite: one Server of the binary in argv[1] (memory or etcd3 backend
    as KWATCH_TEST_STORAGE says) and a temporary directory; checks_of(checks, server, tmp)
    runs the checks; then "server alive", the server stopped and the summary's exit code."""
    binary = sys.argv[1]
    checks = Checks()
    with TempDir() as tmp:
        server = Server(binary).start()
        try:
            checks_of(checks, server, tmp)
            checks.check("server alive", server.alive())
        finally:
            server.stop()
    checks.finish()


def start_server(checks, binary, extra_args=(), **kwargs):
    """Starts a Server with extra_args. When the binary refuses them (a build without the feature),
    records one FAIL and starts it without them, so that the rest of a suite still runs and reports."""
    server = Server(binary, extra_args=extra_args, **kwargs)
    try:
        return server.start()
    except AssertionError as e:
        server.stop()
        checks.check(f"server starts with {' '.join(extra_args)}", False, str(e)[-400:])
        return Server(binary, **kwargs).start()


_METRIC_LINE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_METRIC_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    samples = []
    for line in text.splitlines():
        m = _METRIC_LINE.match(line)
        if not m or line.startswith("#"):
            continue
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\")
                  for k, v in _METRIC_LABEL.findall(m.group(2) or "")}
        try:
            samples.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            pass
    return samples


class Session:
    """Requests over one keep-alive HTTP/1.1 connection (reconnects once if the server closed it).
    One per thread. request() returns (status, parsed JSON body or text) like Server.request."""

    def __init__(self, port, timeout=10):
        self.port = port
        self.timeout = timeout
        self.conn = None

    def request(self, method, path, body=None, headers=None):
        hdrs = dict(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            hdrs.setdefault("Content-Type", "application/json")
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=body, headers=hdrs)
                resp = self.conn.getresponse()
                data = resp.read()
                break
            except (ConnectionError, http.client.HTTPException, socket.timeout):
                self.conn.close()
                self.conn = None
                if attempt:
                    return 0, None
        if resp.will_close:
            self.conn.close()
            self.conn = None
        try:
            return resp.status, json.loads(data)
        except ValueError:
            return resp.status, data.decode(errors="replace")

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None


def flood_and_probe(server, path, body_of, refused_marker, writers=4, seconds=5):
    """`writers` clients POST body_of(writer, n) to `path` as fast as they can for `seconds`
    while /healthz is probed every 50 ms. Returns (statuses, refused, probes): every write's
    status, how many were 422 with `refused_marker` in their body, and (latency s, status) per
    probe."""
    import threading
    stop = time.monotonic() + seconds
    refused, statuses = [0], []

    def flood(i):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        n = 0
        while time.monotonic() < stop:
            conn.request("POST", path, body=body_of(i, n),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            text = r.read().decode()
            statuses.append(r.status)
            if r.status == 422 and refused_marker in text:
                refused[0] += 1
            n += 1
        conn.close()

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(writers)]
    for w in threads:
        w.start()
    probes = []
    probe = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    while time.monotonic() < stop:
        began = time.monotonic()
        probe.request("GET", "/healthz")
        r = probe.getresponse()
        r.read()
        probes.append((time.monotonic() - began, r.status))
        time.sleep(0.05)
    for w in threads:
        w.join()
    return statuses, refused[0], probes




def check_flood(t, server, path, body_of, refused_marker, refused_check):
    """Floods `path` (flood_and_probe) and checks that every write was refused with
    `refused_marker` (the check named `refused_check`) and that the health check answered within
    100 ms throughout."""
    statuses, refused, latencies = flood_and_probe(server, path, body_of, refused_marker)
    worst = max(l for l, _ in latencies)
    print(f"{len(statuses)} writes ({refused} refused); "
          f"{len(latencies)} health checks, slowest {worst * 1000:.1f} ms")
    t.check(refused_check, statuses and refused == len(statuses), f"{refused} of {len(statuses)}")
    t.check("the health check answers within 100 ms throughout",
            all(s == 200 for _, s in latencies) and worst < 0.1, f"slowest {worst * 1000:.1f} ms")
class BackgroundWrites:
    """Two writers creating objects at `path` (server.request POSTs of body_of(prefix, n)) until
    the `with` block ends; `statuses` holds every answer's status."""

    def __init__(self, server, path, body_of, prefixes=("w", "v")):
        self.statuses = []
        self._stop = threading.Event()

        def writer(prefix):
            n = 0
            while not self._stop.is_set():
                status, _ = server.request("POST", path, body_of(prefix, n))
                self.statuses.append(status)
                n += 1
        self._threads = [threading.Thread(target=writer, args=(p,)) for p in prefixes]

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join()


def configmap(name, data=None, labels=None, namespace=None):
    meta = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {"v": "0"} if data is None else data}


def rv_of(obj):
    """metadata.resourceVersion of an object or of an event's object, as an int (None if absent)."""
    if isinstance(obj, dict) and "type" in obj and "object" in obj:
        obj = obj["object"]
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return None


def json_exchange(conn, method, path, body=None, headers=None, token=None):
    """One JSON request on `conn` (HTTP or HTTPS), closed afterwards: (status, parsed JSON body or
    text). A bearer token goes in the Authorization header."""
    try:
        h = {"Content-Type": "application/json"}
        if token:
            h["Authorization"] = f"Bearer {token}"
        h.update(headers or {})
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
        resp = conn.getresponse()
        data = resp.read()
        try:
            return resp.status, json.loads(data)
        except ValueError:
            return resp.status, data.decode(errors="replace")
    finally:
        conn.close()


def delete_and_observe(port, path, timeout=10):
    """DELETEs the object at path and returns (status, the object as its DELETED watch event
    carries it: the last state with the delete's resourceVersion). kube answers a delete of most
    kinds with a Status that names no revision; the event is read from a watch of that one object
    from its last resourceVersion, so it is exact even while others write."""
    collection, name = path.rsplit("/", 1)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        current = json.loads(resp.read())
        if resp.status != 200:
            return resp.status, current
        rv = current["metadata"]["resourceVersion"]
        conn.request("DELETE", path, body=json.dumps({"preconditions": {"resourceVersion": rv}}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        answer = json.loads(resp.read())
        if resp.status != 200:
            return resp.status, answer
    finally:
        conn.close()
    if isinstance(answer, dict) and answer.get("kind") != "Status":
        return 200, answer  # kinds whose delete answers with the object
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", f"{collection}?watch=true&resourceVersion={rv}"
                            f"&fieldSelector=metadata.name%3D{name}&timeoutSeconds={timeout}")
        resp = conn.getresponse()
        while True:
            line = resp.readline()
            if not line:
                raise AssertionError(f"no DELETED event for {path} after {rv}")
            event = json.loads(line)
            if event.get("type") == "DELETED":
                return 200, event["object"]
    finally:
        conn.close()


def summarize(event):
    """(type, namespace/name, resourceVersion) of a watch event: what most checks compare."""
    obj = event.get("object") if isinstance(event, dict) else None
    meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}" if meta.get("name") else None
    return (event.get("type") if isinstance(event, dict) else None, name, rv_of(event))


class WatchStream:
    """A watch over one raw HTTP/1.1 connection, decoded as kube sends it: a chunked body with one
    JSON event per line.

    After the response head: status (HTTP code), headers (lower-case names), and for a response
    that is not a chunked 200 stream, body (parsed JSON, else text) and ended=True.
    next_event(timeout) returns the next event (a dict), or None on timeout or once the stream has
    ended (then .ended is True; .eof when the connection itself was closed).
    start_background(keep) reads in a thread from then on, so the server never finds this client
    slow; each event is stored as keep(event) (default: the event), see events()/count.
    rcvbuf sets SO_RCVBUF before connecting; read_head=False sends the request and reads nothing
    (a stalled client), call read_head() later.
    """

    def __init__(self, server, path, headers=None, timeout=10.0, rcvbuf=None, read_head=True):
        self.path = path
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", server.port))
        hdrs = {"Host": f"127.0.0.1:{server.port}", "Accept": "application/json",
                "User-Agent": "kwatch-e2e"}
        hdrs.update(headers or {})
        head = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
        self.sock.sendall((head + "\r\n").encode())
        self.opened = time.monotonic()
        self.status = None
        self.headers = {}
        self.body = None
        self.ended = False
        self.eof = False
        self.ended_at = None
        self.chunked = False
        self._raw = bytearray()
        self._body = bytearray()
        self._events = deque()
        self._kept = []
        self._keep = None
        self._cond = threading.Condition()
        self._thread = None
        self._closed = False
        if read_head:
            self.read_head(timeout)

    # --- reading and decoding -------------------------------------------------------------------
    def _recv(self, timeout):
        """Reads once from the socket; False on timeout."""
        if self.eof:
            return False
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(1 << 18)
        except socket.timeout:
            return False
        except OSError:
            data = b""
        if not data:
            self.eof = True
            self._end()
        self._raw += data
        return True

    def _end(self):
        if not self.ended:
            self.ended = True
            self.ended_at = time.monotonic()

    def _decode_head(self):
        i = self._raw.find(b"\r\n\r\n")
        if i < 0:
            if self.eof:
                self.status = 0
            return False
        lines = bytes(self._raw[:i]).decode("latin-1").split("\r\n")
        del self._raw[:i + 4]
        parts = lines[0].split(" ", 2)
        self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        return True

    def _decode(self):
        """Moves what can be decoded from _raw into events; returns whether anything moved."""
        moved = False
        if self.status is None:
            if not self._decode_head():
                return False
            moved = True
        if self.chunked:
            while not self.ended or self._raw:
                j = self._raw.find(b"\r\n")
                if j < 0:
                    break
                try:
                    size = int(bytes(self._raw[:j]).split(b";")[0].strip() or b"x", 16)
                except ValueError:
                    self._events.append({"type": "<bad chunk>", "raw": bytes(self._raw[:80])})
                    self._raw.clear()
                    self._end()
                    break
                if size == 0:
                    del self._raw[:]
                    self._end()
                    break
                if len(self._raw) < j + 2 + size + 2:
                    break
                self._body += self._raw[j + 2:j + 2 + size]
                del self._raw[:j + 2 + size + 2]
            moved = self._split_lines() or moved
        else:
            length = self.headers.get("content-length")
            if (length is not None and len(self._raw) >= int(length)) or self.eof:
                data = bytes(self._raw[:int(length)] if length is not None else self._raw)
                self._raw.clear()
                try:
                    self.body = json.loads(data)
                except ValueError:
                    self.body = data.decode(errors="replace")
                self._end()
                moved = True
        return moved

    def _split_lines(self):
        moved = False
        while True:
            k = self._body.find(b"\n")
            if k < 0:
                break
            line = bytes(self._body[:k]).strip()
            del self._body[:k + 1]
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"type": "<unparseable>", "raw": line[:200]}
            if self._keep is not None:
                self._kept.append(self._keep(event))
            else:
                self._events.append(event)
            moved = True
        if self.ended and self._body.strip():
            self._events.append({"type": "<unterminated line>", "raw": bytes(self._body[:200])})
            self._body.clear()
            moved = True
        return moved

    def read_head(self, timeout=10.0):
        """Waits for the response head (and the whole body of a non-stream response)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                self._decode()
                if self.status is not None and (self.chunked or self.ended):
                    return self.status
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                if self.status is None:
                    self.status = 0
                return self.status
            if self._thread:
                with self._cond:
                    self._cond.wait(min(left, 0.05))
            else:
                self._recv(left)

    def next_event(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                self._decode()
                if self._events:
                    return self._events.popleft()
                if self.ended:
                    return None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if self._thread:
                with self._cond:
                    self._cond.wait(min(left, 0.05))
            else:
                self._recv(left)

    def events_until(self, predicate, timeout=10.0):
        """Reads events until predicate(events so far) holds, the stream ends or timeout passes."""
        got = []
        deadline = time.monotonic() + timeout
        while not predicate(got):
            ev = self.next_event(max(0.0, deadline - time.monotonic()))
            if ev is None:
                break
            got.append(ev)
        return got

    def take(self, n, timeout=10.0, skip_bookmarks=False):
        """The next n events (fewer on timeout or end); BOOKMARKs dropped if skip_bookmarks."""
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n:
            ev = self.next_event(max(0.0, deadline - time.monotonic()))
            if ev is None:
                break
            if skip_bookmarks and ev.get("type") == "BOOKMARK":
                continue
            got.append(ev)
        return got

    def read_to_end(self, timeout=10.0):
        """All events until the server ends the stream (or timeout)."""
        return self.events_until(lambda _: False, timeout)

    # --- background reading ---------------------------------------------------------------------
    def start_background(self, keep=None):
        self._keep = keep
        with self._cond:
            self._decode()
            while self._events and keep is not None:
                self._kept.append(keep(self._events.popleft()))
        if keep is None:
            self._kept = self._events  # next_event() still pops from the same deque

        def run():
            while not self._closed and not self.ended:
                self.sock.settimeout(0.2)
                try:
                    data = self.sock.recv(1 << 18)
                except socket.timeout:
                    continue
                except OSError:
                    data = b""
                with self._cond:
                    if not data:
                        self.eof = True
                        self._end()
                    self._raw += data
                    self._decode()
                    self._cond.notify_all()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    @property
    def count(self):
        """Events stored by the background reader so far."""
        with self._cond:
            return len(self._kept)

    def events(self):
        with self._cond:
            return list(self._kept)

    def close(self):
        self._closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        if self._thread:
            self._thread.join(timeout=5)


class WebSocketWatch:
    """The same watch over a WebSocket (python3-websocket): one text frame per event.

    status is 101 on success, else the refused handshake's HTTP code (0 for another failure).
    next_event(timeout) as in WatchStream; opcodes records each data frame's opcode."""

    def __init__(self, server, path, timeout=10.0, headers=None, subprotocols=None):
        import websocket  # python3-websocket; only the transport suite needs it
        self._ws_mod = websocket
        self.ended = False
        self.error = None
        self.opcodes = []
        self.close_code = None  # the status code of the server's close frame, once received
        self.ws = None
        try:
            self.ws = websocket.create_connection(f"ws://127.0.0.1:{server.port}{path}",
                                                  timeout=timeout, header=headers or {},
                                                  subprotocols=subprotocols)
            self.status = self.ws.getstatus()
        except websocket.WebSocketBadStatusException as e:
            self.status, self.error, self.ended = e.status_code, str(e), True
        except (websocket.WebSocketException, OSError) as e:
            self.status, self.error, self.ended = 0, repr(e), True

    def next_event(self, timeout=5.0):
        if self.ended:
            return None
        self.ws.settimeout(max(timeout, 0.001))
        try:
            opcode, data = self.ws.recv_data()
        except (self._ws_mod.WebSocketTimeoutException, socket.timeout):
            return None
        except (self._ws_mod.WebSocketException, OSError):
            self.ended = True
            return None
        if opcode == self._ws_mod.ABNF.OPCODE_CLOSE:
            self.ended = True
            self.close_code = int.from_bytes(data[:2], "big") if len(data) >= 2 else 1005
            try:
                self.ws.send_close()  # the close handshake, as a client library answers it
            except (self._ws_mod.WebSocketException, OSError):
                pass
            return None
        self.opcodes.append(opcode)
        try:
            return json.loads(data)
        except ValueError:
            return {"type": "<unparseable>", "raw": data[:200]}

    def take(self, n, timeout=10.0):
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n:
            ev = self.next_event(max(0.0, deadline - time.monotonic()))
            if ev is None:
                break
            got.append(ev)
        return got

    def close(self):
        if self.ws:
            try:
                self.ws.close(timeout=1)
            except Exception:  # noqa: BLE001 - closing a socket the server may already have closed
                pass


class TempDir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="kwatch-test-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


class Checks:
    """Counts named checks and reports them in the plain 'N passed, N failed' form."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, condition, detail=""):
        if condition:
            self.passed += 1
            print(f"ok   {name}")
        else:
            self.failed += 1
            print(f"FAIL {name} {detail}")

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)


def http_token_kubeconfig(path, port, token):
    """A kubeconfig for http://127.0.0.1:<port> with a bearer token (what a server delegating to
    another reads; kubectl itself sends credentials only over TLS)."""
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: a, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: {token}}}}}]
contexts: [{{name: a, context: {{cluster: a, user: u}}}}]
current-context: a
""")
    return path


def extension_api_objects(group, version, port, ns="ext", name="ext"):
    """What registers an extension API server listening on 127.0.0.1:<port> (HTTPS) for
    group/version: its Service and Endpoints in `ns`, and an APIService (insecureSkipTLSVerify)
    naming them. The aggregating server needs --unsafe-webhook-loopback-endpoints."""
    return ({"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": name, "namespace": ns},
             "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}},
            {"apiVersion": "v1", "kind": "Endpoints",
             "metadata": {"name": name, "namespace": ns},
             "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                          "ports": [{"name": "https", "port": port}]}]},
            {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
             "metadata": {"name": f"{version}.{group}"},
             "spec": {"group": group, "version": version, "groupPriorityMinimum": 1000,
                      "versionPriority": 100, "insecureSkipTLSVerify": True,
                      "service": {"namespace": ns, "name": name}}})
