"""memctl.toml read through `.memctl/config.marshal` (memctl/config.py): the same Config as tomllib
gives, tomllib not imported when the cache holds the file's exact text, and every change, every
broken or foreign cache, every invalid file handled as without it. Real files, real processes."""

from __future__ import annotations

import marshal
import subprocess
import sys
from pathlib import Path

import pytest

from memctl import config
from memctl.errors import BadInput

TOML = '[git]\nauthor_name = "記憶"\n\n[ledgers.themes]\ncolumns = ["host", "theme"]\nunique = "theme"\n'

PROBE = ("import sys\nfrom pathlib import Path\nfrom memctl import config\n"
         "cfg = config.load(Path(sys.argv[1]))\n"
         "print(cfg.author_name, sorted(cfg.ledgers), 'tomllib' in sys.modules)\n")


def _store(tmp_path: Path, text: str = TOML) -> Path:
    (tmp_path / ".memctl").mkdir()
    path = tmp_path / "memctl.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _probe(path: Path) -> str:
    return subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True).stdout


def test_the_second_read_takes_the_cache_and_skips_tomllib(tmp_path):
    path = _store(tmp_path)
    assert _probe(path) == "記憶 ['themes'] True\n"  # parsed, and the cache written
    assert _cached_text(tmp_path) == TOML
    assert _probe(path) == "記憶 ['themes'] False\n"
    assert config.load(path) == config.from_dict(__import__("tomllib").loads(TOML), source=path)


def test_a_changed_file_is_parsed_again(tmp_path):
    path = _store(tmp_path)
    _probe(path)
    path.write_text(TOML.replace("記憶", "memory bot"), encoding="utf-8")  # same size or not, the text decides
    assert _probe(path) == "memory bot ['themes'] True\n"
    assert _probe(path) == "memory bot ['themes'] False\n"


@pytest.mark.parametrize("cache", [b"", b"\x00garbage", marshal.dumps("just text"), marshal.dumps((TOML, ["not", "a dict"]))])
def test_a_broken_or_foreign_cache_is_ignored_and_replaced(tmp_path, cache):
    path = _store(tmp_path)
    (tmp_path / ".memctl" / "config.marshal").write_bytes(cache)
    assert _probe(path) == "記憶 ['themes'] True\n"
    assert _probe(path) == "記憶 ['themes'] False\n"


def test_invalid_toml_is_never_cached_and_stays_an_error(tmp_path):
    path = _store(tmp_path)
    _probe(path)
    path.write_text(TOML + "[git\n", encoding="utf-8")
    for _ in range(2):
        with pytest.raises(BadInput, match="invalid TOML"):
            config.load(path)
    assert _cached_text(tmp_path) == TOML


def test_a_cache_sealed_with_another_key_or_changed_after_sealing_is_not_believed(tmp_path):
    path = _store(tmp_path)
    _probe(path)
    cache = tmp_path / ".memctl" / "config.marshal"
    sealed = cache.read_bytes()
    payload = marshal.dumps((TOML, {"git": {"author_name": "attacker"}}))
    for forged in (config._seal(b"k" * 32, payload) + payload, sealed[: config.SEAL] + payload):
        cache.write_bytes(forged)
        assert _probe(path) == "記憶 ['themes'] True\n"  # parsed from the file, the forged table ignored
        assert _probe(path) == "記憶 ['themes'] False\n"  # and sealed again


def _cached_text(folder: Path) -> str:
    return marshal.loads((folder / ".memctl" / "config.marshal").read_bytes()[config.SEAL:])[0]


def test_dates_are_parsed_each_time_and_no_cache_folder_means_no_cache(tmp_path):
    path = _store(tmp_path, TOML + "\n[notes]\nsince = 2026-11-30T09:00:00+09:00\n")  # marshal cannot hold a datetime
    assert _probe(path) == _probe(path) == "記憶 ['themes'] True\n"
    assert not (tmp_path / ".memctl" / "config.marshal").exists()
    other = tmp_path / "bare"
    other.mkdir()
    (other / "memctl.toml").write_text(TOML, encoding="utf-8")
    assert _probe(other / "memctl.toml") == _probe(other / "memctl.toml") == "記憶 ['themes'] True\n"
    assert not (other / ".memctl").exists()


@pytest.mark.parametrize("written, taken", [("200.0", 200), ("50", 50)])
def test_a_whole_count_written_as_a_float_still_loads(written, taken):
    """`max_index_lines = 200.0` loaded before the values were checked (2026-12-06): an upgrade must
    not make a store's own file an error; a fraction or zero still is."""
    assert config.from_dict({"facts": {"max_index_lines": float(written) if "." in written else int(written)}}).max_index_lines == taken
    for bad in (200.5, 0.0, float("nan"), float("inf")):
        with pytest.raises(BadInput, match="max_index_lines"):
            config.from_dict({"facts": {"max_index_lines": bad}})
