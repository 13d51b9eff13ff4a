"""Run folders an earlier ppo_td wrote (``tests/old_runs``, one per kind of env, stopped after their first
iteration) still evaluate, act and resume as that ppo_td did: the numbers it gave are in ``expected.json``
(``tests/old_runs/make_old_runs.py`` wrote both). A change to how envs are built that moved a layer, renamed a
transform or reordered a checkpoint's state fails here."""

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from ppo_td.cli import main

torch.set_num_threads(1)

OLD = Path(__file__).parent / "old_runs"
EXPECTED = json.loads((OLD / "expected.json").read_text())
KINDS = sorted(EXPECTED["runs"])


def _same(got, want):
    if isinstance(want, float) or isinstance(got, float):
        return got == pytest.approx(want, rel=1e-5, abs=1e-6) or (math.isnan(got) and math.isnan(want))
    if isinstance(want, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    return got == want


def _number(text):
    try:
        return float(text)
    except ValueError:
        return text


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_folder_an_earlier_ppo_td_wrote_evaluates_acts_and_resumes_as_it_did(kind, tmp_path):
    import sys

    sys.path.insert(0, str(OLD))
    try:
        from make_old_runs import expected, metrics_rows
    finally:
        sys.path.remove(str(OLD))
    want = EXPECTED["runs"][kind]
    run = tmp_path / kind
    shutil.copytree(OLD / kind, run)
    got = expected(run, actions="actions" in want)
    assert _same(got["returns"], want["returns"]) and _same(got["groups"], want["groups"]), (got, want)
    assert _same(got.get("actions"), want.get("actions"))
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    resumed = [{k: _number(v) for k, v in row.items()} for row in metrics_rows(run)]
    old = [{k: _number(v) for k, v in row.items()} for row in want["resumed"]]
    exact = json.loads((OLD / kind / "run.json").read_text())["resume"]["exact"]
    if exact:  # the same batches and updates as the earlier ppo_td's resume
        assert _same(resumed, old), (resumed, old)
    else:  # fresh episodes after the resume: the same iterations and frames
        assert [(r["iteration"], r["frames"]) for r in resumed] == [(r["iteration"], r["frames"]) for r in old]
