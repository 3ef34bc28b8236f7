"""The Kubernetes manifests in deploy/kubernetes/, offline: schema-valid for the stated Kubernetes version, consistent
with each other, with the memory budget, and with the project's nginx rules (deploy/nginx.conf.template).

No cluster runs here. What is checked: every object against the official schemas of Kubernetes 1.33
(kubernetes-validate, strict: unknown fields fail); the Deployment's threads, probes, security context and
resources (derived from the memory budget as tests/app/test_memory.py bounds a server); that the Ingress
controller is given every limit and timeout the nginx template sets, with the same values; and that every path,
hostile ones included, reaches the pods' edge (the template itself, tested live in tests/app/test_container.py).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from deploy.entrypoint import STOP_TIMEOUT_S
from tests.app.test_container import HOSTILE

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.33.0"
NGINX = "nginx.ingress.kubernetes.io/"
# The warm app process in the container (554 MB measured after its warm-up, rounded up) and the headroom that
# tests/app/test_memory.py allows a server above twice its budget.
WARM_PROCESS_MI = 600
HEADROOM_MI = 600


def documents(name: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]


def objects() -> dict[tuple[str, str], dict]:
    """(kind, name) -> object, for every resource the kustomization applies."""
    kustomization = documents("kustomization.yaml")[0]
    return {(doc["kind"], doc["metadata"]["name"]): doc for name in kustomization["resources"] for doc in documents(name)}


def app_and_edge() -> tuple[dict, dict]:
    pod = objects()[("Deployment", "encoder-explorer")]["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    return containers["app"], containers["edge"]


def env(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container["env"]}


def mebibytes(quantity: str) -> float:
    value, unit = re.fullmatch(r"(\d+(?:\.\d+)?)(Mi|Gi)", quantity).groups()
    return float(value) * (1024 if unit == "Gi" else 1)


@pytest.mark.parametrize("name", sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml"))
def test_every_manifest_is_valid_for_the_stated_kubernetes_version(name) -> None:
    for doc in documents(name):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)  # raises with the field at fault


def test_a_schema_error_is_caught() -> None:
    """The control: the validator really rejects a mistake of the kind a hand-written manifest makes."""
    app, _ = app_and_edge()
    deployment = objects()[("Deployment", "encoder-explorer")]
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["resources"]["limit"] = app["resources"]["limits"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_the_kustomization_applies_every_manifest_of_the_app() -> None:
    kustomization = documents("kustomization.yaml")[0]
    # The controller's ConfigMap lives in the controller's namespace and is its operator's to apply.
    expected = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "ingress-nginx-controller.yaml"}
    assert set(kustomization["resources"]) == expected
    images = {image["name"] for image in kustomization["images"]}
    assert {c["image"] for c in app_and_edge()} == images  # both containers get the pushed image


def test_labels_and_names_tie_the_objects_together() -> None:
    objs = objects()
    deployment = objs[("Deployment", "encoder-explorer")]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert objs[("Service", "encoder-explorer")]["spec"]["selector"].items() <= labels.items()
    assert objs[("PodDisruptionBudget", "encoder-explorer")]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    hpa = objs[("HorizontalPodAutoscaler", "encoder-explorer")]["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "encoder-explorer"}
    assert deployment["spec"]["replicas"] == hpa["minReplicas"] >= 2  # a pod can die without taking the class down
    assert [m["resource"]["name"] for m in hpa["metrics"]] == ["cpu"]
    assert objs[("PodDisruptionBudget", "encoder-explorer")]["spec"]["maxUnavailable"] == 1


def test_the_app_container_as_the_issue_asks() -> None:
    app, edge = app_and_edge()
    pod = objects()[("Deployment", "encoder-explorer")]["spec"]["template"]["spec"]
    assert env(app)["OMP_NUM_THREADS"] == "1"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    for c in (app, edge):
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        volumes = {m["mountPath"] for m in c["volumeMounts"]}
        assert volumes <= {"/tmp", "/cache"} and "/tmp" in volumes  # the only writable places
    # Probes: the startup probe waits for warm and healthy; readiness and liveness ask /_stcore/health.
    assert app["startupProbe"]["exec"]["command"][-1] == "/app/deploy/ready.py"
    assert "/_stcore/health" in (ROOT / "deploy" / "ready.py").read_text() + (ROOT / "deploy" / "entrypoint.py").read_text()
    for probe in ("readinessProbe", "livenessProbe"):
        assert app[probe]["httpGet"] == {"path": "/_stcore/health", "port": "app"}
    startup = app["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 120  # the entrypoint's own start timeout
    grace = pod["terminationGracePeriodSeconds"]
    assert STOP_TIMEOUT_S < grace  # the app ends itself before the kubelet's SIGKILL
    assert edge["command"] == ["/app/deploy/edge.sh"]
    assert env(edge)["UPSTREAM"] == f"127.0.0.1:{env(app)['STREAMLIT_SERVER_PORT']}"


def test_resources_follow_the_memory_budget() -> None:
    app, _ = app_and_edge()
    budget = int(env(app)["ENCODER_EXPLORER_MEMORY_MB"])
    resources = app["resources"]
    assert mebibytes(resources["requests"]["memory"]) == WARM_PROCESS_MI + budget
    assert mebibytes(resources["limits"]["memory"]) == WARM_PROCESS_MI + 2 * budget + HEADROOM_MI
    # One PyTorch thread: a pod uses at most about one core (0.8 measured at saturation).
    assert resources["limits"]["cpu"] == "1" and resources["requests"]["cpu"] == "500m"


def test_every_ingress_host_is_an_allowed_host() -> None:
    app, _ = app_and_edge()
    hosts = {rule["host"] for obj in ingresses().values() for rule in obj["spec"]["rules"]}
    assert hosts and hosts <= set(env(app)["ALLOWED_HOSTS"].split())


# --- The Ingress against deploy/nginx.conf.template ---------------------------------------------------------------

def nginx_blocks(text: str) -> list:
    """nginx configuration -> [(directive, [args], children or None)], comments dropped."""
    tokens = re.findall(r'"[^"]*"|[{};]|[^\s{};"]+', re.sub(r"(?m)^\s*#.*$|\s#.*$", "", text))
    pos = 0

    def block() -> list:
        nonlocal pos
        out, words = [], []
        while pos < len(tokens):
            tok = tokens[pos]
            pos += 1
            if tok == ";":
                out.append((words[0], words[1:], None))
                words = []
            elif tok == "{":
                out.append((words[0], words[1:], block()))
                words = []
            elif tok == "}":
                return out
            else:
                words.append(tok.strip('"'))
        return out

    return block()


def template() -> tuple[dict[str, list[str]], dict[str, list[str]], str]:
    """(server-level directives, the WebSocket location's directives, the route cookie's Set-Cookie value)."""
    conf = subprocess.run(["bash", str(ROOT / "deploy" / "serve.sh"), "conf", "8080", "127.0.0.1:8501"],
                          capture_output=True, text=True, check=True, env={"SERVE_DIR": "/tmp/x", "PATH": "/usr/bin:/bin"}).stdout
    http = next(c for n, _, c in nginx_blocks(conf) if n == "http")
    server = next(c for n, _, c in http if n == "server")
    stream = next(c for n, a, c in server if n == "location" and a == ["=", "/_stcore/stream"])
    flat = {n: a for n, a, c in server if c is None}
    cookie = next(a[1] for n, a, c in server if n == "add_header" and a[0] == "Set-Cookie")
    return flat, {n: a for n, a, c in stream if c is None}, cookie


def seconds(value: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(ms|s|m|h|d)?", value).groups()
    return int(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}[unit]


def ingresses() -> dict[str, dict]:
    return {name: obj for (kind, name), obj in objects().items() if kind == "Ingress"}


def controller() -> dict[str, str]:
    return documents("ingress-nginx-controller.yaml")[0]["data"]


# Every limit and timeout of the template, and where the Ingress controller gets it: (template directive, where,
# annotation or controller key, how the two are compared). "main" is the Ingress for every path, "stream" the
# Ingress for /_stcore/stream, "controller" the controller's ConfigMap (no annotation exists for it).
AGREEMENT = [
    ("client_max_body_size", "main stream", "proxy-body-size", str.lower),
    ("large_client_header_buffers", "controller", "large-client-header-buffers", str),
    ("proxy_connect_timeout", "main stream", "proxy-connect-timeout", seconds),
    ("proxy_read_timeout", "main", "proxy-read-timeout", seconds),
    ("proxy_send_timeout", "main", "proxy-send-timeout", seconds),
    ("proxy_next_upstream", "main stream", "proxy-next-upstream", str),
    ("proxy_next_upstream_tries", "main stream", "proxy-next-upstream-tries", int),
    ("proxy_next_upstream_timeout", "main stream", "proxy-next-upstream-timeout", seconds),
    ("stream proxy_read_timeout", "stream", "proxy-read-timeout", seconds),
    ("stream proxy_send_timeout", "stream", "proxy-send-timeout", seconds),
    ("stream proxy_buffering", "stream", "proxy-buffering", str),
]
LIMIT = re.compile(r"timeout|size|buffer|tries|next_upstream")


def disagreements(server: dict[str, list[str]], stream: dict[str, list[str]], ing: dict[str, dict],
                  config: dict[str, str]) -> list[str]:
    """Every limit or timeout on which the Ingress objects or the controller's ConfigMap differ from the template."""
    out = []
    in_template = {n for n in server if LIMIT.search(n)} | {f"stream {n}" for n in stream if LIMIT.search(n)}
    out += [f"{d} has no Ingress twin" for d in sorted(in_template - {row[0] for row in AGREEMENT})]
    for directive, where, key, same in AGREEMENT:
        name = directive.removeprefix("stream ")
        value = " ".join((stream if directive.startswith("stream ") else server).get(name, ["(missing)"]))
        for place in where.split():
            theirs = config.get(key) if place == "controller" else ing[place]["metadata"]["annotations"].get(NGINX + key)
            if theirs is None or same(theirs) != same(value):
                out.append(f"{directive} is {value} in the template, {theirs} in {place}")
    return out


