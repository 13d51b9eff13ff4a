"""The doctor on PPO scripts written in different hands (tests/doctor_hosts/): each correct script reports nothing,
and each classic mistake injected into it is found, at the line where it was made."""

import contextlib
import json
import sys
from pathlib import Path

import pytest

from ppo_td.cli import main

HOSTS = Path(__file__).parent / "doctor_hosts"
sys.path.insert(0, str(HOSTS))
from mistakes import KIND, MISTAKES, mutate  # noqa: E402

CASES = [(host, code) for host, codes in MISTAKES.items() for code in codes]


def _doctor(path: Path, capsys) -> dict:
    main(["doctor", str(path), "--steps", "20", "--json"])
    return json.loads(capsys.readouterr().out)


def test_every_mistake_is_injected_in_three_hosts_at_least():
    """(The i codes are mistakes of loops built on TorchRL's objects: both TorchRL hosts.)"""
    for code in KIND:
        assert sum(code in codes for codes in MISTAKES.values()) >= (2 if code[0] == "i" else 3), code


@pytest.mark.parametrize("host", sorted(MISTAKES))
def test_a_correct_script_reports_nothing(host, capsys):
    report = _doctor(HOSTS / host, capsys)
    assert report["audited"] and report["ok"], json.dumps(report["findings"], indent=1)


@pytest.mark.slow
@pytest.mark.parametrize(("host", "code"), CASES, ids=[f"{h[:-3]}-{c}" for h, c in CASES])
def test_each_mistake_is_found_at_its_line(host, code, tmp_path, capsys):
    text, line = mutate(host, code)
    path = tmp_path / host
    path.write_text(text)
    report = _doctor(path, capsys)
    found = [f for f in report["findings"] if f["item"] == KIND[code]]
    assert found, f"{code} not found: {json.dumps(report, indent=1)[:6000]}"
    at = f"{path}:{line} "
    assert any(at in f"{f['made']} {f['where']} {f['culprit']} " for f in found), (at, json.dumps(found, indent=1))


@pytest.mark.parametrize("host", sorted(MISTAKES))
def test_the_audit_changes_no_number(host):
    """Pure inspection: a script run under the audit (its sign checks call autograd.grad, its detectors read
    gradients) ends with the very weights, bit for bit, and the same random stream as a plain run."""
    import runpy

    import torch
    from torch import nn

    from ppo_td.doctor import audit

    def run(audited: bool):
        with audit() if audited else contextlib.nullcontext():
            scope = runpy.run_path(str(HOSTS / host), run_name="__main__")
        weights = {f"{name}.{k}": v.detach().clone() for name, m in scope.items() if isinstance(m, nn.Module)
                   for k, v in m.state_dict().items()}
        return weights, torch.get_rng_state()

    (plain, plain_rng), (audited, audited_rng) = run(False), run(True)
    assert plain.keys() == audited.keys() and plain
    for key, value in plain.items():
        assert torch.equal(value, audited[key]), key
    assert torch.equal(plain_rng, audited_rng)
