"""What the manifests must keep saying, whatever else changes in them (both overlays)."""

from __future__ import annotations

import subprocess

import pytest

from gatehouse.settings import Settings
from tests.deploy.manifests import K8S, Rendered, image_reference, pod_spec
from tests.support.processes import REPO

SECRET_KEYS = {"DATABASE_URL", "REDIS_URL", "ADMIN_TOKEN", "TOKEN_ENCRYPTION_KEY"}
# Past the shutdown timeout: gunicorn's graceful_timeout adds 10 s (gatehouse_api/gunicorn_conf.py),
# and a worker still requeues prefetched messages and closes its pools.
SHUTDOWN_MARGIN_S = 10


def shutdown_timeout_s(rendered: Rendered, container: dict) -> float:
    env = rendered.env(container)
    return int(env.get("SHUTDOWN_TIMEOUT_MS", Settings.model_fields["shutdown_timeout_ms"].default)) / 1000


def http_probe(container: dict, probe: str) -> tuple[str, int]:
    """(path, port number) of an httpGet probe, the named port resolved."""
    get = container[probe]["httpGet"]
    port = get["port"]
    if isinstance(port, str):
        port = next(p["containerPort"] for p in container["ports"] if p["name"] == port)
    return get["path"], port


def scale_targets(rendered: Rendered) -> set[str]:
    hpas = {h["spec"]["scaleTargetRef"]["name"] for h in rendered.all("HorizontalPodAutoscaler")}
    return hpas | {s["spec"]["scaleTargetRef"]["name"] for s in rendered.all("ScaledObject")}


def test_roles_and_commands(rendered: Rendered):
    api = rendered.container("Deployment", "gatehouse-api")
    worker = rendered.container("Deployment", "gatehouse-worker")

    assert api["command"] == ["gatehouse-api"]
    assert rendered.env(api)["BACKEND_ROLE"] == "api"
    assert worker["command"] == ["gatehouse-worker"]
    assert rendered.env(worker)["BACKEND_ROLE"] == "worker"
    # Processes are explicit: dramatiq's default is one per CPU of the node.
    assert "--processes" in worker["args"]
    assert rendered.container("Deployment", "gatehouse-scheduler")["command"] == ["gatehouse-scheduler"]
    assert rendered.container("Job", "gatehouse-migrate")["command"] == ["gatehouse-migrate"]
    # Roles are per Deployment, never shared configuration.
    for config in rendered.all("ConfigMap"):
        assert "BACKEND_ROLE" not in config.get("data", {})


def test_api_probes_readiness_on_readyz_and_liveness_on_healthz(rendered: Rendered):
    api = rendered.container("Deployment", "gatehouse-api")
    port = next(p["containerPort"] for p in api["ports"] if p["name"] == "http")

    assert http_probe(api, "readinessProbe") == ("/readyz", port)
    assert http_probe(api, "livenessProbe") == ("/healthz", port)
    # … where gatehouse-api listens, on every interface of the pod (its default is loopback only)
    env = rendered.env(api)
    assert env.get("API_HOST") == "0.0.0.0"
    assert int(env.get("API_PORT", 8000)) == port

    service = rendered.get("Service", "gatehouse-api")
    assert service["spec"]["selector"].items() <= pod_labels(rendered, "gatehouse-api").items()
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= {"http", port}


def test_worker_liveness_asks_the_workers_health_port(rendered: Rendered):
    worker = rendered.container("Deployment", "gatehouse-worker")
    health_port = int(rendered.env(worker)["WORKER_HEALTH_PORT"])

    # The endpoint that answers 503 when consumer threads are dead or hung
    assert http_probe(worker, "livenessProbe") == ("/healthz", health_port)
    annotations = rendered.get("Deployment", "gatehouse-worker")["spec"]["template"]["metadata"][
        "annotations"
    ]
    assert annotations["prometheus.io/port"] == str(health_port)


@pytest.mark.parametrize("name", ["gatehouse-api", "gatehouse-worker"])
def test_grace_period_outlasts_the_graceful_shutdown(rendered: Rendered, name: str):
    deployment = rendered.get("Deployment", name)
    container = rendered.container("Deployment", name)
    pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)

    # Given the time SIGTERM may take: preStop, then in-flight work up to the shutdown timeout, then cleanup
    needed = pre_stop + shutdown_timeout_s(rendered, container) + SHUTDOWN_MARGIN_S

    # Then Kubernetes waits longer than that before SIGKILL
    assert pod_spec(deployment)["terminationGracePeriodSeconds"] > needed


def test_one_scheduler_recreated_never_rolled(rendered: Rendered):
    scheduler = rendered.get("Deployment", "gatehouse-scheduler")

    assert scheduler["spec"]["replicas"] == 1
    assert scheduler["spec"]["strategy"] == {"type": "Recreate"}
    assert "gatehouse-scheduler" not in scale_targets(rendered)


