"""The NetworkPolicies (both overlays): what each component's pods may receive and reach.

The policies are read as the API server combines them: a pod is isolated in a
direction once any policy selecting it names that direction, and then gets the
union of the rules of every policy that selects it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.manifests import WORKERS, Doc, Rendered

# Never reachable from a worker's public egress: the cluster's and the private
# ranges, carrier-grade NAT, link-local (cloud metadata), loopback; and IPv6's.
PRIVATE = {
    "0.0.0.0/0": {
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "169.254.0.0/16",
        "127.0.0.0/8",
    },
    "::/0": {"fc00::/7", "fe80::/10", "::1/128", "::ffff:0:0/96"},
}
STORES = {"postgresql": {("TCP", 5432)}, "redis": {("TCP", 6379)}}
DNS = {("UDP", 53), ("TCP", 53)}
WEB = {("TCP", 80), ("TCP", 443)}
SMTP = {("TCP", 25), ("TCP", 465), ("TCP", 587)}


def selects(selector: Doc, labels: dict[str, str]) -> bool:
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        if not {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels[key] not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]:
            return False
    return True


def peer(entry: Doc) -> str:
    """A name for a rule's peer; a peer this test does not know fails the test."""
    if "ipBlock" in entry:
        block = entry["ipBlock"]
        assert PRIVATE[block["cidr"]] <= set(block.get("except", [])), f"{block} reaches private addresses"
        return "public"
    namespaces = entry.get("namespaceSelector", {}).get("matchLabels", {})
    pods = entry.get("podSelector", {}).get("matchLabels", {})
    namespace = namespaces.get("kubernetes.io/metadata.name")
    known = {
        ("kube-system", "k8s-app", "kube-dns"): "dns",
        ("ingress-nginx", None, None): "ingress",
        ("monitoring", "app.kubernetes.io/name", "prometheus"): "prometheus",
        (None, "app.kubernetes.io/name", "postgresql"): "postgresql",
        (None, "app.kubernetes.io/name", "redis"): "redis",
        (None, "app.kubernetes.io/component", "wb-sandbox"): "wb-sandbox",
        (None, "app.kubernetes.io/component", "worker"): "workers",
    }
    for (ns, key, value), name in known.items():
        if namespace == ns and ((key is None and not pods) or (key is not None and pods.get(key) == value)):
            return name
    raise AssertionError(f"unknown peer {entry}")


def allowed(rendered: Rendered, labels: dict[str, str], direction: str) -> dict[str, set] | None:
    """{peer: {(protocol, port)}} the pod may use in one direction; None: not isolated (all allowed)."""
    policies = [p for p in rendered.all("NetworkPolicy") if selects(p["spec"]["podSelector"], labels)]
    if not any(direction in p["spec"]["policyTypes"] for p in policies):
        return None
    field, side = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    found: dict[str, set] = {}
    for policy in policies:
        for rule in policy["spec"].get(field, []):
            ports = {(p.get("protocol", "TCP"), p["port"]) for p in rule["ports"]}
            for entry in rule[side]:
                found.setdefault(peer(entry), set()).update(ports)
    return found


def pod(rendered: Rendered, name: str) -> tuple[dict[str, str], dict[str, Any]]:
    (workload,) = [w for w in rendered.workloads() if w["metadata"]["name"] == name]
    template = workload["spec"]["template"]
    (container,) = template["spec"]["containers"]
    return template["metadata"]["labels"], {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def test_everything_is_denied_unless_allowed(rendered: Rendered):
    catch_all = [p["spec"] for p in rendered.all("NetworkPolicy") if p["spec"]["podSelector"] == {}]
    assert catch_all == [{"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}]
    for workload in rendered.workloads():
        labels, _ = pod(rendered, workload["metadata"]["name"])
        for direction in ("Ingress", "Egress"):
            assert allowed(rendered, labels, direction) is not None, (workload["metadata"]["name"], direction)


def test_the_api_takes_requests_from_the_ingress_and_scrapes_from_prometheus_only(rendered: Rendered):
    labels, ports = pod(rendered, "gatehouse-api")

    assert allowed(rendered, labels, "Ingress") == {
        "ingress": {("TCP", "http")},
        "prometheus": {("TCP", "metrics")},
    }
    assert {"http", "metrics"} <= ports.keys()
    # It calls nothing but its stores
    assert allowed(rendered, labels, "Egress") == {"dns": DNS, **STORES}


@pytest.mark.parametrize("name", WORKERS)
def test_workers_reach_their_stores_and_public_http_only(rendered: Rendered, name: str):
    labels, ports = pod(rendered, name)
    public = WEB | (SMTP if name == "gatehouse-worker-b2b" else set())
    sandbox = {"wb-sandbox": {("TCP", 8081)}} if rendered.overlay == "dev" else {}

    assert allowed(rendered, labels, "Egress") == {"dns": DNS, **STORES, "public": public, **sandbox}
    assert allowed(rendered, labels, "Ingress") == {"prometheus": {("TCP", "health")}}
    assert "health" in ports
    if sandbox:  # (dev) and only the workers reach the sandbox
        sandbox_pod, _ = pod(rendered, "gatehouse-wb-sandbox")
        assert allowed(rendered, sandbox_pod, "Ingress") == {"workers": {("TCP", "http")}}


def test_the_scheduler_reaches_its_stores_only_and_the_migrations_postgresql(rendered: Rendered):
    scheduler, _ = pod(rendered, "gatehouse-scheduler")
    migrate, _ = pod(rendered, "gatehouse-migrate")

    assert allowed(rendered, scheduler, "Egress") == {"dns": DNS, **STORES}
    assert allowed(rendered, migrate, "Egress") == {"dns": DNS, "postgresql": STORES["postgresql"]}
    for labels in (scheduler, migrate):
        assert allowed(rendered, labels, "Ingress") == {}


def test_a_public_egress_without_the_private_ranges_excepted_is_refused():
    with pytest.raises(AssertionError, match="reaches private addresses"):
        peer({"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}})
