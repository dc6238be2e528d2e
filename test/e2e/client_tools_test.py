"""The client library's tool, kwatch-informer, against a real server as a user runs it: found by
discovery (a core and a grouped resource), the initial state then each change, one line each,
selectors, -o json, a bad resource named in a clear error, and a mirror that survives the
server restarting on the same data directory (it resumes, without printing anything twice).

Usage: client_tools_test.py <path to kwatch-apiserver> <path to kwatch-informer>
"""
import json
import os
import subprocess
import sys
import threading
import time

from harness import Checks, Server, TempDir, configmap, storage_backend, wait_for


class Tool:
    """kwatch-informer running in the background, its output lines collected."""

    def __init__(self, binary, kubeconfig, *args):
        self.proc = subprocess.Popen([binary, "--kubeconfig", kubeconfig, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_lines(self, n, timeout=10):
        wait_for(lambda: len(self.lines) >= n, timeout=timeout, what=f"{n} lines")
        return list(self.lines)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.thread.join(timeout=5)
        return self.proc.returncode


def main():
    binary, informer = sys.argv[1], sys.argv[2]
    checks = Checks()
    with TempDir() as tmp:
        data = os.path.join(tmp, "data") if storage_backend() != "etcd3" else None
        server = Server(binary, data_dir=data).start()
        port = server.port
        try:
            kubeconfig = server.kubeconfig(tmp)
            server.create_namespace("tools")
            cms = "/api/v1/namespaces/tools/configmaps"
            for name in ("a", "b"):
                server.request("POST", cms, body=configmap(name, labels={"app": "web"}))
            server.request("POST", cms, body=configmap("other", labels={"app": "db"}))

            tool = Tool(informer, kubeconfig, "configmaps", "-n", "tools", "-l", "app=web")
            first = tool.wait_lines(2)
            checks.check("the initial state comes first, as ADDED lines",
                         sorted(l.split()[:2] for l in first) == [["ADDED", "tools/a"], ["ADDED", "tools/b"]],
                         first)
            server.request("PUT", f"{cms}/a", body=configmap("a", data={"x": "1"}, labels={"app": "web"}))
            server.request("POST", cms, body=configmap("c", labels={"app": "web"}))
            server.request("POST", cms, body=configmap("d", labels={"app": "db"}))
            server.request("DELETE", f"{cms}/b")
            lines = tool.wait_lines(5)
            status, a = server.request("GET", f"{cms}/a")
            checks.check("then each change once, in order, with its resourceVersion; the selector holds",
                         lines[2:5] == [f"MODIFIED tools/a {a['metadata']['resourceVersion']}",
                                        lines[3], lines[4]]
                         and lines[3].startswith("ADDED tools/c") and lines[4].startswith("DELETED tools/b"),
                         lines)

            if data:
                server.stop()
                restarted = Server(binary, data_dir=data)
                restarted.extra_args += [f"--port={port}"]
                restarted.start()
                server = restarted
                server.request("POST", cms, body=configmap("e", labels={"app": "web"}))
                lines = tool.wait_lines(6, timeout=20)
                checks.check("after the server restarts the mirror resumes: only the new change is printed",
                             len(lines) == 6 and lines[5].startswith("ADDED tools/e"), lines)
            code = tool.stop()
            checks.check("SIGTERM ends it cleanly", code == 0, (code, tool.proc.stderr.read()[-300:]))

            js = Tool(informer, kubeconfig, "deployments.apps", "-A", "-o", "json")
            server.request("POST", "/apis/apps/v1/namespaces/tools/deployments", body={
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"selector": {"matchLabels": {"app": "web"}},
                         "template": {"metadata": {"labels": {"app": "web"}},
                                      "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
            got = js.wait_lines(1)
            event = json.loads(got[0])
            checks.check("a grouped resource across namespaces, -o json: the event and whole object",
                         event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "web"
                         and event["object"]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx",
                         got[0][:300])
            js.stop()

            bad = subprocess.run([informer, "--kubeconfig", kubeconfig, "gizmos"],
                                 capture_output=True, text=True, timeout=20)
            checks.check("an unknown resource is a clear error, exit code 1",
                         bad.returncode == 1 and "doesn't have a resource type \"gizmos\"" in bad.stderr,
                         (bad.returncode, bad.stderr))
            usage = subprocess.run([informer], capture_output=True, text=True, timeout=20)
            checks.check("no resource: usage, exit code 2", usage.returncode == 2 and "usage" in usage.stderr)
            checks.check("server alive", server.alive())
        finally:
            server.stop()
    checks.finish()


if __name__ == "__main__":
    main()