def test_api_and_workers_scale_independently(rendered: Rendered):
    targets = scale_targets(rendered)
    hpa = rendered.get("HorizontalPodAutoscaler", "gatehouse-api")

    # The API scales on CPU
    assert hpa["spec"]["scaleTargetRef"]["name"] == "gatehouse-api"
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    # An autoscaled Deployment carries no replica count that an apply would reset
    for deployment in rendered.all("Deployment"):
        if deployment["metadata"]["name"] in targets:
            assert "replicas" not in deployment["spec"], deployment["metadata"]["name"]
    # Each scaled workload has its own disruption budget
    for name in ("gatehouse-api", "gatehouse-worker"):
        selectors = [p["spec"]["selector"]["matchLabels"] for p in rendered.all("PodDisruptionBudget")]
        assert any(s.items() <= pod_labels(rendered, name).items() for s in selectors), name


def test_keda_scales_workers_on_their_redis_queues(renders):
    prod = renders["prod"]
    scaled = prod.get("ScaledObject", "gatehouse-worker")
    worker = prod.container("Deployment", "gatehouse-worker")
    namespace = prod.env(worker).get("BROKER_NAMESPACE", "gatehouse")

    assert scaled["spec"]["scaleTargetRef"]["name"] == "gatehouse-worker"
    for trigger in scaled["spec"]["triggers"]:
        assert trigger["type"] == "redis"
        # Dramatiq's ready messages: the Redis list "<namespace>:<queue>"
        assert trigger["metadata"]["listName"].startswith(f"{namespace}:")
        # KEDA reads these from the worker container's environment
        for variable in ("addressFromEnv", "passwordFromEnv"):
            assert trigger["metadata"][variable] in prod.env(worker)


def test_images_are_distinct_and_pinned(rendered: Rendered):
    api = image_reference(rendered.container("Deployment", "gatehouse-api")["image"])
    worker = image_reference(rendered.container("Deployment", "gatehouse-worker")["image"])

    assert api[0].endswith("gatehouse-api")
    assert worker[0].endswith("gatehouse-worker")
    assert api[0] != worker[0]
    # The scheduler and the migrations run from the worker image; the dev WB sandbox, in
    # neither Gatehouse image, from its own (dev/wb_sandbox/Dockerfile), and only in dev
    for workload in rendered.workloads():
        name = workload["metadata"]["name"]
        for container in pod_spec(workload)["containers"]:
            repo, tag, digest = image_reference(container["image"])
            assert digest or (tag and tag != "latest"), container["image"]
            if name == "gatehouse-wb-sandbox":
                assert rendered.overlay == "dev"
                assert repo.endswith("gatehouse-wb-sandbox") and repo not in {api[0], worker[0]}, repo
            elif name != "gatehouse-api":
                assert repo == worker[0], name


def test_every_pod_runs_non_root_on_a_read_only_root(rendered: Rendered):
    for workload in rendered.workloads():
        name = workload["metadata"]["name"]
        spec = pod_spec(workload)
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, name
        assert pod["runAsUser"] != 0, name
        assert pod["seccompProfile"]["type"] == "RuntimeDefault", name
        assert spec["automountServiceAccountToken"] is False, name
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"]["drop"] == ["ALL"], name
            assert security.get("runAsUser", 1) != 0, name
            # Gatehouse's entry points write runtime dirs under $TMPDIR
            if container["command"][0] != "gatehouse-wb-sandbox":
                assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}, name


def test_every_container_has_requests_and_limits(rendered: Rendered):
    for workload in rendered.workloads():
        for container in pod_spec(workload)["containers"]:
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= container["resources"][bound].keys(), (
                    workload["metadata"]["name"],
                    bound,
                )


def test_settings_come_from_the_config_map_and_the_secret(rendered: Rendered):
    (secret,) = rendered.all("Secret")
    (config,) = rendered.all("ConfigMap")

    assert secret["data"].keys() >= SECRET_KEYS
    assert not SECRET_KEYS & config["data"].keys()
    # Every gatehouse process reads both (the references survived kustomize's name hashing)
    for workload in rendered.workloads():
        for container in pod_spec(workload)["containers"]:
            if container["command"][0] == "gatehouse-wb-sandbox":
                continue
            assert rendered.env(container).keys() >= SECRET_KEYS, workload["metadata"]["name"]


def test_no_secret_values_are_committed():
    # The examples name the keys and hold no values
    examples = sorted(K8S.glob("overlays/*/secrets.env.example"))
    assert examples
    for example in examples:
        for line in example.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                key, _, value = line.partition("=")
                assert value == "", f"{example}: {key} has a value"
        # and the real file beside each one is ignored by git
        real = (example.parent / "secrets.env").relative_to(REPO)
        assert subprocess.run(["git", "check-ignore", "-q", str(real)], cwd=REPO).returncode == 0, real
    # No committed manifest carries a Secret with data
    for path in K8S.rglob("*.yaml"):
        assert "kind: Secret\n" not in path.read_text(), path


def pod_labels(rendered: Rendered, deployment: str) -> dict[str, str]:
    return rendered.get("Deployment", deployment)["spec"]["template"]["metadata"]["labels"]
