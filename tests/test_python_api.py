"""A Python user's whole day (issue 60): ``ppo_td.train`` prints what ``ppo-td train`` prints (one code path),
shows progress, stops on Ctrl-C with a checkpoint and a ``KeyboardInterrupt``, resumes with ``ppo_td.resume``,
evaluates during training (logged, the best kept, a return to stop at), and calls documented callbacks."""

import csv
import dataclasses
import math
import os
import signal
import sys
import threading
import time
import traceback
import types

import pytest
import torch

import ppo_td
from conftest import small_config
from ppo_td.cli import main
from ppo_td.config import EnvConfig
from ppo_td.training import Callback, StopTraining

TIMING = {"time", "sps", "collect_seconds", "collect_sps", "update_seconds", "advantage_seconds"}
EVAL = {"eval_return", "eval_return_std", "eval_ended"}
TINY = ["--preset", "cleanrl", "--model.hidden-sizes", "16", "16", "--env.num-envs", "4", "--frames-per-batch", "64",
        "--eval-episodes", "2"]


def _config(**changes):
    return small_config(**changes)


def _rows(run):
    with (run / "metrics.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def _lines(text):
    """What a run says, without its numbers: the same lines in the same order from either entry point."""
    out = []
    for line in text.splitlines():
        if line.startswith(("note:", "trained ", "deterministic evaluation", "sampled evaluation", "run folder",
                            "iteration ", "evaluation at")):
            out.append(line.split(":")[0].split(" ")[0])
    return out


def test_python_and_the_command_line_say_the_same(tmp_path, capsys):
    """One code path: the note of a budget that is no multiple of the batch, the progress lines when piped, the
    evaluations, the run folder; the same lines from ppo-td train and ppo_td.train."""
    assert main(["train", *TINY, "--total-frames", "150", "--run-dir", str(tmp_path / "cli")]) == 0
    cli = capsys.readouterr().out
    config = _config(total_frames=150)
    ppo_td.train(config, run_dir=str(tmp_path / "python"))
    python = capsys.readouterr().out
    assert "note: total_frames=150 is not a multiple of frames_per_batch=64: the run trains 2 batches" in python
    assert "iteration 2/2  frames 128/128" in python and "deterministic evaluation: " in python
    assert _lines(python) == _lines(cli)
    ppo_td.train(config, progress=False)  # off with one argument; the notes and the evaluations stay
    quiet = capsys.readouterr().out
    assert "iteration " not in quiet and "note: total_frames=150" in quiet and "deterministic evaluation" in quiet


@pytest.mark.slow  # two short runs through torch.compile (seconds each, its cache cold)
def test_compile_auto_compiles_a_long_run_from_either_entry_point(tmp_path, capsys, monkeypatch):
    """compile='auto' (the default) compiles a run of COMPILE_PAYS_STEPS minibatch steps or more (here lowered to 1)
    from ppo-td train and ppo_td.train alike, said once at its start and recorded as 'auto'; a shorter run stays
    eager and says nothing; --compile False runs eager."""
    import json

    from ppo_td.training import pipeline

    result = ppo_td.train(_config(total_frames=128), progress=False)
    assert not result.pipeline.compiled and "compile='auto'" not in capsys.readouterr().out  # under the threshold
    monkeypatch.setattr(pipeline, "COMPILE_PAYS_STEPS", 1)
    assert main(["train", *TINY, "--total-frames", "128", "--run-dir", str(tmp_path / "cli")]) == 0
    result = ppo_td.train(_config(total_frames=128), run_dir=str(tmp_path / "python"))
    assert result.pipeline.compiled
    assert result.pipeline.collector.fast_policy.forward is not result.pipeline.collector.fast_policy.net
    for said in capsys.readouterr().out.split("deterministic evaluation")[:2]:  # each run's start
        assert said.count("note: compile='auto' compiles this run (") == 1
    for run in ("cli", "python"):
        assert json.loads((tmp_path / run / "config.json").read_text())["compile"] == "auto"
    assert main(["train", *TINY, "--total-frames", "128", "--compile", "False"]) == 0
    assert "compile='auto'" not in capsys.readouterr().out


def test_compile_auto_compiles_only_what_was_measured_to_pay(monkeypatch):
    """compiles(): True and False as given; 'auto' only on the CPU, in one process, for ppo_td's own lean loss of
    one feed-forward policy, past COMPILE_PAYS_STEPS minibatch steps."""
    from ppo_td.training import build_pipeline, compiles, pipeline

    p = build_pipeline(_config())
    cpu, config = torch.device("cpu"), p.config
    assert config.compile == "auto" and not p.compiled  # a short run
    monkeypatch.setattr(pipeline, "COMPILE_PAYS_STEPS", 1)
    assert compiles(config, cpu, None, p.loss)
    assert not compiles(config, torch.device("cuda"), None, p.loss)  # (not measured there)
    assert not compiles(config, cpu, object(), p.loss)  # over ranks
    assert not compiles(config, cpu, None, p.loss, recurrent=True)
    assert compiles(dataclasses.replace(config, compile=True), cpu, None, p.loss)  # given: as given
    assert not compiles(dataclasses.replace(config, compile=False), cpu, None, p.loss)
    p.loss.forward = lambda td: td  # a forward of the user's: the update runs it, never compiled
    assert not compiles(config, cpu, None, p.loss)
    conv = build_pipeline(_config())  # a network compile was not measured on: a CNN, a user's own parameters
    conv.loss.fast.actor.head.append(torch.nn.Conv1d(1, 1, 1))
    assert not compiles(config, cpu, None, conv.loss)
    own = build_pipeline(_config())
    own.loss.fast.critic.head.append(type("Scale", (torch.nn.Module,), {})())
    own.loss.fast.critic.head[-1].weight = torch.nn.Parameter(torch.ones(1))
    assert not compiles(config, cpu, None, own.loss)
    monkeypatch.setattr(pipeline, "COMPILE_PAYS_STEPS", config.num_iterations * 4 * 4 + 1)  # one step short
    assert not compiles(config, cpu, None, build_pipeline(_config()).loss)


@pytest.mark.slow  # a fresh Python, and torch.compile failing in it
def test_compile_auto_runs_eager_where_torch_compile_fails_and_says_why(tmp_path):
    """Where torch.compile cannot work (here: no C++ compiler, its cache empty), compile='auto' runs eager and says
    why in one line, instead of failing the run."""
    import subprocess

    code = ("import torch; from ppo_td.training import build_pipeline, pipeline; from conftest import small_config\n"
            "pipeline.COMPILE_PAYS_STEPS = 1\n"
            "p = build_pipeline(small_config())\n"
            "print('compiled', p.compiled, p.collector.fast_policy.forward is p.collector.fast_policy.net)")
    env = {**os.environ, "CXX": str(tmp_path / "no-such-compiler"), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    said = out.stdout + out.stderr
    assert "compiled False True" in said
    assert "note: compile='auto' runs eager" in said and "InvalidCxxCompiler" in said


def test_the_compile_flag_reads_auto_true_and_false():
    """--compile alone is True and --no-compile False, as when it was a plain switch; auto, True/on, False/off in
    any case; anything else refused naming the three."""
    from ppo_td.cli.parse import compile_flags, train_command

    assert train_command([], "ppo-td train")[0].config.compile == "auto"
    assert train_command(["--compile"], "ppo-td train")[0].config.compile is True
    assert train_command(["--compile", "--seed", "3"], "ppo-td train")[0].config.compile is True
    assert train_command(["--no-compile"], "ppo-td train")[0].config.compile is False
    assert train_command(["--compile=off"], "ppo-td train")[0].config.compile is False
    assert train_command(["--compile", "AUTO"], "ppo-td train")[0].config.compile == "auto"
    assert compile_flags(["--compile", "on", "--seed", "3"]) == ["--compile", "True", "--seed", "3"]
    with pytest.raises(ValueError, match="--compile maybe: give auto .* True .* or False"):
        train_command(["--compile", "maybe"], "ppo-td train")
    with pytest.raises(ValueError, match=r"compile='yes' is invalid: it must be 'auto', True or False"):
        _config(compile="yes")


def test_a_notebook_gets_the_bar_and_a_pipe_gets_lines(monkeypatch):
    from ppo_td.experiment.progress import Progress, in_notebook

    assert not in_notebook()
    shell = type("ZMQInteractiveShell", (), {})()  # what Jupyter's kernel runs
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert in_notebook()
    import io

    monkeypatch.setattr(sys, "stderr", type("OutStream", (io.StringIO,), {})())  # the kernel's stream, not a tty
    bar = Progress(128, 2, bar=True)
    try:
        assert bar.live
    finally:
        bar.close()
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # redirected, as a tuner's trial is: lines, in a notebook too
    assert not Progress(128, 2, bar=True).live
    monkeypatch.delitem(sys.modules, "IPython")  # piped, no notebook
    assert not Progress(128, 2, bar=True).live and not Progress(128, 2, bar=False).live


def _interrupt_after(rows_file, n):
    """SIGINT this process once ``rows_file`` has ``n`` rows (as Ctrl-C would, or a notebook's interrupt)."""
    def watch():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if rows_file.exists() and len(rows_file.read_text().splitlines()) > n:
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.005)
    thread = threading.Thread(target=watch)
    thread.start()
    return thread


def test_ctrl_c_from_python_checkpoints_raises_keyboard_interrupt_and_resume_continues_exactly(tmp_path):
    config = _config(total_frames=64 * 10)
    full = tmp_path / "full"
    ppo_td.train(config, run_dir=str(full), checkpoint_every=0, progress=False)
    cut = tmp_path / "cut"
    watcher = _interrupt_after(cut / "metrics.csv", 3)
    with pytest.raises(KeyboardInterrupt) as caught:
        ppo_td.train(config, run_dir=str(cut), checkpoint_every=0, progress=False)
    watcher.join()
    err = caught.value
    assert f"continue with ppo_td.resume({str(cut)!r})" in str(err) and err.checkpoint.exists()
    ours = [f for f in traceback.extract_tb(err.__traceback__) if f"{os.sep}ppo_td{os.sep}" in f.filename]
    assert len(ours) == 1  # ppo_td.train's raise, not a wall of ppo_td's frames
    assert 3 <= ppo_td.persist.load_checkpoint(cut)["iteration"] < 10
    result = ppo_td.resume(str(cut), progress=False)
    strip = [{k: v for k, v in r.items() if k not in TIMING} for r in _rows(cut)]
    assert strip == [{k: v for k, v in r.items() if k not in TIMING} for r in _rows(full)]
    import json

    assert result.eval_returns == json.loads((full / "summary.json").read_text())["eval_returns"]


def test_ctrl_c_without_a_run_folder_says_nothing_was_saved_and_keeps_the_result(tmp_path, monkeypatch):
    config = _config(total_frames=64 * 200)
    seen = []

    def count(metrics, pipeline):
        seen.append(metrics["iteration"])
        if len(seen) == 3:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt, match="no run_dir, so nothing was saved") as caught:
        ppo_td.train(config, callbacks=[count], progress=False)
    assert [m["iteration"] for m in caught.value.result.history] == [1, 2, 3]  # stopped at the iteration's end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the user's handler is back


