"""The quick and mujoco suites' throughput table: ppo_td beside SB3 (and skrl where installed), pairwise per seed, and
the same split the way SB3 counts it (ppo_td's advantage estimation, which SB3 runs in its collection, moved there)."""

from benchmarks.speed import suites


def test_the_throughput_lines_pair_by_seed_and_count_the_advantages_as_sb3_does(tmp_path, monkeypatch):
    seconds = {"ppo_td": dict(collect_seconds=1.0, update_seconds=2.0, advantage_seconds=0.5),
               "sb3": dict(collect_seconds=3.0, update_seconds=1.5)}

    def worker(spec):  # the seed scales every time alike: each seed's ratios are the same
        return {"frames": 1000, "peak_rss_mb": 100.0, "train_seconds": 3.0 * spec["seed"],
                **{k: v * spec["seed"] for k, v in seconds[spec["library"]].items()}}

    monkeypatch.setattr(suites, "run_worker", worker)
    monkeypatch.setattr(suites, "_peers", lambda preset: ("ppo_td", "sb3"))
    lines = suites.throughput([1, 2], tmp_path, "cleanrl", 1000, "CartPole")
    assert "ppo_td / SB3, pairwise per seed: total 1.00 (1.00-1.00), collection 3.00 (3.00-3.00), update 0.75 " \
           "(0.75-0.75)" in "\n".join(lines)
    assert ("counted in its collection, as SB3 counts its own: collection 2.00 (2.00-2.00), update without the "
            "advantage estimation 1.00 (1.00-1.00).") in "\n".join(lines)
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 4
