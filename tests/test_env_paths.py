"""``python -m benchmarks env_paths``: the path a config takes to a built env (issue 46's before and after)."""

import json

import torch

from benchmarks.speed import env_paths

torch.set_num_threads(1)


def test_the_path_through_build_env_and_load_policy_is_traced_and_counted(tmp_path, capsys):
    _, path = env_paths.trace(lambda: sorted([3, 1]))
    assert path == []  # no ppo_td code ran
    assert env_paths.main(["--kinds", "gym-id-numpy", "--repeats", "1", "--json", str(tmp_path / "p.json")]) == 0
    numbers = json.loads((tmp_path / "p.json").read_text())
    built, policy = numbers["gym-id-numpy"], numbers["load_policy"]
    assert built["path"][0] == "c:ppo_td.envs.make" and built["calls"] <= built["stops"] and built["build_seconds"] > 0
    assert sum(built["entries"].values()) == built["calls"] and "ppo_td.envs.make" in built["entries"]
    assert policy["path"][:2] == ["c:ppo_td", "c:ppo_td.deploy.policy"] and policy["modules"] > built["modules"]
    assert numbers["envs_files"]["make.py"] > 0
    out = capsys.readouterr().out
    assert "gym-id-numpy (CartPole-v1):" in out and "load_policy (a cartpole run):" in out


def test_a_call_up_a_layer_is_a_climb_a_return_is_not():
    calls = [("ppo_td.deploy.policy", "call"), ("ppo_td.envs.make", "call"), ("ppo_td.deploy.policy", "return"),
             ("ppo_td.envs.make", "call"), ("ppo_td.training.evaluation", "call")]
    numbers = env_paths.summary(calls)
    assert numbers["climbs"] == 1 and numbers["reentered"] == 1 and numbers["stops"] == 5 and numbers["calls"] == 4
    assert numbers["edges"] == 2 and numbers["shared"] == []  # make entered twice, from one module


def test_the_walk_of_a_config_enters_each_stage_once_and_no_source_but_its_own():
    """build_env's stages (make, the source table, the id read, the chosen source, the layers) are each entered
    once; the other sources are never entered (the table is read, not asked)."""
    import dataclasses

    from ppo_td.envs import build_env
    from ppo_td.envs.sources import SOURCES

    kinds = env_paths._kinds()
    for kind, source in (("gym-id", "gymnasium"), ("factory", "gymnasium"), ("torchrl-class", "torchrl")):
        config = dataclasses.replace(kinds[kind](), num_envs=1)
        build_env(config, seed=1).env.close()  # the imports
        built, walk = env_paths.trace(lambda config=config: build_env(config, seed=1), walk_only=True)
        built.env.close()
        entries = env_paths.summary(walk)["entries"]
        stages = ["make", "sources", "ids", f"sources.{source}", "layers"]
        assert {s: entries.get(f"ppo_td.envs.{s}") for s in stages} == dict.fromkeys(stages, 1), (kind, entries)
        others = {f"ppo_td.envs.sources.{s.name}" for s in SOURCES} - {f"ppo_td.envs.sources.{source}"}
        assert not others & set(entries), (kind, entries)
