"""The alert rules (infra/k8s/components/alerts) pass promtool's check and unit tests, and the rules
and the dashboard (infra/grafana/gatehouse.json) query only metrics the code defines."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.deploy.manifests import Rendered
from tests.support.processes import REPO

ALERTS_TEST = Path(__file__).parent / "alerts" / "alerts_test.yaml"
DASHBOARD = REPO / "infra" / "grafana" / "gatehouse.json"
# PromQL words that are not metric names: the binary operators and the modifiers' keywords.
KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
}


def rule_groups(prod: Rendered) -> dict:
    """The PrometheusRule's spec as prod renders it: a plain Prometheus rules file."""
    return prod.get("PrometheusRule", "gatehouse")["spec"]


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool is missing: install Debian's prometheus package (.ci/run does)")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)


def test_the_alert_rules_pass_promtool_check_and_their_unit_tests(renders, tmp_path):
    # Given the rules as Prometheus reads them, beside their unit tests
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups(renders["prod"])))
    shutil.copy(ALERTS_TEST, tmp_path / ALERTS_TEST.name)

    # When promtool checks them and runs the tests; Then both pass
    checked = promtool("check", "rules", str(tmp_path / "rules.yaml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", str(tmp_path / ALERTS_TEST.name))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # … and every alert has a test
    alerts = {r["alert"] for g in rule_groups(renders["prod"])["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load(ALERTS_TEST.read_text())["tests"]
    assert alerts == {t["alertname"] for case in tests for t in case["alert_rule_test"]}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: what is left once strings, label matchers,
    ranges, grouping label lists, functions, keywords, numbers and Grafana's $variables are gone."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = re.findall(r"(?<![\w$.:])([a-zA-Z_:][\w:]*)\b(?!\s*\()", expr)
    return {n for n in names if n not in KEYWORDS}


def defined_names() -> set[str]:
    """Every series name the code exports: gatehouse.metrics' counters and histograms with their
    suffixes, and the gauges of gatehouse.live_metrics."""
    from prometheus_client import REGISTRY

    import gatehouse.metrics  # noqa: F401  (registers them)
    from gatehouse.live_metrics import GAUGES

    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    names = set(GAUGES)
    for family in REGISTRY.collect():
        names |= {family.name + s for s in suffixes.get(family.type, ("",))}
    return names


def expressions(prod: Rendered) -> Iterator[tuple[str, str]]:
    for group in rule_groups(prod)["groups"]:
        for rule in group["rules"]:
            yield rule.get("alert") or rule["record"], str(rule["expr"])
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            yield f"dashboard: {panel['title']}", target["expr"]


def test_the_rules_and_the_dashboard_query_only_metrics_the_code_defines(renders):
    recorded = {
        r["record"] for g in rule_groups(renders["prod"])["groups"] for r in g["rules"] if "record" in r
    }
    known = defined_names() | recorded
    seen: set[str] = set()
    for where, expr in expressions(renders["prod"]):
        names = metric_names(expr)
        assert names <= known, f"{where}: {sorted(names - known)} are not defined by the code"
        seen |= names
    # The parser finds what the expressions use (a parser that found nothing would pass anything)
    assert {
        "gatehouse_queue_oldest_age_seconds",
        "gatehouse_wb_calls_total",
        "gatehouse_job_duration_seconds_bucket",
    } <= seen
    assert metric_names('sum by (q) (rate(gatehouse_x_total{a="b"}[$__rate_interval])) > on (q) 1e3 * y') == {
        "gatehouse_x_total",
        "y",
    }
