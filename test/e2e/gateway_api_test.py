"""Gateway API's standard CRDs (heavy CEL validation rules) installed unchanged with kubectl; the
project's own examples accepted; routes and gateways that break its rules refused with the
rules' messages.

The definitions are Gateway API's, not kwatch's: they are not kept in this repository. Point
KWATCH_GATEWAY_API_DIR at a checkout of github.com/kubernetes-sigs/gateway-api (or any directory
holding config/crd/standard/*.yaml, and optionally examples/standard/); without it the suite is
skipped (exit 77).

Usage: gateway_api_test.py <path to kwatch-apiserver>
"""
import glob
import os
import sys

from harness import Checks, Server, TempDir, kubectl_runner, wait_for

INVALID = [
    ("a path match that is not absolute",
     """apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-path}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: "api"}}]
    backendRefs: [{name: svc, port: 80}]
""",
     ["spec.rules[0].matches[0].path: Invalid value: \"object\": value must be an absolute path "
      "and start with '/' when type one of ['Exact', 'PathPrefix']"]),
    ("a filter without its settings, a redirect beside backends, a service without a port",
     """apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-filters}
spec:
  parentRefs: [{name: gw}]
  rules:
  - filters: [{type: RequestHeaderModifier}, {type: RequestRedirect, requestRedirect: {statusCode: 301}}]
    backendRefs: [{name: svc}]
""",
     ["filter.requestHeaderModifier must be specified for RequestHeaderModifier filter.type",
      "RequestRedirect filter must not be used together with backendRefs",
      "Must have port for Service reference"]),
    ("a prefix rewrite without exactly one prefix match",
     """apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-rewrite}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /a}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /b}}}]
    backendRefs: [{name: svc, port: 80}]
""",
     ["When using URLRewrite filter with path.replacePrefixMatch, exactly one PathPrefix match "
      "must be specified"]),
    ("a repeated URLRewrite filter",
     """apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-repeat}
spec:
  parentRefs: [{name: gw}]
  rules:
  - filters:
    - {type: URLRewrite, urlRewrite: {hostname: a.example.com}}
    - {type: URLRewrite, urlRewrite: {hostname: b.example.com}}
    backendRefs: [{name: svc, port: 80}]
""",
     ["URLRewrite filter cannot be repeated"]),
    # Rules of one shape are answered once per route: the one that differs is still checked.
    ("the third of three like rules with an exact match under a prefix rewrite",
     """apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-third}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /a}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /x}}}]
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /b}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /y}}}]
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {type: Exact, value: /c}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /z}}}]
    backendRefs: [{name: svc, port: 80}]
""",
     ["spec.rules[2]: Invalid value: \"object\": When using URLRewrite filter with "
      "path.replacePrefixMatch, exactly one PathPrefix match must be specified"]),
    ("the second of two like filter lists with a repeated filter",
     """apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-second}
spec:
  parentRefs: [{name: gw}]
  rules:
  - filters:
    - {type: RequestHeaderModifier, requestHeaderModifier: {remove: [x-a]}}
    - {type: URLRewrite, urlRewrite: {hostname: a.example.com}}
    backendRefs: [{name: svc, port: 80}]
  - filters:
    - {type: URLRewrite, urlRewrite: {hostname: b.example.com}}
    - {type: URLRewrite, urlRewrite: {hostname: c.example.com}}
    backendRefs: [{name: svc, port: 80}]
""",
     ["spec.rules[1].filters: Invalid value: \"array\": URLRewrite filter cannot be repeated"]),
]

VALID_ROUTE = """apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: good}
spec:
  parentRefs: [{name: gw}]
  hostnames: [app.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /api}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /v2}}}]
    backendRefs: [{name: svc, port: 80}]
"""


def main():
    root = os.environ.get("KWATCH_GATEWAY_API_DIR")
    if not root:
        print("KWATCH_GATEWAY_API_DIR is not set: skipping (Gateway API's CRDs are not kept here)")
        sys.exit(77)
    crds = sorted(glob.glob(os.path.join(root, "config/crd/standard/*.yaml")) or
                  glob.glob(os.path.join(root, "*.yaml")))
    crds = [c for c in crds if "vap" not in os.path.basename(c)]
    examples = sorted(glob.glob(os.path.join(root, "examples/standard/**/*.yaml"), recursive=True))
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary).start()
        try:
            kc = kubectl_runner(server, tmp)
            if kc is None:
                t.check("kubectl is installed", False)
                return
            for path in crds:
                with open(path) as f:
                    code, out = kc("apply", "--server-side", "-f", "-", stdin=f.read())
                t.check(f"{os.path.basename(path)} installs unchanged", code == 0, out[-400:])

            def routes_served():
                return server.request(
                    "GET", "/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes")[0] == 200
            wait_for(routes_served, 30, "HTTPRoutes to be served")

            code, out = kc("apply", "-f", "-", stdin=VALID_ROUTE)
            t.check("a valid HTTPRoute is created", code == 0, out)
            for what, manifest, messages in INVALID:
                code, out = kc("apply", "-f", "-", stdin=manifest)
                missing = [m for m in messages if m not in out]
                t.check(f"refused: {what}", code != 0 and not missing, out[-600:])

            # The project's examples, as documented: every one is valid (namespaces they name
            # are created first; a server-side dry run validates without storing).
            refused = []
            for path in examples:
                with open(path) as f:
                    text = f.read()
                for ns in ("foo", "bar", "team-1-ns", "team-2-ns", "gateway-api-example-ns1",
                           "gateway-api-example-ns2", "infra-ns", "site-ns", "store-ns"):
                    kc("create", "namespace", ns)
                code, out = kc("apply", "--dry-run=server", "-f", "-", stdin=text)
                if code != 0 and "namespaces" not in out:
                    refused.append(f"{os.path.basename(path)}: {out[-300:]}")
            if examples:
                t.check(f"all {len(examples)} documented examples are accepted", not refused,
                        "\n".join(refused)[:2000])
            t.check("server alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
