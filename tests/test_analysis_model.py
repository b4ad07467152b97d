"""analysis.json through its typed model: every committed file loads whole, a key the model
does not name survives the round trip, and a file that does not fit is one line naming where."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from specbench.results.analysis import load_analysis, write_analysis_file
from specbench.results.manifest import RunDirError

REPO = Path(__file__).resolve().parents[1]
COMMITTED = sorted((REPO / "results").glob("**/analysis.json"))


def test_there_are_committed_analyses_to_read() -> None:
    assert any("reference" in str(p) for p in COMMITTED)


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.parent.relative_to(REPO)))
def test_every_committed_analysis_loads_as_written(path: Path) -> None:
    assert load_analysis(path) == json.loads(path.read_text())


def test_a_key_the_model_does_not_name_is_kept(tmp_path: Path) -> None:
    found = json.loads((REPO / "results/reference/sim-ci/analysis.json").read_text())
    found["from_a_later_version"] = {"levels": [1, 2]}
    name = next(iter(found["prompt_sets"]))
    found["prompt_sets"][name]["one_server"]["new_measure"] = 0.5
    path = write_analysis_file(tmp_path / "analysis.json", found)
    again = load_analysis(path)
    assert again["from_a_later_version"] == {"levels": [1, 2]}
    assert again["prompt_sets"][name]["one_server"]["new_measure"] == 0.5


@pytest.mark.parametrize(("change", "named"), [
    (lambda a: a.update(recommended_threshold="ninety"), "recommended_threshold"),
    (lambda a: a.update(prompt_sets=[1, 2]), "prompt_sets"),
])
def test_a_file_that_does_not_fit_is_one_line_naming_the_key(
        tmp_path: Path, change: Callable[[dict[str, object]], None], named: str) -> None:
    found = json.loads((REPO / "results/reference/sim-ci/analysis.json").read_text())
    change(found)
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(found))
    with pytest.raises(RunDirError) as caught:
        load_analysis(path)
    text = str(caught.value)
    assert named in text and "specbench threshold" in text and "\n" not in text


def test_a_file_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "analysis.json"
    path.write_text('{"finding": ')
    with pytest.raises(RunDirError, match="is not JSON") as caught:
        load_analysis(path)
    assert "\n" not in str(caught.value)
