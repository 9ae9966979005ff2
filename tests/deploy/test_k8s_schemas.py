"""Every rendered manifest validates against the schemas of a pinned Kubernetes (and KEDA, the Prometheus Operator)."""

from __future__ import annotations

import copy
import json

import jsonschema
import kubernetes_validate
import pytest

from tests.deploy.manifests import CRD_SCHEMAS, KUBERNETES_VERSION, Doc, Rendered

CRDS = {key: jsonschema.Draft7Validator(json.loads(path.read_text())) for key, path in CRD_SCHEMAS.items()}


def validate(doc: Doc) -> None:
    if (doc["apiVersion"], doc["kind"]) in CRDS:
        CRDS[doc["apiVersion"], doc["kind"]].validate(doc)
    else:
        # strict: unknown fields (a misspelt probe, say) are errors, as the API server's
        # field validation would make them.
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_every_rendered_manifest_matches_its_schema(rendered: Rendered):
    # Given an overlay rendered by kustomize
    assert rendered.docs

    # When each document is validated; Then none is rejected, and none is skipped for want of a schema
    for doc in rendered.docs:
        try:
            validate(doc)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
            pytest.fail(f"{rendered.overlay}: {doc['kind']}/{doc['metadata']['name']}: {exc.message}")


def test_the_validation_rejects_a_misspelt_field(rendered: Rendered):
    # Given the api Deployment with a probe's name misspelt
    deployment = copy.deepcopy(rendered.get("Deployment", "gatehouse-api"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")

    # Then the Kubernetes schema rejects it
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)


def test_the_keda_schema_rejects_a_trigger_without_a_type(renders):
    # Given the prod ScaledObject, valid as rendered, with a trigger that lost its type
    scaled = copy.deepcopy(renders["prod"].get("ScaledObject", "gatehouse-worker-wb"))
    validate(scaled)
    del scaled["spec"]["triggers"][0]["type"]

    # Then KEDA's CRD schema rejects it
    with pytest.raises(jsonschema.ValidationError):
        validate(scaled)
