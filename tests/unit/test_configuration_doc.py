"""The configuration page (docs/operations/configuration.md) lists exactly the settings that exist."""

from __future__ import annotations

import re

from gatehouse.settings import Settings
from tests.support.processes import REPO


def test_every_setting_is_documented_and_nothing_else():
    table = (REPO / "docs/operations/configuration.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", table, re.M))
    assert documented == {name.upper() for name in Settings.model_fields}