class Recorder(Callback):
    """Every hook, what it was given; a value of its own logged each iteration."""

    def __init__(self):
        self.iterations, self.evaluations, self.ends = [], [], []

    def on_iteration(self, metrics, pipeline):
        self.iterations.append(metrics["iteration"])
        metrics["my_value"] = 10.0 * metrics["iteration"]
        metrics["my_tensor"] = torch.tensor(0.25 * metrics["iteration"])  # a torch scalar: a number in the CSV

    def on_evaluation(self, evaluation, metrics, pipeline):
        self.evaluations.append((metrics["iteration"], evaluation.episodes, metrics["eval_return"]))

    def on_end(self, result):
        self.ends.append(result)


def test_evaluation_during_training_is_logged_keeps_the_best_and_leaves_training_as_it_was(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torchrl.record.loggers import CSVLogger

    config = _config(total_frames=64 * 6, eval_episodes=3)
    plain = ppo_td.train(config, progress=False)
    recorder, mine = Recorder(), CSVLogger(exp_name="mine", log_dir=str(tmp_path / "csv"))
    run = tmp_path / "run"
    evaluated = ppo_td.train(dataclasses.replace(config, eval_every=130), run_dir=str(run), progress=False,
                             callbacks=[recorder], loggers=["tensorboard"])
    # training itself is unchanged: its own envs, random streams and updates are not touched by the evaluations
    assert [{k: v for k, v in m.items() if k not in TIMING | EVAL | {"my_value", "my_tensor"}}
            for m in evaluated.history] == [
        {k: v for k, v in m.items() if k not in TIMING} for m in plain.history]
    rows = _rows(run)
    evaluated_at = [int(r["iteration"]) for r in rows if not math.isnan(float(r["eval_return"]))]
    assert evaluated_at == [3, 5] and [e[0] for e in recorder.evaluations] == [3, 5]  # past 130 and 260 frames
    assert all(e[1] == 3 for e in recorder.evaluations) and [float(r["my_value"]) for r in rows] == [
        10.0 * i for i in range(1, 7)]
    assert [float(r["my_tensor"]) for r in rows] == [0.25 * i for i in range(1, 7)]
    best = max(recorder.evaluations, key=lambda e: e[2])
    assert evaluated.best.score == best[2] and evaluated.best.iteration == best[0]
    state = ppo_td.persist.load_checkpoint(run / "best.pt")
    assert state["iteration"] == best[0] and state["evaluation"]["eval_return"] == best[2]
    best_policy, last_policy = ppo_td.load_policy(str(run), which="best"), ppo_td.load_policy(str(run))
    best_weights = ppo_td.persist.load_checkpoint(run / "best.pt")["actor"]
    last_weights = ppo_td.persist.load_checkpoint(run)["actor"]
    for policy, weights in ((best_policy, best_weights), (last_policy, last_weights)):
        loaded = policy.actor.state_dict()
        assert all(torch.equal(v, loaded[k]) for k, v in weights.items())  # each its checkpoint's weights
    assert any(not torch.equal(v, last_weights[k]) for k, v in best_weights.items())  # two policies
    assert main(["eval", str(run), "--which", "best", "--episodes", "1"]) == 0
    events = EventAccumulator(str(next((run / "tensorboard").rglob("events.out.tfevents.*")).parent))
    events.Reload()
    assert [int(e.step) for e in events.Scalars("eval_return")] == [192, 320]
    assert [int(e.step) for e in events.Scalars("final_eval_return")] == [384]
    assert [int(e.step) for e in events.Scalars("my_value")] == [64 * i for i in range(1, 7)]
    assert len(recorder.ends) == 1 and recorder.ends[0].evaluation is not None  # at the end, with the final one
    ppo_td.train(dataclasses.replace(config, eval_every=130), progress=False, loggers=[mine])  # objects, no folder
    scalars = tmp_path / "csv" / "mine" / "scalars"
    assert (scalars / "eval_return.csv").exists() and (scalars / "final_eval_return.csv").exists()


def test_a_return_to_stop_at_ends_the_run_complete(tmp_path, capsys):
    config = dataclasses.replace(ppo_td.get_preset("cartpole"), total_frames=512 * 40, eval_every=512 * 2,
                                 eval_episodes=2, eval_stop_return=60.0)
    run = tmp_path / "run"
    result = ppo_td.train(config, run_dir=str(run), progress=False)
    out = capsys.readouterr().out
    assert result.ended_early.startswith("the evaluation at ") and "reaching eval_stop_return=60" in result.ended_early
    assert not result.stopped and result.eval_returns and (run / "summary.json").exists()
    assert result.history[-1]["eval_return"] >= 60.0 and result.history[-1]["frames"] < 512 * 40
    assert "ended early: the evaluation at " in out
    assert ppo_td.persist.load_checkpoint(run)["ended_early"] == result.ended_early
    with pytest.raises(ValueError, match="the run is complete"):
        ppo_td.resume(str(run))
    assert main(["train", "--resume", str(run)]) == 2


def test_callbacks_stop_a_run_to_continue_or_as_complete_and_bad_ones_are_refused(tmp_path):
    def pause(metrics, pipeline):
        if metrics["iteration"] == 2:
            raise StopTraining()

    config = _config(total_frames=64 * 4)
    run = tmp_path / "paused"
    paused = ppo_td.train(config, run_dir=str(run), callbacks=[pause], progress=False)
    assert paused.stopped and not paused.eval_returns and not (run / "summary.json").exists()
    assert len(_rows(run)) == 2  # the stopping iteration's row is logged (the other callbacks ran for it)
    assert ppo_td.resume(str(run), progress=False).history[-1]["iteration"] == 4

    def done(metrics, pipeline):
        if metrics["iteration"] == 2:
            raise StopTraining("goal reached", complete=True)

    ended = ppo_td.train(config, run_dir=str(tmp_path / "done"), callbacks=[done], progress=False)
    assert ended.ended_early == "goal reached" and not ended.stopped and len(ended.eval_returns) == 2
    with pytest.raises(TypeError, match="callbacks: 3 is neither a function callback"):
        ppo_td.train(config, callbacks=[3])
    with pytest.raises(ValueError, match="has no best.pt: a run keeps its best policy when it evaluates"):
        ppo_td.load_policy(str(run), which="best")


def test_a_resume_goes_on_from_the_best_so_far_and_drops_a_best_of_a_dropped_history(tmp_path, capsys):
    config = _config(total_frames=64 * 6, eval_episodes=2, eval_every=64)
    run = tmp_path / "run"
    watcher = _interrupt_after(run / "metrics.csv", 3)
    with pytest.raises(KeyboardInterrupt):
        ppo_td.train(config, run_dir=str(run), checkpoint_every=0, progress=False)
    watcher.join()
    state = ppo_td.persist.load_checkpoint(run / "best.pt")
    state["evaluation"]["eval_return"] = 1e9  # a best no later evaluation beats: a resume must keep it
    torch.save(state, run / "best.pt")
    result = ppo_td.resume(str(run), progress=False)
    assert result.best.score == 1e9 and result.best.iteration == state["iteration"]
    assert ppo_td.persist.load_checkpoint(run / "best.pt")["evaluation"]["eval_return"] == 1e9
    # a best.pt after the checkpoint resumed (a crash after it): of a history the resume drops
    (run / "summary.json").unlink()
    iterations = sorted((run / "checkpoints").glob("iter_*.pt"))
    (run / "checkpoint.pt").unlink()
    (run / "checkpoint.pt").hardlink_to(iterations[0])
    state["iteration"] = 10**6
    torch.save(state, run / "best.pt")
    again = ppo_td.resume(str(run), progress=False)
    assert "best.pt of iteration 1000000 is after the checkpoint resumed" in capsys.readouterr().out
    assert again.best.score < 1e9


def test_eval_every_needs_episodes_and_the_stop_needs_evaluations():
    with pytest.raises(ValueError, match="eval_every=64 is invalid: it must be 0 with eval_episodes=0"):
        _config(eval_every=64, eval_episodes=0)
    with pytest.raises(ValueError, match="eval_stop_return=1.0 is invalid: it must be None unless eval_every > 0"):
        _config(eval_stop_return=1.0)


class Endless:
    """Callbacks that SIGINT this process once training is done and the final evaluation runs (its episodes never
    end: the endless env with a huge step cap), or raise in on_end."""

    def __init__(self, last, fail_on_end=False):
        self.last, self.fail_on_end, self.ends = last, fail_on_end, []

    def on_iteration(self, metrics, pipeline):
        if metrics["iteration"] == self.last:
            threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT)).start()  # well inside the evaluation

    def on_end(self, result):
        self.ends.append(result)
        if self.fail_on_end:
            raise RuntimeError("my on_end broke")


