"""config.device: resolved against the machine, refused with a way out where it cannot be, and on a GPU the
networks and the update run there while the envs step on the CPU (the CUDA tests run where there is one)."""

import dataclasses

import pytest
import torch

from conftest import small_config
from ppo_td.cli import main
from ppo_td.config import CollectorConfig, EnvConfig, ModelConfig, TrainConfig
from ppo_td.models import make_actor_critic, resolve_device, same_device
from ppo_td.persist import load_checkpoint, resume_pipeline
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline, train

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA GPU on this machine")
without_cuda = pytest.mark.skipif(CUDA, reason="checks the refusal on a machine without CUDA")


def test_device_values_are_checked_with_the_config():
    with pytest.raises(ValueError, match="device='gpu'.*auto, cpu, cuda, cuda:N, mps"):
        TrainConfig(device="gpu")
    with pytest.raises(ValueError, match="device='mps'.*worker processes act on the CPU"):
        TrainConfig(device="mps", collector=CollectorConfig(backend="process", num_workers=2),
                    env=EnvConfig(num_envs=2))
    # a learner on a CUDA GPU fed by worker processes (they act with a CPU copy of the policy)
    assert TrainConfig(device="cuda", collector=CollectorConfig(backend="process", num_workers=2),
                       env=EnvConfig(num_envs=2)).device == "cuda"
    assert TrainConfig(device="cuda:1").device == "cuda:1"  # checked against the machine when the run is built


def test_auto_takes_a_gpu_only_for_images(monkeypatch):
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu", images=True) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a machine with a GPU, as auto sees it
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert resolve_device("auto", images=True) == torch.device("cuda:0")  # indexed, as parameters report it
    assert same_device(torch.device("cuda:0"), torch.device("cuda")) and not same_device(
        torch.device("cuda:1"), torch.device("cuda"))
    assert resolve_device("auto", images=False) == torch.device("cpu")  # small MLPs: the CPU is faster


