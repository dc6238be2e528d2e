"""Starts a kwatch-apiserver for an end-to-end test and talks to it like a client would.

Only 127.0.0.1. Every wait has a deadline; nothing sleeps for a fixed time to let things settle.
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

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


class Server:
    """One kwatch-apiserver process on a free loopback port."""

    def __init__(self, binary, data_dir=None, extra_args=()):
        self.binary = binary
        self.data_dir = data_dir
        self.extra_args = list(extra_args)
        self.proc = None
        self.port = None
        self.log_path = None

    def start(self):
        fd, self.log_path = tempfile.mkstemp(prefix="kwatch-log-")
        os.close(fd)
        args = [self.binary, "--port=0", "--bind-address=127.0.0.1", "--io-threads=2"]
        if self.data_dir:
            args.append(f"--data-dir={self.data_dir}")
        args += self.extra_args
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)

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

    def kubeconfig(self, directory):
        path = os.path.join(directory, "kubeconfig")
        with open(path, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: kwatch
  cluster:
    server: http://127.0.0.1:{self.port}
contexts:
- name: kwatch
  context: {{cluster: kwatch, user: kwatch}}
current-context: kwatch
users:
- name: kwatch
  user: {{}}
""")
        return path


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
