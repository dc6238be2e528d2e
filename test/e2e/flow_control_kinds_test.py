"""flowcontrol.apiserver.k8s.io/v1 FlowSchemas and PriorityLevelConfigurations as clients meet
them: created, listed (kubectl's columns), updated and deleted with kubectl and the Python client,
v1's defaults filled in, the generation counting spec changes, /status writing only the status,
and kube's 422 refusals word for word.

Usage: flow_control_kinds_test.py <path to kwatch-apiserver>
"""
import json

from harness import kubectl_runner, python_api_client, run_suite, wait_for

GROUP = "/apis/flowcontrol.apiserver.k8s.io/v1"

LEVEL = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
    "metadata": {"name": "batch-jobs"},
    "spec": {"type": "Limited", "limited": {
        "limitResponse": {"type": "Queue", "queuing": {"queues": 32}}}},
}

SCHEMA = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
    "metadata": {"name": "batch-users"},
    "spec": {
        "priorityLevelConfiguration": {"name": "batch-jobs"},
        "distinguisherMethod": {"type": "ByNamespace"},
        "rules": [{
            "subjects": [{"kind": "Group", "group": {"name": "batch"}}],
            "resourceRules": [{"verbs": ["get", "list"], "apiGroups": ["batch"],
                               "resources": ["jobs"], "namespaces": ["*"]}],
        }],
    },
}


def checks(t, server, tmp):
    kc = kubectl_runner(server, tmp)
    if kc is not None:
        with_kubectl(t, server, kc)
    python_client(t, server, tmp)
    refusals(t, server)