def _endless_config():
    return dataclasses.replace(_config(env=EnvConfig("endless_envs:endless", num_envs=4), total_frames=128),
                               eval_max_steps=10**8, eval_episodes=2)


def test_ctrl_c_in_the_final_evaluation_without_a_run_folder_keeps_the_trained_result():
    watcher = Endless(last=2)
    with pytest.raises(KeyboardInterrupt, match="the final evaluation stopped; training is complete") as caught:
        ppo_td.train(_endless_config(), callbacks=[watcher], progress=False)
    assert caught.value.result.history[-1]["iteration"] == 2 and caught.value.result.evaluation is None
    assert len(watcher.ends) == 1  # on_end, however the run ended


def test_an_on_end_that_raises_on_an_interrupt_is_said_and_the_interrupt_goes_up(tmp_path, capsys):
    config = _config(total_frames=64 * 200)

    def stop_soon(metrics, pipeline):
        if metrics["iteration"] == 2:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt, match="continue with ppo_td.resume"):
        ppo_td.train(config, run_dir=str(tmp_path), callbacks=[stop_soon, Endless(last=-1, fail_on_end=True)],
                     progress=False)
    assert "raised RuntimeError: my on_end broke" in capsys.readouterr().err


def test_a_stop_from_on_evaluation_keeps_that_evaluation_s_best_first(tmp_path):
    class StopAtFirst(Callback):
        def on_evaluation(self, evaluation, metrics, pipeline):
            raise StopTraining("first evaluation", complete=True)

    run = tmp_path / "run"
    result = ppo_td.train(_config(total_frames=64 * 4, eval_every=128), run_dir=str(run), callbacks=[StopAtFirst()],
                          progress=False)
    assert result.ended_early == "first evaluation" and result.best.iteration == 2
    assert ppo_td.persist.load_checkpoint(run / "best.pt")["iteration"] == 2