def test_the_ingress_has_every_limit_and_timeout_of_the_nginx_template() -> None:
    server, stream, _ = template()
    ing = {"main": ingresses()["encoder-explorer"], "stream": ingresses()["encoder-explorer-stream"]}
    assert disagreements(server, stream, ing, controller()) == []


def test_a_changed_limit_or_timeout_is_caught() -> None:
    """The control: the same comparison with one annotation changed, and with a new directive in the template."""
    server, stream, _ = template()
    ing = yaml.safe_load(yaml.safe_dump({"main": ingresses()["encoder-explorer"],
                                         "stream": ingresses()["encoder-explorer-stream"]}))
    ing["stream"]["metadata"]["annotations"][NGINX + "proxy-read-timeout"] = "3600"
    assert disagreements(server, stream, ing, controller()) == [
        "stream proxy_read_timeout is 4h in the template, 3600 in stream"]
    server = server | {"client_body_timeout": ["30s"]}
    assert "client_body_timeout has no Ingress twin" in disagreements(server, stream, ing, controller())


def test_sticky_cookies_agree_without_clashing() -> None:
    _, _, cookie = template()
    template_name = cookie.split("=", 1)[0]
    attributes = dict(part.strip().partition("=")[::2] for part in cookie.split(";")[1:])
    for obj in ingresses().values():
        annotations = obj["metadata"]["annotations"]
        assert annotations[NGINX + "affinity"] == "cookie"
        assert annotations[NGINX + "session-cookie-path"] == attributes["Path"]
        assert annotations[NGINX + "session-cookie-samesite"] == attributes["SameSite"]
        # Two cookies of one name would overwrite each other: the pod would change on every response.
        assert annotations[NGINX + "session-cookie-name"] != template_name
    assert len({o["metadata"]["annotations"][NGINX + "session-cookie-name"] for o in ingresses().values()}) == 1