def with_kubectl(t, server, kc):
    code, out = kc("create", "-f", "-", stdin=json.dumps(LEVEL))
    t.check("kubectl creates a PriorityLevelConfiguration", code == 0, out)
    code, out = kc("create", "-f", "-", stdin=json.dumps(SCHEMA))
    t.check("kubectl creates a FlowSchema", code == 0, out)

    code, out = kc("get", "prioritylevelconfigurations", "-o", "json")
    items = json.loads(out)["items"] if code == 0 else []
    level = items[0] if items else {}
    t.check("v1's defaults fill the level (30 shares, lendable 0, hand 8, queue length 50)",
            level.get("spec", {}).get("limited") == {
                "nominalConcurrencyShares": 30, "lendablePercent": 0,
                "limitResponse": {"type": "Queue", "queuing": {
                    "queues": 32, "handSize": 8, "queueLengthLimit": 50}}},
            json.dumps(level.get("spec"))[:400])
    t.check("it starts with an empty status and generation 1",
            level.get("status") == {} and level.get("metadata", {}).get("generation") == 1,
            json.dumps(level)[:400])

    # The server's own bootstrap objects are listed too: look at the test's objects by name.
    code, out = kc("get", "prioritylevelconfigurations", "batch-jobs")
    lines = out.splitlines() if code == 0 else []
    t.check("kubectl get prioritylevelconfigurations shows kube's columns",
            len(lines) == 2 and lines[0].split() == [
                "NAME", "TYPE", "NOMINALCONCURRENCYSHARES", "QUEUES", "HANDSIZE",
                "QUEUELENGTHLIMIT", "AGE"] and lines[1].split()[:6] == [
                "batch-jobs", "Limited", "30", "32", "8", "50"], out)
    # API Priority and Fairness writes the Dangling condition: MissingPL says False once it has.
    wait_for(lambda: kc("get", "flowschema", "batch-users")[1].splitlines()[-1].split()[-1] == "False",
             what="the Dangling condition of batch-users")
    code, out = kc("get", "flowschemas", "batch-users")
    lines = out.splitlines() if code == 0 else []
    t.check("kubectl get flowschemas shows kube's columns",
            len(lines) == 2 and lines[0].split() == [
                "NAME", "PRIORITYLEVEL", "MATCHINGPRECEDENCE", "DISTINGUISHERMETHOD", "AGE",
                "MISSINGPL"] and lines[1].split()[:4] == [
                "batch-users", "batch-jobs", "1000", "ByNamespace"] and
            lines[1].split()[-1] == "False", out)

    # An update of the spec counts a generation; the status only moves through /status.
    status_before = server.request("GET", f"{GROUP}/flowschemas/batch-users")[1]["status"]
    code, out = kc("patch", "flowschema", "batch-users", "--type=merge", "-p",
                   '{"spec": {"matchingPrecedence": 500}, "status": {"conditions": '
                   '[{"type": "Dangling", "status": "True"}]}}')
    t.check("kubectl patches a FlowSchema", code == 0, out)
    status, fs = server.request("GET", f"{GROUP}/flowschemas/batch-users")
    t.check("the spec changed, the generation counted it, the status stayed",
            status == 200 and fs["spec"]["matchingPrecedence"] == 500 and
            fs["metadata"]["generation"] == 2 and fs["status"] == status_before, fs)
    status, body = server.request(
        "PATCH", f"{GROUP}/flowschemas/batch-users/status",
        body={"status": {"conditions": [{"type": "Dangling", "status": "True",
                                         "reason": "NotFound", "message": "no such level"}]},
              "spec": {"matchingPrecedence": 9}},
        headers={"Content-Type": "application/merge-patch+json"})
    t.check("/status writes the conditions and not the spec",
            status == 200 and body["status"]["conditions"][0]["type"] == "Dangling" and
            body["spec"]["matchingPrecedence"] == 500 and body["metadata"]["generation"] == 2,
            (status, body))
    # A FlowSchema naming a level that does not exist: the server says so, MissingPL shows it.
    orphan = json.loads(json.dumps(SCHEMA))
    orphan["metadata"]["name"] = "orphaned"
    orphan["spec"]["priorityLevelConfiguration"]["name"] = "no-such-level"
    kc("create", "-f", "-", stdin=json.dumps(orphan))
    wait_for(lambda: kc("get", "flowschema", "orphaned")[1].splitlines()[-1].split()[-1] == "True",
             what="MissingPL of a FlowSchema naming a missing level")
    t.check("MISSINGPL shows the Dangling condition", True)
    kc("delete", "flowschema", "orphaned")

    # kube lists FlowSchemas in the order requests meet them: precedence, then name.
    for name, precedence in (("aa-late", 9000), ("zz-early", 50)):
        other = json.loads(json.dumps(SCHEMA))
        other["metadata"]["name"] = name
        other["spec"]["matchingPrecedence"] = precedence
        code, out = kc("create", "-f", "-", stdin=json.dumps(other))
        t.check(f"kubectl creates FlowSchema {name}", code == 0, out)
    code, out = kc("get", "flowschemas")
    names = [line.split()[0] for line in out.splitlines()[1:]] if code == 0 else []
    ours = [n for n in names if n in ("zz-early", "batch-users", "aa-late")]
    t.check("kubectl get flowschemas lists them by matching precedence",
            ours == ["zz-early", "batch-users", "aa-late"] and names[0] == "exempt" and
            names[-1] == "catch-all", out)
    code, out = kc("delete", "flowschema", "aa-late", "zz-early")
    t.check("kubectl deletes two FlowSchemas", code == 0, out)

    code, out = kc("delete", "flowschema", "batch-users")
    t.check("kubectl deletes a FlowSchema", code == 0, out)
    code, out = kc("delete", "prioritylevelconfiguration", "batch-jobs")
    t.check("kubectl deletes a PriorityLevelConfiguration", code == 0, out)
    code, out = kc("get", "flowschemas,prioritylevelconfigurations", "-o", "name")
    gone = {"flowschema.flowcontrol.apiserver.k8s.io/batch-users",
            "prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/batch-jobs"}
    t.check("both are gone", code == 0 and not gone & set(out.split()), out)


