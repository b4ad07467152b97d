"""`specbench reference update` names the reference it writes: no silent `sim-ci` (issue 57)."""

from __future__ import annotations

from pathlib import Path

from tests.builders import make_regress_run
from tests.harness import run_cli


def test_reference_update_without_name_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run_dir = make_regress_run(tmp_path / "run")
    root = tmp_path / "references"
    result = run_cli(
        ["reference", "update", str(run_dir), "--reference-root", str(root)], cwd=tmp_path
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: reference update needs --name")
    assert "--name sim-ci" in lines[0]  # the fix, spelled out
    assert "Traceback" not in result.stderr
    assert not root.exists()  # nothing written


def test_reference_update_with_name_writes_it(tmp_path: Path) -> None:
    run_dir = make_regress_run(tmp_path / "run")
    root = tmp_path / "references"
    result = run_cli(
        ["reference", "update", str(run_dir), "--reference-root", str(root), "--name", "mine"],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert (root / "mine" / "manifest.json").is_file()
