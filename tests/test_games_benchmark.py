"""The games benchmark's arithmetic (benchmarks/returns/games.py): the Wilson interval against its formula's known
values, the table pooling the seeds' games, a run's config."""

import pytest

from benchmarks.returns import games


def test_the_wilson_interval():
    low, high = games.wilson(8, 10)  # the textbook case: 0.490 to 0.943
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert games.wilson(10, 10)[1] == pytest.approx(1.0) and games.wilson(0, 10)[0] == pytest.approx(0.0, abs=1e-12)


def test_the_table_pools_every_seeds_games():
    runs = [{"variant": "self", "seed": s, "seconds": 10.0 * s,
             "against": {"random": {"win": w, "draw": 0, "loss": 10 - w}}} for s, w in ((1, 9), (2, 7))]
    rows = games.table(runs, ["self"])
    assert rows[2] == "| self | random | 1, 2 | 9/0/1, 7/0/3 | 0.800 [0.584, 0.919] | 15 |"
    assert len(rows) == 3  # no heuristic row where no run played it


def test_a_self_play_run_plays_against_its_snapshots_and_the_random_anchor():
    config = games.config_of({"game": "connect_four_v3", "variant": "self", "seed": 2, "frames": 4096, "envs": 8})
    assert (config.env.opponent, config.env.anchors, config.seed) == ("self", ("random",), 2)
    assert config.env.env_id == "pettingzoo.classic.connect_four_v3:env" and config.frames_per_batch == 2048


def test_the_mixed_variant_and_settings_change_the_config_and_the_runs_identity():
    spec = {"game": "tictactoe_v3", "variant": "mixed", "seed": 1, "frames": 4096, "envs": 8, "games": 10}
    config = games.config_of(spec)
    assert (config.env.opponent, config.env.anchors) == ("random", ("tictactoe-heuristic",))
    changed = {**spec, "settings": "generic+loss.entropy_coeff=0.01+env.latest_ratio=0.8"}
    assert games.config_of(changed).loss.entropy_coeff == 0.01
    assert games.config_of(changed).env.latest_ratio == 0.8  # the settings' env fields kept under the variant's
    assert games._key(changed) != games._key(spec) and games.run_name(changed) != games.run_name(spec)
    assert games.run_name(spec) == "tictactoe_v3-mixed-seed1-4096"  # the generic preset's names as before
    with pytest.raises(ValueError, match="rock_paper_scissors_v2 has no win-or-block heuristic"):
        games.variant_fields("mixed", "rock_paper_scissors_v2")


def test_head_to_head_counts_each_side_of_every_pair_once():
    players = [{"name": "g-self-seed1-100@100", "frames": 100}, {"name": "g-random-seed1-100@100", "frames": 100},
               {"name": "g-self-seed1-100@50", "frames": 50}, {"name": "random", "frames": None}]
    pairs = [{"a": "g-self-seed1-100@100", "b": "g-random-seed1-100@100", "wins": 7, "draws": 1, "losses": 2},
             {"a": "g-self-seed1-100@100", "b": "random", "wins": 9, "draws": 0, "losses": 1},
             {"a": "g-self-seed1-100@50", "b": "g-random-seed1-100@100", "wins": 5, "draws": 0, "losses": 5}]
    variant_of = {"g-self-seed1-100": "self", "g-random-seed1-100": "random"}
    rows = games.head_to_head({"players": players, "pairs": pairs}, variant_of, ["random"])
    body = rows[4:]
    assert body == ["| random | self | 2 / 7 | 0.222 [0.063, 0.547] |",  # the earlier checkpoint's games not counted
                    "| self | random | 7 / 2 | 0.778 [0.453, 0.937] |",
                    "| self | the random anchor | 9 / 1 | 0.900 [0.596, 0.982] |"]


