"""The README's configuration table lists exactly the settings that exist."""

from __future__ import annotations

import re

from gatehouse.settings import Settings
from tests.support.processes import REPO


def test_every_setting_is_documented_and_nothing_else():
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", table, re.M))
    assert documented == {name.upper() for name in Settings.model_fields}
