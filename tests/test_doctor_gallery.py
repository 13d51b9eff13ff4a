"""`ppo-td doctor SCRIPT.py`: every script of examples/doctor/ runs unmodified and gets the diagnosis it
should, with the user's lines; the correct updates get a clean bill."""

import json
from pathlib import Path

import pytest

from ppo_td.cli import main

GALLERY = Path(__file__).parent.parent / "examples" / "doctor"

# script (and arguments) -> (kinds found, kind of the error that stopped it or None, phrases of the report)
EXPECTED = {
    ("two_value_nets.py",): ({2, 4, 7}, 3, ["backward through the graph a second time", "v_opt.step()",
                                            "q_opt.step()", "v = state_value(state)", "policy gets no gradient",
                                            "sampling (multinomial)", "reaches action_value, state_value"]),
    ("two_value_nets.py", "--retain-graph"): ({1, 2, 4, 7}, 3, ["modified by an inplace operation",
                                                                "v_opt.step()", "policy gets no gradient",
                                                                "reaches action_value, state_value"]),
    ("rollout_with_grad.py",): ({2, 7, 10}, 3, ["backward through the graph a second time",
                                                "64 actor forwards #1-64 at", "the ratio's old log-probs carry"]),
    ("rollout_with_grad.py", "--retain-graph"): ({1, 2, 7, 10}, 3, ["modified by an inplace operation"]),
    ("ratio_from_argmax.py",): ({4}, None, ["actor gets no gradient", "argmax at", "actor(obs).argmax(-1)"]),
    ("value_target_not_detached.py",): ({2}, None, ["the value target carries gradient", "MseLossBackward"]),
    ("step_between_forward_and_backward.py",): ({1, 4, 7, 9}, None, ["net.trunk's parameters were stepped by optimizer",
                                                                  "net.v gets no gradient",
                                                                  "net.pi is stepped again", '"net.pi": "policy"']),
    ("nan_advantage.py",): ({5, 16}, None, ["non-finite loss", "non-finite gradients", "std of a tensor of shape [1]",
                                            "nan_advantage.py:22"]),
    ("no_zero_grad.py",): ({9}, None, ["gradients accumulate across optimizer steps", "no_zero_grad.py:24"]),
    ("ratio_always_one.py",): ({10}, None, ["exactly 1 in every minibatch", "ratio_always_one.py:20"]),
    ("stale_policy_copy.py",): ({6}, None, ["not 1 on the first minibatch", "stale_policy_copy.py:22"]),
    ("detached_ratio.py",): ({11}, None, ["does not reach the policy", "detached at", "detached_ratio.py:19"]),
    ("entropy_minimized.py",): ({12}, None, ["entropy bonus is minimized", "entropy_minimized.py:22"]),
    ("surrogate_ascended.py",): ({12}, None, ["surrogate is ascended", "surrogate_ascended.py:21"]),
    ("min_max_swapped.py",): ({12}, None, ["min and max are swapped", "min_max_swapped.py:21"]),
    ("value_broadcast.py",): ({13}, None, ["[32, 1] and [32] makes [32, 32]", "value_broadcast.py:22"]),
    ("critic_not_optimized.py",): ({14}, None, ["no optimizer holds", "critic_not_optimized.py:13"]),
    ("dropout_while_acting.py",): ({15}, None, ["acts in train mode", "dropout_while_acting.py:18"]),
    ("values_inside_agent.py",): ({1, 2, 7}, 3, [
        "values_inside_agent.py:35 (values = agent.value(obs)) -> ", "values_inside_agent.py:21 (return self.vf(x)",
        '"change": "', "modified by an inplace operation"]),
    ("torchrl_entropy_subtracted.py",): ({12}, None, [
        "TorchRL's loss_entropy is subtracted", 'torchrl_entropy_subtracted.py:38 (loss = loss_vals[\\"loss_objective',
        '"critic": "value"']),
    ("cleanrl_update.py",): (set(), None, ['"actor": "policy"', '"critic": "value"']),
    ("ppo_td_update.py",): (set(), None, []),
}


def test_every_script_in_the_gallery_is_checked():
    assert {args[0] for args in EXPECTED} == {p.name for p in GALLERY.glob("*.py") if not p.name.startswith("_")}


@pytest.mark.filterwarnings("ignore:std\\(\\)")  # nan_advantage.py's mistake
@pytest.mark.parametrize("args", list(EXPECTED), ids=[" ".join(a) for a in EXPECTED])
def test_the_doctor_names_each_scripts_mistakes(args, capsys):
    kinds, error_kind, phrases = EXPECTED[args]
    code = main(["doctor", str(GALLERY / args[0]), *args[1:], "--steps", "40", "--json"])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert code == (0 if report["ok"] else 1)
    found = {f["kind"] and f["item"] for f in report["findings"]}
    error = report["error"]
    if error_kind is not None:
        assert error["finding"]["item"] == error_kind, out
        found.discard(error_kind)  # (the error's own finding)
    assert found == kinds, out
    assert report["ok"] == (not kinds and error is None)
    for phrase in phrases:
        assert phrase in out, (phrase, out)
    if kinds:  # each finding points at a line of the script
        assert all(args[0] in f["where"] for f in report["findings"] if f["where"]), out


def test_the_text_report_lists_findings_then_the_error(capsys):
    """Everything found up to the error, most severe first, then the error with the user's line and the fix."""
    assert main(["doctor", str(GALLERY / "two_value_nets.py")]) == 1
    out = capsys.readouterr().out
    order = [out.index(s) for s in ("ran ", "[7]", "[2]", "[4]", "the code stopped with RuntimeError", "    at: ",
                                    "    why: ", "    fix: ")]
    assert order == sorted(order[:5]) + order[5:], out
    assert out.count("[3]") == 0  # the error's own finding is the error section, not listed twice


def test_doctor_flags_and_script_arguments(tmp_path, capsys):
    script = tmp_path / "echo_args.py"
    script.write_text("import sys\nprint('ARGS', sys.argv[1:])\n")
    assert main(["doctor", str(script), "--lr", "3", "--steps", "5", "--", "--json"]) == 1  # (it trains nothing)
    out = capsys.readouterr().out
    assert "ARGS ['--lr', '3', '--json']" in out and "nothing audited" in out
    assert main(["doctor", str(tmp_path / "missing.py")]) == 2
    assert "no script" in capsys.readouterr().err
    assert main(["doctor", "--steps", "0", str(script)]) == 2
    assert "must be positive" in capsys.readouterr().err


def test_a_script_that_never_ends_is_stopped_by_the_time_limit(tmp_path, capsys):
    script = tmp_path / "forever.py"
    script.write_text("import time\nwhile True:\n    time.sleep(0.05)\n")
    assert main(["doctor", str(script), "--timeout", "1"]) == 1  # (nothing audited)
    assert "stopped after 1 s (--timeout)" in capsys.readouterr().out