def test_a_resume_with_only_the_final_evaluation_left_logs_it_and_calls_on_end(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"
    ppo_td.train(_config(), run_dir=str(run), progress=False, loggers=["tensorboard"])
    (run / "summary.json").unlink()  # as if the final evaluation had been interrupted
    recorder = Recorder()
    result = ppo_td.resume(str(run), progress=False, callbacks=[recorder])
    assert result.eval_returns and recorder.ends == [result] and result.history[-1]["iteration"] == 3
    folders = {p.parent for p in (run / "tensorboard").rglob("events.out.tfevents.*")}
    events = [EventAccumulator(str(folder)) for folder in folders]
    steps = []
    for accumulator in events:
        accumulator.Reload()
        if "final_eval_return" in accumulator.Tags()["scalars"]:
            steps += [int(e.step) for e in accumulator.Scalars("final_eval_return")]
    assert steps.count(192) == 2  # once by the run, once by the resume that finished it


def test_records_from_before_compile_auto_read_as_they_ran_and_name_the_same_config():
    """A config without a compile field (written before 2026-11-27) ran eager: it reads as compile=False, not today's
    'auto'. A config's identity (a returns store's key, a study's tune.json) takes 'auto' as False, the default
    before, so records of either name the same config; True is another."""
    from ppo_td.config import from_dict, identity_dict, to_dict

    old = to_dict(_config())
    del old["compile"]
    assert from_dict(old).compile is False
    assert from_dict(to_dict(_config())).compile == "auto"
    assert identity_dict(_config()) == identity_dict(_config(compile=False))
    assert identity_dict(_config()) != identity_dict(_config(compile=True))


def test_compile_auto_goes_on_eager_where_the_loss_fails_to_compile(monkeypatch, caplog):
    """Fault injection: the loss's compilation fails (the tiny function compiled). compile='auto' tries its first
    compiled minibatch first and goes on eager, said once, its gradients and random numbers put back: the run is the
    eager run, bit for bit. compile=True, asked for, stops with the error."""
    import logging

    from ppo_td.training import FastLoss, pipeline

    monkeypatch.setattr(pipeline, "COMPILE_PAYS_STEPS", 1)

    def broken(self, device, fullgraph=False, cudagraphs=False):
        def fail(minibatch):
            raise RuntimeError("inductor: cannot compile this loss")
        return fail

    monkeypatch.setattr(FastLoss, "compiled_terms", broken)
    with caplog.at_level(logging.WARNING, logger="ppo_td"):
        auto = ppo_td.train(_config(total_frames=192), progress=False)
    assert not auto.pipeline.compiled
    said = [r.getMessage() for r in caplog.records if "compiling the loss failed" in r.getMessage()]
    assert len(said) == 1 and "RuntimeError: inductor: cannot compile this loss" in said[0]
    eager = ppo_td.train(_config(total_frames=192, compile=False), progress=False)
    assert [(h["loss_policy"], h["loss_value"], h["grad_norm"]) for h in auto.history] == [
        (h["loss_policy"], h["loss_value"], h["grad_norm"]) for h in eager.history]
    for a, b in zip(auto.actor.state_dict().values(), eager.actor.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(RuntimeError, match="cannot compile this loss"):
        ppo_td.train(_config(total_frames=192, compile=True), progress=False)


def test_a_compiler_a_signal_stopped_is_said_as_such_not_as_a_failure_of_compiling(monkeypatch, caplog):
    """Fault injection: torch's C++ compiler killed by SIGINT (a terminal's Ctrl-C reaches every process of the
    command) under the loss's compilation, as torch raises it (the compiler's CalledProcessError under its own
    errors). compile='auto' says which signal stopped the compiler, not that compiling failed, and goes on eager."""
    import logging
    import subprocess

    from ppo_td.training import FastLoss, pipeline

    monkeypatch.setattr(pipeline, "COMPILE_PAYS_STEPS", 1)

    def cut(self, device, fullgraph=False, cudagraphs=False):
        def fail(minibatch):
            try:
                try:
                    raise subprocess.CalledProcessError(-signal.SIGINT, ["g++", "kernel.cpp"])
                except subprocess.CalledProcessError as killed:
                    raise RuntimeError("C++ compile error") from killed
            except RuntimeError as inner:
                raise RuntimeError("InductorError: CppCompileError: C++ compile error") from inner
        return fail

    monkeypatch.setattr(FastLoss, "compiled_terms", cut)
    with caplog.at_level(logging.WARNING, logger="ppo_td"):
        run = ppo_td.train(_config(total_frames=128), progress=False)
    said = [r.getMessage() for r in caplog.records if "compile='auto'" in r.getMessage()]
    assert len(said) == 1 and "SIGINT stopped the C++ compiler" in said[0] and "failed" not in said[0], said
    assert not run.pipeline.compiled and len(run.history) == 2
    assert pipeline.compiler_signal(RuntimeError("no compiler under it")) is None
