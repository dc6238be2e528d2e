"""CRD validation rules (x-kubernetes-validations) as an operator's users meet them: install a
definition whose rules use CEL, then create and update its objects with kubectl and the Python
client: valid objects are stored, invalid ones refused with kube's words (the rule's message, its
messageExpression, its reason and field path), transition rules compare with the stored object,
a value the update left alone only warns (ratcheting), and a definition whose rule does not
compile is refused.

Usage: cel_rules_test.py <path to kwatch-apiserver>
"""
import json
import sys

from harness import Checks, Server, TempDir, check_flood, kubectl_runner, wait_for

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ROCKETS = "/apis/space.example.com/v1/namespaces/default/rockets"

CRD_YAML = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: rockets.space.example.com
spec:
  group: space.example.com
  scope: Namespaced
  names: {plural: rockets, singular: rocket, kind: Rocket}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-validations:
        - rule: "self.metadata.name.startsWith('r-')"
          message: "rocket names start with r-"
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.stages <= 4"
              messageExpression: "'rocket ' + self.name + ' has more than 4 stages'"
            - rule: "!has(self.payload) || self.payload.all(p, p.mass > 0)"
              message: "every payload has a mass"
              fieldPath: ".payload"
              reason: FieldValueForbidden
            properties:
              name:
                type: string
                maxLength: 32
                x-kubernetes-validations:
                - rule: "self == oldSelf"
                  message: "name is immutable"
              stages: {type: integer}
              fuel: {type: string, maxLength: 16}
              payload:
                type: array
                maxItems: 8
                items:
                  type: object
                  properties:
                    kind: {type: string, maxLength: 16}
                    mass: {type: integer}
"""

# The same definition with one more rule on spec: fuel is one of two kinds.
FUEL_RULE = """            - rule: "!has(self.fuel) || self.fuel in ['kerosene', 'hydrogen']"
              message: "unknown fuel"
