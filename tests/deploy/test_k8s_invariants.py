"""What the manifests must keep saying, whatever else changes in them (both overlays)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gatehouse.settings import Settings
from tests.deploy.manifests import K8S, POOLS, WORKERS, Rendered, image_reference, pod_spec
from tests.support.processes import REPO

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

    assert api["command"] == ["gatehouse-api"]
    assert rendered.env(api)["BACKEND_ROLE"] == "api"
    for name in WORKERS:
        worker = rendered.container("Deployment", name)
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


@pytest.mark.parametrize("name", WORKERS)
def test_worker_liveness_asks_the_workers_health_port(rendered: Rendered, name: str):
    worker = rendered.container("Deployment", name)
    health_port = int(rendered.env(worker)["WORKER_HEALTH_PORT"])

    # The endpoint that answers 503 when consumer threads are dead or hung
    assert http_probe(worker, "livenessProbe") == ("/healthz", health_port)
    annotations = rendered.get("Deployment", name)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(health_port)


def test_api_metrics_have_their_own_port_and_service(rendered: Rendered):
    api = rendered.container("Deployment", "gatehouse-api")
    ports = {p["name"]: p["containerPort"] for p in api["ports"]}
    labels = pod_labels(rendered, "gatehouse-api")

    # gatehouse-api serves /metrics on METRICS_PORT only (the http port answers it 404) …
    metrics_port = int(rendered.env(api)["METRICS_PORT"])
    assert ports["metrics"] == metrics_port != ports["http"]
    annotations = rendered.get("Deployment", "gatehouse-api")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(metrics_port)
    # … which the ingress' Service does not carry, and a Service of its own does
    public = rendered.get("Service", "gatehouse-api")["spec"]
    assert {p["targetPort"] for p in public["ports"]} == {"http"}
    metrics = rendered.get("Service", "gatehouse-api-metrics")["spec"]
    assert metrics["selector"].items() <= labels.items()
    assert {p["targetPort"] for p in metrics["ports"]} == {"metrics"}


@pytest.mark.parametrize("name", ["gatehouse-api", *WORKERS])
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
    # Each scaled workload has its own disruption budget, which selects no other's pods
    selectors = [p["spec"]["selector"]["matchLabels"] for p in rendered.all("PodDisruptionBudget")]
    for name in ("gatehouse-api", *WORKERS):
        own = [s for s in selectors if s.items() <= pod_labels(rendered, name).items()]
        assert len(own) == 1, name


def pool_queues(rendered: Rendered, name: str) -> list[str]:
    """The queues a worker Deployment consumes: its arguments after --queues."""
    args = rendered.container("Deployment", name)["args"]
    assert "--queues" in args, f"{name} consumes every queue"
    return args[args.index("--queues") + 1 :]


@pytest.fixture(scope="module")
def job_queues() -> list[str]:
    """The queue of every job type (the schedules' fan-outs and ticks' included), as a fresh process
    has them: the test session's own job types (probes) are no queue of the deployment."""
    script = (
        "import gatehouse.schedules, gatehouse.job_types as j; print(*{t.queue for t in j.REGISTRY.values()})"
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()


def test_every_queue_is_consumed_by_exactly_one_pool(rendered: Rendered, job_queues: list[str]):
    queues = set(job_queues)
    consumed = [q for name in WORKERS for q in pool_queues(rendered, name)]

    assert sorted(consumed) == sorted(queues)
    assert pool_queues(rendered, "gatehouse-worker-wb") == ["wb-user", "wb-scheduled"]
    assert pool_queues(rendered, "gatehouse-worker-webhooks") == ["webhook.deliver"]
    # The system jobs (ticks, fan-outs, reconciliation, the prune) go with the B2B work
    assert {"catalog.bulk-operation", "notifications.email", "schedules", "maintenance"} <= set(
        pool_queues(rendered, "gatehouse-worker-b2b")
    )


@pytest.mark.parametrize("pool", POOLS)
def test_keda_scales_each_pool_on_its_own_queues(renders, pool: str):
    prod = renders["prod"]
    name = f"gatehouse-worker-{pool}"
    scaled = prod.get("ScaledObject", name)
    worker = prod.container("Deployment", name)
    namespace = prod.env(worker).get("BROKER_NAMESPACE", "gatehouse")

    assert scaled["spec"]["scaleTargetRef"]["name"] == name
    # Never to zero (delayed messages and ticks need a consumer), and room to grow
    assert 1 <= scaled["spec"]["minReplicaCount"] < scaled["spec"]["maxReplicaCount"]
    # One trigger per queue of the pool: Dramatiq's ready messages, the Redis list "<namespace>:<queue>"
    triggers = scaled["spec"]["triggers"]
    assert [t["metadata"]["listName"] for t in triggers] == [
        f"{namespace}:{q}" for q in pool_queues(prod, name)
    ]
    for trigger in triggers:
        assert trigger["type"] == "redis"
        # KEDA's operator reads the Redis credentials from the gatehouse-keda Secret; no pod gets them
        auth = prod.get("TriggerAuthentication", trigger["authenticationRef"]["name"])
        refs = auth["spec"]["secretTargetRef"]
        assert {r["parameter"] for r in refs} == {"address", "password"}
        for ref in refs:
            assert ref["key"] in prod.get("Secret", ref["name"])["data"]


def test_images_are_distinct_and_pinned(rendered: Rendered):
    api = image_reference(rendered.container("Deployment", "gatehouse-api")["image"])
    worker = image_reference(rendered.container("Deployment", "gatehouse-worker-wb")["image"])

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


# What each process reads that is secret (gatehouse.settings): its Secret holds these and no other.
SECRET_KEYS = {
    "gatehouse-api": {"DATABASE_URL", "REDIS_URL", "ADMIN_TOKEN", "TOKEN_ENCRYPTION_KEY", "CONSOLE_SECRET"},
    # WB tokens and webhook secrets are decrypted here; SMTP_URL may carry a password
    **dict.fromkeys(WORKERS, frozenset({"DATABASE_URL", "REDIS_URL", "TOKEN_ENCRYPTION_KEY", "SMTP_URL"})),
    "gatehouse-scheduler": {"DATABASE_URL", "REDIS_URL"},
    "gatehouse-migrate": {"DATABASE_URL"},
}


def test_each_component_gets_a_secret_with_only_the_keys_it_reads(rendered: Rendered):
    from gatehouse_worker.main import WORKER_NEEDS

    (config,) = rendered.all("ConfigMap")
    secret_keys = set().union(*SECRET_KEYS.values())
    workloads = {w["metadata"]["name"]: w for w in rendered.workloads()}

    assert not secret_keys & config["data"].keys()
    assert {name for name in workloads if name != "gatehouse-wb-sandbox"} == SECRET_KEYS.keys()
    for name, keys in SECRET_KEYS.items():
        (container,) = pod_spec(workloads[name])["containers"]
        # (the references survived kustomize's name hashing)
        assert rendered.secret_keys(container) == keys, name
        assert {key.lower() for key in keys} <= Settings.model_fields.keys()
    # What the entry points refuse to start without is there
    assert {key.upper() for key in WORKER_NEEDS} <= SECRET_KEYS["gatehouse-worker-wb"]
    # One Secret per component (the pools are one component), read by no other
    users: dict[str, set[str]] = {}
    for name in SECRET_KEYS:
        (container,) = pod_spec(workloads[name])["containers"]
        (secret,) = [s["secretRef"]["name"] for s in container["envFrom"] if "secretRef" in s]
        users.setdefault(secret, set()).add(pod_labels(rendered, name)["app.kubernetes.io/component"])
    assert sorted(len(components) for components in users.values()) == [1, 1, 1, 1], users
    # KEDA's Redis credentials reach no pod (prod only: the dev overlay has no KEDA)
    for secret in rendered.all("Secret"):
        if {"REDIS_ADDRESS", "REDIS_PASSWORD"} & secret["data"].keys():
            assert secret["metadata"]["name"] not in users


def test_no_secret_values_are_committed():
    # The examples name the keys and hold no values
    examples = sorted(K8S.glob("overlays/*/secrets/*.env.example"))
    assert examples
    for example in examples:
        for line in example.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                key, _, value = line.partition("=")
                assert value == "", f"{example}: {key} has a value"
        # and the real file beside each one is ignored by git
        real = example.with_suffix("").relative_to(REPO)
        assert subprocess.run(["git", "check-ignore", "-q", str(real)], cwd=REPO).returncode == 0, real
    # No committed manifest carries a Secret with data
    for path in K8S.rglob("*.yaml"):
        assert "kind: Secret\n" not in path.read_text(), path


def pod_labels(rendered: Rendered, workload: str) -> dict[str, str]:
    (found,) = [w for w in rendered.workloads() if w["metadata"]["name"] == workload]
    return found["spec"]["template"]["metadata"]["labels"]
