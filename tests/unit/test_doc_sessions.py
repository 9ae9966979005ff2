"""The doc runner's reading of a page: sessions, expectations, and how output is matched."""

from __future__ import annotations

import subprocess

import pytest

from tests.docs.sessions import chunks, matches, script, sessions

PAGE = """# A page

```sh
A=1
echo "a=$A"
# -> a=1
```

```python
print("not a session")
```

```sh no-run: needs a cluster
kubectl apply -k infra/k8s/overlays/prod
```

```sh
printf 'x\\ny\\nz\\n'
# -> x
# -> …
echo "$A" done
# -> 1 done
```
"""


def test_a_page_reads_as_sessions_with_their_expectations(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    found = sessions(page)
    assert [(s.language, s.runs, s.skip_reason) for s in found] == [
        ("sh", True, None),
        ("python", False, None),
        ("sh", False, "needs a cluster"),
        ("sh", True, None),
    ]
    assert [e.lines for e in found[0].expectations] == [["a=1"]]
    assert [e.lines for e in found[3].expectations] == [["x", "…"], ["1 done"]]
    assert found[3].expectations[0].line == 19


def test_the_script_runs_in_one_shell_and_splits_its_output_per_expectation(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    text, _ = script(sessions(page), "@@M@@ ")
    output = subprocess.run(["bash", "-c", text], capture_output=True, text=True, check=True).stdout
    parts, done, failed = chunks(output, "@@M@@ ")
    assert done and failed is None
    assert parts == [["a=1"], ["x", "y", "z"], ["1 done"], []]  # $A survived into the second session


def test_a_failing_command_stops_the_page_and_names_its_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```sh\ntrue\nfalse\necho never\n```\n")
    text, where = script(sessions(page), "@@M@@ ")
    output = subprocess.run(["bash", "-c", text], capture_output=True, text=True).stdout
    parts, done, failed = chunks(output, "@@M@@ ")
    assert not done and where[failed] == 3
    assert parts == [[]]


def test_matching_is_whole_with_an_ellipsis_for_any_text():
    assert matches(['{"jobId":"…","alreadyRunning":false}'], ['{"jobId":"8d0c","alreadyRunning":false}'])
    assert not matches(['{"jobId":"…","alreadyRunning":false}'], ['{"jobId":"8d0c","alreadyRunning":true}'])
    assert not matches(["a"], ["a", "b"])  # nothing unclaimed after it
    assert matches(["…", "b"], ["a", "x", "b"])
    assert matches(["…"], [])
    assert not matches(["a…"], ["b"])
    assert not matches(["x.y"], ["xzy"])  # the expectation is text, not a pattern


def test_a_block_left_open_is_an_error_not_a_silently_longer_session(tmp_path):

    page = tmp_path / "page.md"
    page.write_text("```sh\necho one\n\nSome prose.\n\n```sh\necho two\n```\n")
    with pytest.raises(ValueError, match="a fence opens inside the block of line 1"):
        sessions(page)
    page.write_text("```sh\necho one\n")
    with pytest.raises(ValueError, match="never closes"):
        sessions(page)