def ingress_route(path: str) -> tuple[str, dict]:
    """The Ingress (name) and backend that Kubernetes' path rules give a request path: Exact, then the longest
    Prefix by path elements (the Ingress API's matching; ingress-nginx implements it without regexes)."""
    elements = [e for e in path.split("?")[0].split("/") if e]
    best = None
    for name, obj in ingresses().items():
        for rule in obj["spec"]["rules"]:
            for p in rule["http"]["paths"]:
                rule_elements = [e for e in p["path"].split("/") if e]
                if p["pathType"] == "Exact" and p["path"] == path.split("?")[0]:
                    rank = (2, len(rule_elements))
                elif p["pathType"] == "Prefix" and elements[:len(rule_elements)] == rule_elements:
                    rank = (1, len(rule_elements))
                else:
                    continue
                if best is None or rank > best[0]:
                    best = (rank, name, p["backend"])
    assert best is not None, f"no Ingress rule takes {path}"
    return best[1], best[2]


def test_every_path_hostile_or_not_reaches_the_pods_edge() -> None:
    _, edge = app_and_edge()
    service = objects()[("Service", "encoder-explorer")]["spec"]
    ports = {p["name"]: p["targetPort"] for p in service["ports"]}
    assert set(ports.values()) == {"edge"} and {p["name"] for p in edge["ports"]} == {"edge"}
    for _method, path, _body in [*HOSTILE, ("GET", "/_stcore/stream", None), ("GET", "/statistics", None)]:
        name, backend = ingress_route(path)
        assert backend["service"]["name"] == "encoder-explorer" and ports[backend["service"]["port"]["name"]] == "edge"
        assert (name == "encoder-explorer-stream") == (path == "/_stcore/stream"), path