def test_the_team_selfplay_benchmark_trains_each_variant_and_plays_them_all_in_one_arena(tmp_path, monkeypatch):
    """benchmarks/returns/team_selfplay.py: the self variant's config (team self-play, its turn and snapshots, its
    own budget with --self-frames), finished runs skipped on a rerun, and one team arena over every run."""
    from benchmarks.returns import team_selfplay
    from ppo_td.deploy.team_arena import Match, TeamArenaResult

    config = team_selfplay.config_of({"variant": "self", "seed": 2, "frames": 12000, "team_change": 6000,
                                      "snapshot_frames": 3000})
    assert (config.env.opponent, config.env.team_change, config.env.snapshot_frames) == ("self", 6000, 3000)
    assert team_selfplay.config_of({"variant": "simultaneous", "seed": 2, "frames": 12000, "team_change": 6000,
                                    "snapshot_frames": 3000}).env.opponent == "random"
    trained, arenas = [], []

    def one_run(spec, run_dir):
        trained.append(spec)
        return {**spec, "seconds": 1.0, "run_dir": str(run_dir), "last_tenth": {"adversary": 1.0, "agent": -1.0}}

    def team_arena(runs, episodes, seed):
        arenas.append(runs)
        matches = [Match((a, b), {"adversary": [float(a)], "agent": [-float(b)]}) for a in range(len(runs))
                   for b in range(len(runs))]
        return TeamArenaResult([r.rsplit("/", 1)[1] for r in runs], ["adversary", "agent"], matches,
                               len(matches), episodes)

    monkeypatch.setattr(team_selfplay, "one_run", one_run)
    monkeypatch.setattr("ppo_td.deploy.team_arena.team_arena", team_arena)
    argv = ["--seeds", "1", "--frames", "12000", "--self-frames", "18000", "--store", str(tmp_path)]
    assert team_selfplay.main(argv) == 0
    assert [(s["variant"], s["frames"]) for s in trained] == [("simultaneous", 12000), ("self", 18000)]
    assert team_selfplay.main(argv) == 0 and len(trained) == 2  # a rerun trains nothing
    assert len(arenas) == 2 and len(arenas[0]) == 2
    table = (tmp_path / "team_selfplay_12000_self18000.md").read_text()
    assert "| adversary | self |" in table and (tmp_path / "arena_12000_self18000.json").is_file()


def test_the_result_store_keeps_each_run_and_reads_them_keyed(tmp_path, monkeypatch):
    """benchmarks/common/store.py, which the games, team self-play and robot-parts benchmarks share: nothing where no
    store is, each run appended as it ends, read by key (the last of equal keys); robot_parts.runs_of trains only
    what is missing."""
    from benchmarks.common.store import append_run, stored_runs
    from benchmarks.returns import robot_parts

    store = tmp_path / "store"
    assert stored_runs(store, lambda r: r["seed"]) == {}
    append_run(store, {"seed": 1, "score": 1.0})
    append_run(store, {"seed": 2, "score": 2.0})
    append_run(store, {"seed": 1, "score": 3.0})
    assert stored_runs(store, lambda r: r["seed"]) == {1: {"seed": 1, "score": 3.0}, 2: {"seed": 2, "score": 2.0}}
    trained = []

    def one_run(spec):
        trained.append(spec)
        return {**spec, "last100": 1.0, "eval": 2.0, "seconds": 0.5}

    monkeypatch.setattr(robot_parts, "one_run", one_run)
    specs = [{"variant": "asymmetric", "seed": s, "noise": 0.5, "frames": 100} for s in (1, 2)]
    first = robot_parts.runs_of(tmp_path / "parts", specs, say=lambda line: None)
    again = robot_parts.runs_of(tmp_path / "parts", specs, say=lambda line: None)
    assert len(trained) == 2 and first == again


@pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")
def test_a_tictactoe_run_records_its_policys_exact_outcomes_and_the_table_shows_them():
    pytest.importorskip("pettingzoo")
    run = games.one_run({"game": "tictactoe_v3", "variant": "random", "seed": 1, "frames": 2048, "envs": 4,
                         "games": 4})
    exact = run["exact"]  # (the wiring: the rates are tictactoe_outcomes', tested in tests/test_games_exact.py)
    assert set(exact) == {"random", "tictactoe-perfect"}
    for rates in exact.values():
        assert sum(rates[k] for k in ("win", "draw", "loss")) == pytest.approx(1.0) and rates["blunders"] >= 0
    row = [r for r in games.table([run], ["random"]) if r.startswith("| random | 1 | ")]
    assert row == [f"| random | 1 | {exact['random']['loss'] * 1e4:.1f} | {exact['random']['blunders']} | "
                   f"{exact['tictactoe-perfect']['loss'] * 1e4:.1f} | {exact['tictactoe-perfect']['blunders']} |"]
    assert run["episodes_count"] >= len(run["episodes_every_20th"]) > 0 and "episodes" not in run  # kept thin
