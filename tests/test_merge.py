"""`specbench merge` on synthetic shards: what is joined, what the merged manifest says, and
every refusal (one line, nothing written). tests/e2e/test_shards.py merges measured shards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench import config as config_mod
from specbench import results
from specbench.results import PointKey, ServerRecord, ThresholdRecord
from specbench.results.points import SUMMARY_COLUMNS
from specbench.run import merge
from tests.builders import write_manifest

MODES = ("baseline", "eagle3", "dynamic")


def _shard(
    root: Path,
    name: str,
    *,
    levels: tuple[int, ...] = (1, 4),
    sha: str = "sha-coding",
    status: str = "complete",
    chose: ThresholdRecord | None = None,
    **cfg: Any,
) -> Path:
    """A shard run directory of configuration `name`, with points at `levels`."""
    raw = {"modes": list(MODES), "prompt_sets": ["coding"], "concurrency": [1, 4],
           "only_config": [name], "run_name": name, **cfg}
    config = config_mod.build(raw)
    run_dir = root / name
    server = ServerRecord(kind=config.configurations[0].kind, argv=["x"], url="http://h:1",
                          log=f"{name}.log")
    write_manifest(run_dir, config, {"coding": sha}, {name: server})
    manifest = results.read_manifest(run_dir)
    manifest.status = status  # type: ignore[assignment]
    manifest.threshold = chose  # what the shard's sweep recorded as the dynamic threshold
    for c in levels:
        key = PointKey(name, "coding", c)
        summary: dict[str, Any] = dict.fromkeys(SUMMARY_COLUMNS[4:], 1.0)
        summary["flags"] = ""
        results.write_point(run_dir, key, pd.DataFrame({"t_end_s": [1.0]}), summary)
        manifest.points[key.label] = results.PointRecord(status="ok", attempts=1)
    manifest.save(run_dir)
    (run_dir / "servers").mkdir(exist_ok=True)
    (run_dir / "servers" / f"{name}.log").write_text(f"{name} log\n")
    return run_dir


def test_shards_become_one_run_that_resume_continues(tmp_path: Path) -> None:
    a = _shard(tmp_path, "baseline", server={"port": 30010})
    b = _shard(tmp_path, "eagle3", server={"port": 30000})
    out = tmp_path / "merged"
    manifest = merge.merge_runs([a, b], out, ["specbench", "merge"])
    assert sorted(k.label for k in results.measured_keys(out)) == [
        "baseline/coding/c1-r0", "baseline/coding/c4-r0",
        "eagle3/coding/c1-r0", "eagle3/coding/c4-r0",
    ]
    # The dynamic server was in no shard: the merged run is partial, for --resume to finish.
    assert manifest.status == "interrupted"
    assert manifest.config.only_config == ()
    assert manifest.config.server.port == 30000
    assert (manifest.config.run_name, manifest.config.results_dir) == ("merged", tmp_path)
    assert set(manifest.servers) == {"baseline", "eagle3"}
    assert len(manifest.points) == 4
    assert (out / "servers" / "eagle3.log").read_text() == "eagle3 log\n"
    run = results.load_run(out)
    assert run.modes == ["baseline", "eagle3"] and len(run.summary) == 4
    assert (out / "summary.parquet").exists() and (out / merge.SHARDS_FILE).exists()


def test_a_merge_of_every_configuration_is_complete(tmp_path: Path) -> None:
    given = ThresholdRecord(value=2, source="given", per_prompt_set={"coding": 2})
    # With --threshold given, the dynamic server needs no analysis and can be a shard too.
    shards = [_shard(tmp_path, m, chose=given if m == "dynamic" else None, threshold=2)
              for m in MODES]
    manifest = merge.merge_runs(shards, tmp_path / "merged", ["specbench", "merge"])
    assert manifest.status == "complete"
    assert manifest.threshold == given


def test_an_unfinished_shard_leaves_the_merged_run_partial(tmp_path: Path) -> None:
    a = _shard(tmp_path, "baseline", status="interrupted", levels=(1,))
    b = _shard(tmp_path, "eagle3")
    manifest = merge.merge_runs([a, b], tmp_path / "merged", ["specbench", "merge"])
    assert manifest.status == "interrupted"


@pytest.mark.parametrize(
    ("other", "message"),
    [
        ({"load": {"seed": 3}}, "disagree on load.seed (0 vs 3)"),
        ({"sim": {"seed": 1}}, "disagree on sim.seed (0 vs 1)"),
        ({"concurrency": [1, 8]}, "disagree on concurrency ((1, 4) vs (1, 8))"),
        ({"sha": "sha-other"}, "measured different prompt set coding files"),
    ],
    ids=["seed", "sim-seed", "levels", "prompt-hash"],
)
def test_disagreeing_shards_are_refused_and_nothing_is_written(
    tmp_path: Path, other: dict[str, Any], message: str
) -> None:
    a = _shard(tmp_path, "baseline")
    b = _shard(tmp_path, "eagle3", **other)
    out = tmp_path / "merged"
    with pytest.raises(merge.MergeError) as caught:
        merge.merge_runs([a, b], out, ["specbench", "merge"])
    assert message in str(caught.value)
    assert "\n" not in str(caught.value) and "; " in str(caught.value)
    assert not out.exists()


def test_a_point_in_two_shards_is_refused(tmp_path: Path) -> None:
    a = _shard(tmp_path / "a", "baseline", levels=(1,))
    b = _shard(tmp_path / "b", "baseline", levels=(1, 4))
    with pytest.raises(merge.MergeError, match="both hold point baseline/coding/c1-r0"):
        merge.merge_runs([a, b], tmp_path / "merged", ["specbench", "merge"])


def test_a_configuration_served_in_two_shards_is_refused(tmp_path: Path) -> None:
    a = _shard(tmp_path / "a", "baseline", levels=(1,))
    b = _shard(tmp_path / "b", "baseline", levels=(4,))
    with pytest.raises(merge.MergeError, match="both ran the baseline server"):
        merge.merge_runs([a, b], tmp_path / "merged", ["specbench", "merge"])


def test_merging_into_an_existing_run_or_a_shard_is_refused(tmp_path: Path) -> None:
    a = _shard(tmp_path, "baseline")
    b = _shard(tmp_path, "eagle3")
    merge.merge_runs([a, b], tmp_path / "merged", ["specbench", "merge"])
    with pytest.raises(merge.MergeError, match="already holds a run; continue it with"):
        merge.merge_runs([a, b], tmp_path / "merged", ["specbench", "merge"])
    with pytest.raises(merge.MergeError, match="lies inside shard"):
        merge.merge_runs([a, b], a / "sub", ["specbench", "merge"])
    with pytest.raises(merge.MergeError, match="is given twice"):
        merge.merge_runs([a, a], tmp_path / "again", ["specbench", "merge"])
    with pytest.raises(results.RunDirError, match="not a specbench run directory"):
        merge.merge_runs([a, tmp_path], tmp_path / "again", ["specbench", "merge"])