def python_client(t, server, tmp):
    api_client = python_api_client(t, server, tmp)
    if api_client is None:
        return
    from kubernetes import dynamic
    try:
        # python-kubernetes 22.6 has no typed flowcontrol v1 API: the dynamic client reads
        # discovery.
        dyn = dynamic.DynamicClient(api_client)
        levels = dyn.resources.get(api_version="flowcontrol.apiserver.k8s.io/v1",
                                   kind="PriorityLevelConfiguration")
        schemas = dyn.resources.get(api_version="flowcontrol.apiserver.k8s.io/v1", kind="FlowSchema")
        level = dict(LEVEL, metadata={"name": "py-level"})
        level["spec"] = {"type": "Limited", "limited": {"nominalConcurrencyShares": 0,
                                                        "limitResponse": {"type": "Reject"}}}
        made = levels.create(body=level)
        t.check("the Python client creates a level with zero shares, which v1 keeps",
                made.spec.limited.nominalConcurrencyShares == 0 and
                made.spec.limited.lendablePercent == 0, made.spec)
        schema = dict(SCHEMA, metadata={"name": "py-schema"})
        schema["spec"] = dict(SCHEMA["spec"], priorityLevelConfiguration={"name": "py-level"})
        schemas.create(body=schema)
        got = schemas.get(name="py-schema")
        t.check("the Python client reads it back, defaulted", got.spec.matchingPrecedence == 1000
                and got.spec.priorityLevelConfiguration.name == "py-level", got.spec)
        got_dict = got.to_dict()
        got_dict["spec"]["distinguisherMethod"] = {"type": "ByUser"}
        updated = schemas.replace(body=got_dict)
        t.check("the Python client updates it", updated.spec.distinguisherMethod.type == "ByUser" and
                updated.metadata.generation == 2, updated.metadata)
        schemas.delete(name="py-schema")
        levels.delete(name="py-level")
        names = [i.metadata.name for i in schemas.get().items + levels.get().items]
        t.check("the Python client deletes them",
                "py-schema" not in names and "py-level" not in names, names)
    except Exception as e:  # noqa: BLE001 - any client failure is the check's failure
        t.check("the Python client works with flowcontrol v1", False, repr(e)[:500])


def refusals(t, server):
    def create(resource, obj):
        return server.request("POST", f"{GROUP}/{resource}", body=obj)

    level = json.loads(json.dumps(LEVEL))
    level["metadata"]["name"] = "bad-level"
    level["spec"]["limited"]["limitResponse"]["queuing"] = {"queues": 64, "handSize": 65}
    status, body = create("prioritylevelconfigurations", level)
    t.check("a hand larger than the deck is refused with kube's message",
            status == 422 and body.get("reason") == "Invalid" and body.get("message") ==
            'PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io "bad-level" is invalid: '
            "spec.limited.limitResponse.queuing.handSize: Invalid value: 65: should not be "
            "greater than queues (64)", (status, body))
    level["spec"]["limited"]["limitResponse"]["queuing"] = {"queues": 1024, "handSize": 7}
    status, body = create("prioritylevelconfigurations", level)
    t.check("a hand that needs too much entropy is refused with kube's message",
            status == 422 and body.get("details", {}).get("causes") == [{
                "reason": "FieldValueInvalid",
                "message": "Invalid value: 7: required entropy bits of deckSize 1024 and "
                           "handSize 7 should not be greater than 60",
                "field": "spec.limited.limitResponse.queuing.handSize"}], (status, body))

    schema = json.loads(json.dumps(SCHEMA))
    schema["metadata"]["name"] = "bad-schema"
    schema["spec"]["matchingPrecedence"] = 1
    schema["spec"]["rules"][0]["resourceRules"][0]["verbs"] = ["get", "fly"]
    status, body = create("flowschemas", schema)
    t.check("precedence 1 and an unknown verb are refused with kube's messages",
            status == 422 and body.get("message") ==
            'FlowSchema.flowcontrol.apiserver.k8s.io "bad-schema" is invalid: ['
            "spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have "
            "matchingPrecedence 1, spec.rules[0].resourceRules[0].verbs: Unsupported value: "
            '[]string{"get", "fly"}: supported values: "create", "delete", "deletecollection", '
            '"get", "list", "patch", "proxy", "update", "watch"]', (status, body))

    exempt = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
              "metadata": {"name": "exempt"}, "spec": {"type": "Limited", "limited": {
                  "limitResponse": {"type": "Reject"}}}}
    status, body = create("prioritylevelconfigurations", exempt)
    causes = body.get("details", {}).get("causes", []) if isinstance(body, dict) else []
    t.check("the exempt level must be Exempt and keep kube's spec",
            status == 422 and [c["field"] for c in causes] == ["spec.type", "spec"] and
            causes[0]["message"] == "Invalid value: \"Limited\": type must be 'Exempt' if and "
                                    "only if name is 'exempt'" and
            causes[1]["message"].endswith("spec of 'exempt' except the 'spec.exempt' field must "
                                          "equal the fixed value"), (status, body))


if __name__ == "__main__":
    run_suite(checks)