@without_cuda
def test_a_missing_gpu_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="sees no CUDA GPU.*--device cpu"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="sees no CUDA GPU"):
        build_pipeline(small_config(device="cuda"))
    assert main(["train", "--preset", "cleanrl", "--device", "cuda", "--run-dir", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()


def test_parts_on_another_device_are_refused():
    config = small_config(device="cpu")
    p = build_pipeline(config)
    p.collector.shutdown()
    actor, _ = make_actor_critic(p.description, config.model, device="meta")  # parameters without storage
    assert next(actor.parameters()).device.type == "meta"
    with pytest.raises(ValueError, match=r"actor= has parameters on meta.*actor.to\('cpu'\)"):
        build_pipeline(config, actor=actor)


def test_cpu_and_auto_train_identically_here():
    config = small_config(total_frames=128)
    auto, cpu = train(config), train(dataclasses.replace(config, device="cpu"))
    assert auto.pipeline.device == cpu.pipeline.device == torch.device("cpu")
    assert [m["loss_policy"] for m in auto.history] == [m["loss_policy"] for m in cpu.history]


def test_resume_may_change_the_device(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--preset", "cleanrl", "--total-frames", "1536", "--model.hidden-sizes", "16", "16",
                 "--eval-episodes", "1", "--checkpoint-every", "1", "--run-dir", str(run), "--no-progress"]) == 0
    state = load_checkpoint(run / "checkpoint.pt")
    assert state["config"]["device"] == "auto"
    capsys.readouterr()
    main(["train", "--resume", str(run), "--device", "cpu"])  # accepted (the run is complete: nothing to do)
    err = capsys.readouterr().err
    assert "nothing to resume" in err and "drop" not in err
    resumed = resume_pipeline(run / "checkpoints" / sorted(p.name for p in (run / "checkpoints").iterdir())[0],
                              device="cpu")
    resumed.pipeline.collector.shutdown()
    assert resumed.pipeline.config.device == "cpu" and resumed.pipeline.device == torch.device("cpu")

    # a run that replayed its loss as CUDA graphs (its checkpoint as a GPU run writes it) goes on without them here
    early = run / "checkpoints" / sorted(p.name for p in (run / "checkpoints").iterdir())[0]
    state = load_checkpoint(early)
    state["config"].update(device="cuda", compile=True, cudagraphs=True)
    torch.save(state, tmp_path / "graphs.pt")
    resumed = resume_pipeline(tmp_path / "graphs.pt", device="cpu")
    resumed.pipeline.collector.shutdown()
    assert resumed.pipeline.device == torch.device("cpu") and not resumed.pipeline.config.cudagraphs
    assert resumed.pipeline.config.compile is True
    assert not resumed.exact and "without CUDA graphs (cudagraphs=False) on cpu" in resumed.describe()


@needs_cuda
@pytest.mark.parametrize("preset", ["cleanrl", "pendulum"])
def test_training_on_the_gpu(preset, tmp_path):
    """Networks, GAE and the update on the GPU; the batch collected on the CPU; evaluation, checkpoint and a
    resume on the CPU all work (pendulum: a Gaussian; with squashed actions, TanhNormal's bounds on the GPU)."""
    config = dataclasses.replace(get_preset(preset), total_frames=4 * get_preset(preset).frames_per_batch,
                                 eval_episodes=2, device="cuda")
    if preset == "pendulum":
        config = dataclasses.replace(config, model=ModelConfig(squash_actions=True))
    result = train(config)
    p = result.pipeline
    assert p.device.type == "cuda" and all(q.device.type == "cuda" for q in p.parameters)
    assert len(result.eval_returns) == 2 and all(r == r for r in result.eval_returns)
    batch = next(iter(build_pipeline(config).collector))
    assert batch.device is None or batch.device.type == "cpu"
    run = tmp_path / "run"
    assert main(["train", "--preset", preset, "--device", "cuda", "--total-frames", str(config.total_frames),
                 "--eval-episodes", "1", "--checkpoint-every", "1", "--run-dir", str(run), "--no-progress"]) == 0
    assert main(["eval", str(run), "--episodes", "1"]) == 0
    resumed = resume_pipeline(run / "checkpoints" / sorted(p.name for p in (run / "checkpoints").iterdir())[0],
                              device="cpu")
    resumed.pipeline.collector.shutdown()
    assert all(q.device.type == "cpu" for q in resumed.pipeline.parameters)


def test_a_resume_on_another_device_is_not_called_exact():
    from ppo_td.persist import capture
    from ppo_td.persist.snapshot import inexact_reason

    p = build_pipeline(small_config(device="cpu"))
    next(iter(p.collector))
    snapshot = capture(p)
    assert snapshot["device"] == "cpu" and snapshot["device_rng"] is None
    assert inexact_reason(p, snapshot) == ""
    moved = dict(snapshot, device="cuda")  # written by the same run on a GPU
    assert "moved from cuda to cpu" in inexact_reason(p, moved)
    p.collector.shutdown()


def test_env_device_is_checked_with_the_config_and_against_the_machine(tmp_path):
    with pytest.raises(ValueError, match="env.device='gpu'.*auto, cpu, cuda, cuda:N"):
        EnvConfig(device="gpu")
    with pytest.raises(ValueError, match="env.device='cuda'.*'cpu' with env.suite='gymnasium'"):
        EnvConfig(device="cuda")
    assert EnvConfig("navigation", suite="vmas", max_episode_steps=10, device="cuda:1").device == "cuda:1"
    if not CUDA:
        pytest.importorskip("vmas")
        run = tmp_path / "run"
        assert main(["train", "--preset", "vmas-navigation", "--env.device", "cuda", "--run-dir", str(run)]) == 2
        assert not run.exists()


def test_a_vmas_env_on_the_cpu_device_keeps_the_rollout_there_and_evaluates():
    """The device path on the CPU (the same code a GPU runs): env.device 'cpu' and 'auto' (no GPU here) build the
    simulator there; the batch is stored on the env's device and the networks follow it under device='auto'."""
    pytest.importorskip("vmas")
    config = get_preset("vmas-navigation")
    env = dataclasses.replace(config.env, num_envs=4, max_episode_steps=10, device="auto")
    config = dataclasses.replace(config, env=env, frames_per_batch=80, total_frames=160, eval_episodes=2,
                                 optim=dataclasses.replace(config.optim, num_minibatches=2, update_epochs=1))
    p = build_pipeline(config)
    batch = next(iter(p.collector))
    want = torch.device("cuda", torch.cuda.current_device()) if CUDA else torch.device("cpu")
    assert same_device(batch.device, want) and same_device(p.device, want)
    assert batch["agents", "observation"].device == batch.device
    p.collector.shutdown()
    result = train(config)
    assert len(result.evaluation.returns) == 2


@needs_cuda
def test_vmas_on_the_gpu_collects_without_host_copies_and_resumes_and_evaluates(tmp_path):
    pytest.importorskip("vmas")
    run = tmp_path / "run"
    # (60 envs: the preset's 6,000-frame batches are 100 steps of each)
    assert main(["train", "--preset", "vmas-navigation", "--env.device", "cuda", "--env.num-envs", "60",
                 "--total-frames", "12000", "--eval-episodes", "2", "--checkpoint-every", "1",
                 "--run-dir", str(run)]) == 0
    state = load_checkpoint(run / "checkpoint.pt")
    assert state["config"]["env"]["device"] == "cuda"
    assert main(["eval", str(run), "--episodes", "2"]) == 0


@needs_cuda
def test_a_gpu_learner_fed_by_worker_processes(tmp_path):
    config = dataclasses.replace(get_preset("cartpole"), device="cuda", total_frames=4096, eval_episodes=2,
                                 collector=CollectorConfig(backend="process", num_workers=2))
    result = train(config)
    assert result.pipeline.device.type == "cuda" and result.pipeline.collector.mirror is not None
    assert len(result.evaluation.returns) == 2



def test_cuda_graphs_are_refused_without_compile_or_off_cuda(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"cudagraphs=True.*compile='auto'.*set compile=True"):
        TrainConfig(cudagraphs=True)
    with pytest.raises(ValueError, match=r"cudagraphs=True.*compile=False"):
        TrainConfig(compile=False, cudagraphs=True)
    with pytest.raises(ValueError, match=r"cudagraphs=True on device 'cpu'.*device='cuda'.*cudagraphs=False"):
        build_pipeline(small_config(device="cpu", compile=True, cudagraphs=True))
    run = tmp_path / "runs" / "run"  # refused before anything is written: not even the run folder's parent
    assert main(["train", "--preset", "cleanrl", "--cudagraphs", "--run-dir", str(run)]) == 2
    assert "set compile=True" in capsys.readouterr().err
    assert main(["train", "--preset", "cleanrl", "--compile", "--cudagraphs", "--device", "cpu",
                 "--run-dir", str(run)]) == 2
    assert "device='cuda'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_cuda_graphs_are_refused_with_a_loss_ppo_td_does_not_compile():
    """A loss given from Python that ppo_td does not compile would replay nothing as CUDA graphs: refused (checked
    as if on CUDA: here the device check comes first)."""
    from torchrl.objectives import ClipPPOLoss

    from ppo_td.training.pipeline import check_cudagraphs

    p = build_pipeline(small_config())
    p.collector.shutdown()
    graphs = small_config(compile=True, cudagraphs=True)
    check_cudagraphs(graphs, torch.device("cuda"), p.loss)  # ppo_td's own: accepted
    with pytest.raises(ValueError, match=r"cudagraphs=True with a loss ppo_td does not compile \(ClipPPOLoss"):
        check_cudagraphs(graphs, torch.device("cuda"), ClipPPOLoss(p.actor, p.critic))
    check_cudagraphs(small_config(), torch.device("cpu"), ClipPPOLoss(p.actor, p.critic))  # off: nothing to check


@needs_cuda
@pytest.mark.slow  # two compilations each
@pytest.mark.parametrize("preset", ["cleanrl", "pendulum"])
def test_cuda_graphs_train_as_compiled_within_float_rounding(preset):
    """cudagraphs=True on the GPU (a categorical policy, a Gaussian): the same losses and weights as compile=True
    without graphs, within float rounding, over several updates of several minibatches (the kept terms outlive each
    replay); a piece torch could not graph would be an error (triton.cudagraph_or_error), so the graphs ran; the
    gradients are let go after each update."""
    config = dataclasses.replace(get_preset(preset), total_frames=3 * get_preset(preset).frames_per_batch,
                                 eval_episodes=0, device="cuda", compile=True)
    runs = {}
    for graphs in (False, True):
        torch.manual_seed(0)
        runs[graphs] = train(dataclasses.replace(config, cudagraphs=graphs))
    for a, b in zip(runs[False].history, runs[True].history, strict=True):
        for key in ("loss_policy", "loss_value", "kl_k3", "grad_norm", "clip_fraction"):
            assert a[key] == pytest.approx(b[key], rel=1e-3, abs=1e-5), key
    for part in ("actor", "critic"):
        for (name, a), b in zip(getattr(runs[False], part).state_dict().items(),
                                getattr(runs[True], part).state_dict().values(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=f"{part}.{name}")
    assert all(q.grad is None for q in runs[True].pipeline.parameters)