"""


def rocket_yaml(name, stages=2, fuel=None, label=None, payload_mass=None, rocket_name="falcon"):
    labels = f"\n  labels: {{crew: {label}}}" if label else ""
    lines = [f"apiVersion: space.example.com/v1", "kind: Rocket",
             f"metadata:\n  name: {name}{labels}", "spec:", f"  name: {rocket_name}",
             f"  stages: {stages}"]
    if fuel:
        lines.append(f"  fuel: {fuel}")
    if payload_mass is not None:
        lines.append(f"  payload: [{{kind: probe, mass: {payload_mass}}}]")
    return "\n".join(lines) + "\n"


def served(server):
    def ok():
        status, _ = server.request("GET", ROCKETS)
        return status == 200
    return ok


def checks_of(t, server, tmp):
    kc = kubectl_runner(server, tmp)
    if kc is None:
        t.check("kubectl is installed", False)
        return
    code, out = kc("apply", "-f", "-", stdin=CRD_YAML)
    t.check("the definition with rules installs", code == 0, out)
    wait_for(served(server), 20, "rockets to be served")

    code, out = kc("create", "-f", "-", stdin=rocket_yaml("r-one"))
    t.check("a rocket that keeps every rule is created", code == 0, out)

    code, out = kc("create", "-f", "-", stdin=rocket_yaml("r-big", stages=6))
    t.check("a messageExpression words the refusal",
            code != 0 and 'The Rocket "r-big" is invalid: spec: Invalid value: "object": '
            'rocket falcon has more than 4 stages' in out, out)

    code, out = kc("create", "-f", "-", stdin=rocket_yaml("bad-name"))
    t.check("a rule at the root is reported at <nil>",
            code != 0 and '<nil>: Invalid value: "object": rocket names start with r-' in out, out)

    code, out = kc("create", "-f", "-", stdin=rocket_yaml("r-empty", payload_mass=0))
    t.check("reason and fieldPath place a Forbidden at the field",
            code != 0 and "spec.payload: Forbidden: every payload has a mass" in out, out)

    code, out = kc("patch", "rocket", "r-one", "--type=merge", "-p",
                   json.dumps({"spec": {"name": "starship"}}))
    t.check("a transition rule refuses a change of an immutable field",
            code != 0 and 'spec.name: Invalid value: "string": name is immutable' in out, out)
    code, out = kc("patch", "rocket", "r-one", "--type=merge", "-p",
                   json.dumps({"spec": {"stages": 3}}))
    t.check("a transition rule lets other changes through", code == 0, out)

    # Ratcheting: an object stored before a rule existed keeps its value, with a warning.
    code, out = kc("create", "-f", "-", stdin=rocket_yaml("r-old", fuel="methane"))
    t.check("a rocket on methane is created before the fuel rule", code == 0, out)
    code, out = kc("apply", "-f", "-", stdin=CRD_YAML.replace(
        "            properties:\n              name:", FUEL_RULE + "            properties:\n"
        "              name:", 1))
    t.check("the fuel rule is added", code == 0, out)

    def fuel_rule_served():
        c, o = kc("create", "--dry-run=server", "-f", "-", stdin=rocket_yaml("r-probe", fuel="coal"))
        return c != 0 and "unknown fuel" in o
    wait_for(fuel_rule_served, 20, "the fuel rule to be served")
    code, out = kc("label", "rocket", "r-old", "crew=three")
    t.check("an update that leaves the methane alone succeeds with a warning",
            code == 0 and 'Warning: spec: Invalid value: "object": unknown fuel' in out, out)
    code, out = kc("patch", "rocket", "r-old", "--type=merge", "-p",
                   json.dumps({"spec": {"fuel": "coal"}}))
    t.check("changing the fuel to another unknown one is refused",
            code != 0 and 'spec: Invalid value: "object": unknown fuel' in out, out)

    # The Python client sees the 422 with its causes.
    try:
        from kubernetes import client as k8s
        from kubernetes.client.rest import ApiException
        cfg = k8s.Configuration()
        cfg.host = f"http://127.0.0.1:{server.port}"
        api = k8s.CustomObjectsApi(k8s.ApiClient(cfg))
        try:
            api.create_namespaced_custom_object(
                "space.example.com", "v1", "default", "rockets",
                {"apiVersion": "space.example.com/v1", "kind": "Rocket",
                 "metadata": {"name": "r-py"}, "spec": {"name": "x", "stages": 9}})
            t.check("the Python client is refused an invalid rocket", False, "created")
        except ApiException as e:
            body = json.loads(e.body)
            causes = body.get("details", {}).get("causes", [])
            t.check("the Python client is refused an invalid rocket with its cause",
                    e.status == 422 and causes and causes[0].get("field") == "spec"
                    and causes[0].get("reason") == "FieldValueInvalid"
                    and "rocket x has more than 4 stages" in causes[0].get("message", ""), e.body[:400])
    except ImportError:
        t.check("python3-kubernetes is installed", False)

    # A message built from an unbounded string: kube's estimate is past the limit.
    costly = CRD_YAML.replace("'rocket ' + self.name", "'stages: ' + string(self.stages)").replace(
        "rockets", "costlies").replace("Rocket", "Costly").replace("rocket", "costly")
    code, out = kc("apply", "-f", "-", stdin=costly)
    t.check("a definition whose messageExpression may cost too much is refused",
            code != 0 and "x-kubernetes-validations[0].messageExpression: Forbidden: estimated "
            "messageExpression cost exceeds budget by factor of more than 100x" in out, out)

    regex = CRD_YAML.replace("rockets", "sondes").replace("Rocket", "Sonde").replace(
        "rocket", "sonde").replace("self.stages <= 4", "self.name.matches('[a-')")
    code, out = kc("apply", "-f", "-", stdin=regex)
    t.check("a definition whose rule holds a pattern RE2 refuses is refused when written",
            code != 0 and "x-kubernetes-validations[0].rule: Invalid value:" in out
            and "compilation failed: ERROR: <input>:1:19: invalid matches argument" in out, out)

    bad = CRD_YAML.replace("rockets", "probes").replace("Rocket", "Probe").replace(
        "rocket", "probe").replace("self.stages <= 4", "self.stage <= 4")
    code, out = kc("apply", "-f", "-", stdin=bad)
    t.check("a definition whose rule does not compile is refused",
            code != 0 and "x-kubernetes-validations[0].rule: Invalid value:" in out
            and "compilation failed: ERROR: <input>:1:5: undefined field 'stage'" in out, out)


HEAVY_CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: grids.space.example.com
spec:
  group: space.example.com
  scope: Namespaced
  names: {plural: grids, singular: grid, kind: Grid}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.xs.all(a, self.xs.all(b, a + b > -1))"
            properties:
              xs: {type: array, maxItems: 1000, items: {type: integer}}
"""


def check_hostile_rules(t, server, kc):
    """The most expensive rule a definition may have (within kube's estimate), hit by writes
    from several clients at once: each write is stopped by the per-evaluation limit, and the
    server keeps answering its health check."""
    code, out = kc("apply", "-f", "-", stdin=HEAVY_CRD)
    t.check("a definition with the most expensive allowed rule installs", code == 0, out)
    path = "/apis/space.example.com/v1/namespaces/default/grids"
    wait_for(lambda: server.request("GET", path)[0] == 200, 20, "grids to be served")
    body = json.dumps({"apiVersion": "space.example.com/v1", "kind": "Grid",
                       "metadata": {"generateName": "g-"}, "spec": {"xs": list(range(1000))}})
    check_flood(t, server, path, lambda i, n: body, "call cost exceeds limit",
                "every flooding write is refused by the per-evaluation cost limit")


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary).start()
        try:
            checks_of(t, server, tmp)
            kc = kubectl_runner(server, tmp)
            if kc is not None:
                check_hostile_rules(t, server, kc)
            t.check("server alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
