"""Guards of robotid_sim.safety: file names, paths, YAML bombs, NPZ bombs."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from robotid_sim.errors import ConfigError, DataError
from robotid_sim.safety import MAX_YAML_NODES, inside, load_yaml, load_yaml_file, read_npz, safe_name


@pytest.mark.parametrize("name", ["ols", "irls_8Nm", "wls-2", "a.b", "x+y", "A1"])
def test_plain_names_are_safe(name):
    assert safe_name(name, "label") == name


@pytest.mark.parametrize(
    "name", ["../x", "../../../x", "/abs/path", "a/b", "a\\b", ".hidden", "..", "a..b", "", "x" * 65, "sp ace", 3, None]
)
def test_names_that_could_leave_a_folder_are_refused(name):
    with pytest.raises(ConfigError, match="cannot be used as a file name"):
        safe_name(name, "estimator label")


def test_inside_refuses_escapes(tmp_path):
    assert inside(tmp_path, "models/ols.json", "model") == (tmp_path / "models" / "ols.json").resolve()
    with pytest.raises(DataError, match="points outside"):
        inside(tmp_path, "../elsewhere.json", "model")
    with pytest.raises(DataError, match="points outside"):
        inside(tmp_path, "/etc/passwd", "model")


def test_yaml_alias_bomb_is_refused_before_expansion():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + k)}: &{chr(98 + k)} [*{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, "
        f"*{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}]\n"
        for k in range(8)
    )
    assert len(bomb) < 1000
    with pytest.raises(ConfigError, match=f"expand to .* YAML nodes \\(limit {MAX_YAML_NODES:,}\\)"):
        load_yaml(bomb, "scenario bomb.yaml")


def test_yaml_with_a_few_aliases_and_safe_types_loads():
    assert load_yaml("base: &g {kp: 1}\nother: *g\n", "x") == {"base": {"kp": 1}, "other": {"kp": 1}}
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_yaml("a: !!python/object/apply:os.system ['echo hi']\n", "evil.yaml")
    with pytest.raises(ConfigError, match=r"is not valid YAML at line \d+, column \d+: expected .,. or .\]."):
        load_yaml("a: [1, 2\n", "bad.yaml")


def test_binary_or_missing_yaml_files_are_clear_errors(tmp_path):
    (tmp_path / "bin.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    with pytest.raises(ConfigError, match="is not a YAML text file"):
        load_yaml_file(tmp_path / "bin.yaml", "scenario")
    with pytest.raises(ConfigError, match="scenario not found"):
        load_yaml_file(tmp_path / "missing.yaml", "scenario")


def test_read_npz_reads_only_what_is_asked_and_refuses_bombs(tmp_path):
    np.savez_compressed(tmp_path / "d.npz", q=np.ones((3, 2)), big=np.zeros(2_000_000))
    assert set(read_npz(tmp_path / "d.npz", "d.npz", keys=["q", "missing"])) == {"q"}
    with pytest.raises(DataError, match="array 'big' would take 0.016 GB uncompressed"):
        read_npz(tmp_path / "d.npz", "d.npz", max_bytes=1_000_000)
    np.savez(tmp_path / "o.npz", obj=np.array([{"a": 1}], dtype=object))
    with pytest.raises(DataError, match="without unpickling"):
        read_npz(tmp_path / "o.npz", "o.npz")
    (tmp_path / "not.npz").write_text("hello")
    with pytest.raises(DataError, match="is not an .npz file"):
        read_npz(tmp_path / "not.npz", "not.npz")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("empty.txt", "")
    assert read_npz(buffer.getvalue(), "empty") == {}
