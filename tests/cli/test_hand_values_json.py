"""What a hand writes in a fact's metadata reaches `--json` and MCP as JSON, and reads the same everywhere.

`importance: .nan` (YAML's NaN) made `show --json`, `list --json` and `recall --json` print `NaN`, which
is not JSON: a strict parser (jq, JSON.parse, serde) failed on the whole answer. `importance: true` was
null in `--json` but 1.0 to recall's score. One rule now (memctl/values.py): a number from 0 to 1
(clamped), anything else is none (null in JSON, the type's default in a score).
"""

from __future__ import annotations

import json

from conftest import cli, git, mcp_calls


def _strict(text: str):
    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _hand_fact(root, stem: str, front: str) -> None:
    (root / "memory" / f"{stem}.md").write_text(
        f"---\nname: {stem}\ndescription: the deploy window for {stem}\n{front}---\nbody\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "-c", "user.name=me", "-c", "user.email=me@localhost", "commit", "-qm", f"hand: {stem}")


def test_a_nan_or_infinite_value_in_a_fact_is_null_in_every_json_answer(root, pinned_clock):
    _hand_fact(root, "nan-fact", "metadata:\n  type: project\n  importance: .nan\n  confidence: -.inf\n  weight: .inf\n")
    shown = _strict(cli(root, "show", "nan-fact", "--json").stdout)
    assert shown["importance"] is None and shown["metadata"]["confidence"] is None and shown["metadata"]["weight"] is None
    listed = [_strict(line) for line in cli(root, "list", "--json").stdout.splitlines() if line.strip()]
    assert listed and all(json.dumps(row, allow_nan=False) for row in listed)
    r = cli(root, "recall", "deploy window", "--mode", "keyword", "--explain", "--json")
    assert r.exit_code == 0, r.stderr
    hits = _strict(r.stdout)
    assert hits[0]["name"] == "nan-fact" and hits[0]["factors"]["importance"] == 0.6  # project's default
    [result] = mcp_calls(root, {}, [("show", {"name": "nan-fact"})])
    data = _strict(result.content[0].text)
    assert data["importance"] is None and data["metadata"]["weight"] is None


def test_a_value_that_is_no_number_reads_as_none_in_json_and_as_the_default_in_a_score(root, pinned_clock):
    _hand_fact(root, "bool-fact", "metadata:\n  type: project\n  importance: true\n")
    _hand_fact(root, "big-fact", "metadata:\n  type: project\n  importance: 7\n")
    assert _strict(cli(root, "show", "bool-fact", "--json").stdout)["importance"] is None
    assert _strict(cli(root, "show", "big-fact", "--json").stdout)["importance"] == 1.0  # read as 1, as recall reads it
    hits = _strict(cli(root, "recall", "deploy window", "--mode", "keyword", "--explain", "--json").stdout)
    factors = {hit["name"]: hit["factors"]["importance"] for hit in hits}
    assert factors == {"bool-fact": 0.6, "big-fact": 1.0}  # project's default, and 7 read as 1
