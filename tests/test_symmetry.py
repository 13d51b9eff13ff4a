"""Symmetry augmentation and the mirror loss (loss.mirror): the update against a hand oracle of rsl_rl's rule (the
batch doubles; mirrored states score the mirrored actions against the originals' log-probabilities; the entropy and
KL read the originals), an identity mirror changing nothing, the mirror seeing the env's units under observation
normalization, the refusals, the command line and the Python API alike."""

import csv
import dataclasses
import json

import pytest
import torch
from tensordict import TensorDict

import ppo_td
from ppo_td.cli import main
from ppo_td.config import LossConfig, ModelConfig
from ppo_td.envs import RunningObsNorm, make_env
from ppo_td.envs.mirrors import PendulumMirror, Walker2dMirror
from ppo_td.models import make_actor_critic
from ppo_td.training import make_loss, total_loss
from ppo_td.training.symmetry import Mirror

torch.set_num_threads(1)


class Identity:
    def observation(self, obs):
        return obs.clone()

    def action(self, action):
        return action.clone()


class WrongShape:
    def observation(self, obs):
        return obs[..., :2]

    def action(self, action):
        return action


@pytest.fixture(scope="module")
def parts():
    torch.manual_seed(3)
    config = ppo_td.get_preset("pendulum")
    env = make_env(dataclasses.replace(config.env, num_envs=2), seed=0)
    actor, critic = make_actor_critic(env, ModelConfig(hidden_sizes=(8,)))
    env.close()
    return config, actor, critic


def minibatch(actor, n=64):
    g = torch.Generator().manual_seed(5)
    obs = torch.randn(n, 3, generator=g)
    with torch.no_grad():
        loc, scale = actor.module[0].module(obs)
    actions = loc + scale * torch.randn(n, 1, generator=g)
    old = torch.distributions.Normal(loc + 0.3 * torch.randn(n, 1, generator=g), scale).log_prob(actions).sum(-1)
    return TensorDict({"observation": obs, "action": actions, "action_log_prob": old,
                       "advantage": torch.randn(n, 1, generator=g) * 2 + 0.5,
                       "state_value": torch.randn(n, 1, generator=g), "value_target": torch.randn(n, 1, generator=g)},
                      batch_size=[n])


def oracle(actor, critic, td, cfg: LossConfig, coeff: float):
    """rsl_rl's PPO.update with symmetry_cfg (use_data_augmentation, use_mirror_loss), written out on one minibatch,
    in ppo_td's loss terms (TorchRL's l2 value loss, ppo_td's value clip)."""
    mirror, n = PendulumMirror(), td.batch_size[0]
    adv = td["advantage"]
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)  # standardized over the original minibatch first
    obs = torch.cat([td["observation"], mirror.observation(td["observation"])])
    act = torch.cat([td["action"], mirror.action(td["action"])])
    old, adv = td["action_log_prob"].repeat(2), adv.repeat(2, 1)
    loc, scale = actor.module[0].module(obs)
    dist = torch.distributions.Normal(loc, scale)
    logp = dist.log_prob(act).sum(-1)
    ratio = (logp - old).exp().unsqueeze(-1)
    eps = cfg.clip_epsilon
    policy = -torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv).mean()
    value = critic.module(obs)
    old_v, target = td["state_value"].repeat(2, 1), td["value_target"].repeat(2, 1)
    clipped = old_v + (value - old_v).clamp(-cfg.clip_value, cfg.clip_value) if cfg.clip_value else value
    value_loss = cfg.critic_coeff * torch.max((value - target) ** 2, (clipped - target) ** 2).mean()
    entropy = dist.entropy().sum(-1)[:n].mean()  # the originals' entropy
    mirror_loss = ((loc[n:] - mirror.action(loc[:n]).detach()) ** 2).mean()
    kl = (old[:n] - logp[:n]).mean()
    return policy + value_loss - cfg.entropy_coeff * entropy + coeff * mirror_loss, kl, coeff * mirror_loss


@pytest.mark.parametrize("lean", [False, True], ids=["outputs", "lean terms"])
def test_the_update_is_rsl_rls_rule_on_the_doubled_minibatch(parts, lean):
    config, actor, critic = parts
    cfg = dataclasses.replace(config.loss, clip_value=0.2)
    loss = make_loss(actor, critic, cfg)
    loss.mirror = Mirror(PendulumMirror(), augment=True, loss_coeff=0.3)
    td = minibatch(actor)
    if lean:
        got, terms = loss.fast.terms(td)
        kl, mirror_loss = -terms.log_weight.mean(), terms.losses["loss_mirror"]
        assert terms.log_weight.shape[0] == 64  # the diagnostics read the original half
    else:
        out = loss(td)
        got, kl, mirror_loss = total_loss(out), out["kl_approx"], out["loss_mirror"]
    params = list(actor.parameters()) + list(critic.parameters())
    grads = torch.autograd.grad(got, params, allow_unused=True)
    expected, expected_kl, expected_mirror = oracle(actor, critic, td, cfg, 0.3)
    expected_grads = torch.autograd.grad(expected, params, allow_unused=True)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(kl, expected_kl, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(mirror_loss, expected_mirror, atol=1e-7, rtol=1e-5)
    assert float(mirror_loss.detach()) > 0  # an untrained policy is not symmetric: the fixture exercises the term
    for g, e in zip(grads, expected_grads, strict=True):
        if e is None:
            assert g is None or not g.any()
        else:
            torch.testing.assert_close(g, e, atol=1e-6, rtol=1e-5)


def test_an_identity_mirror_changes_nothing_and_the_mirror_loss_alone_adds_its_term(parts):
    config, actor, critic = parts
    td = minibatch(actor)
    plain = make_loss(actor, critic, config.loss)
    doubled = make_loss(actor, critic, config.loss)
    doubled.mirror = Mirror(Identity(), augment=True, loss_coeff=0.0)
    a, b = plain(td), doubled(td)
    for key in ("loss_objective", "loss_critic", "loss_entropy", "kl_approx", "clip_fraction"):
        torch.testing.assert_close(a[key], b[key], atol=1e-6, rtol=1e-6)
    alone = make_loss(actor, critic, config.loss)  # the mirror loss without the doubled batch: an extra forward
    alone.mirror = Mirror(PendulumMirror(), augment=False, loss_coeff=0.3)
    c = alone(td)
    for key in ("loss_objective", "loss_critic", "loss_entropy"):
        torch.testing.assert_close(a[key], c[key])
    torch.testing.assert_close(c["loss_mirror"], oracle(actor, critic, td, config.loss, 0.3)[2], atol=1e-7, rtol=1e-5)


def test_the_mirror_sees_the_env_units_under_normalization():
    norm = RunningObsNorm(3, clip=10.0)
    norm.observed(torch.tensor([[1.0, 2.0, 3.0], [0.0, 4.0, -1.0], [0.5, 3.0, 5.0]]))
    norm.freeze()
    raw = torch.tensor([[0.9, 2.5, 1.0], [0.2, 3.1, -0.5]])
    mirror = Mirror(PendulumMirror(), augment=True, loss_coeff=0.0, norm=norm)
    got = mirror.observation(norm.normalized(raw))
    torch.testing.assert_close(got, norm.normalized(raw * torch.tensor([1.0, -1.0, -1.0])))
    assert not torch.allclose(got, norm.normalized(raw) * torch.tensor([1.0, -1.0, -1.0]))  # the naive flip is off
    with pytest.raises(ValueError, match=r"observation\(\) returned \(2, 2\) for a batch of \(2, 3\)"):
        Mirror(WrongShape(), augment=True, loss_coeff=0.0).observation(raw)
    with pytest.raises(ValueError, match="has no observation\\(\\) method"):
        Mirror(object(), augment=True, loss_coeff=0.0)


def test_walker_mirror_swaps_the_legs_and_is_its_own_inverse():
    obs, action = torch.arange(17.0).expand(2, 17), torch.arange(6.0).expand(2, 6)
    mirror = Walker2dMirror()
    assert mirror.observation(obs)[0, 2:8].tolist() == [5, 6, 7, 2, 3, 4]
    assert mirror.observation(obs)[0, 11:].tolist() == [14, 15, 16, 11, 12, 13]
    assert torch.equal(mirror.observation(mirror.observation(obs)), obs)
    assert torch.equal(mirror.action(mirror.action(action)), action)


def small(**loss) -> ppo_td.TrainConfig:
    base = ppo_td.get_preset("pendulum")
    return dataclasses.replace(
        base, env=dataclasses.replace(base.env, num_envs=4), frames_per_batch=128, total_frames=384, eval_episodes=1,
        model=ModelConfig(hidden_sizes=(16,)),
        optim=dataclasses.replace(base.optim, num_minibatches=2, update_epochs=2),
        loss=dataclasses.replace(base.loss, **{"mirror": "ppo_td.envs.mirrors:PendulumMirror", "mirror_augment": True,
                                               **loss}))


def test_the_command_line_and_the_python_api_train_alike(tmp_path):
    args = ["train", "--preset", "pendulum", "--env.num-envs", "4", "--frames-per-batch", "128", "--total-frames",
            "384", "--eval-episodes", "1", "--optim.num-minibatches", "2", "--optim.update-epochs", "2",
            "--model.hidden-sizes", "16", "--loss.mirror", "ppo_td.envs.mirrors:PendulumMirror",
            "--loss.mirror-augment", "--loss.mirror-loss-coeff", "0.1", "--run-dir", str(tmp_path / "cli")]
    assert main(args) == 0
    config = small(mirror_loss_coeff=0.1)
    config = dataclasses.replace(config, model=dataclasses.replace(ppo_td.get_preset("pendulum").model,
                                                                   hidden_sizes=(16,)))
    ppo_td.train(config, run_dir=str(tmp_path / "api"), progress=False)
    cli, api = (json.loads((tmp_path / name / "config.json").read_text()) for name in ("cli", "api"))
    assert cli == api
    rows = [list(csv.DictReader((tmp_path / name / "metrics.csv").open())) for name in ("cli", "api")]
    learned = ("loss_policy", "loss_value", "loss_mirror", "kl_k3", "grad_norm")
    assert [[r[k] for k in learned] for r in rows[0]] == [[r[k] for k in learned] for r in rows[1]]
    assert all(float(r["loss_mirror"]) > 0 for r in rows[0])


@pytest.mark.parametrize("change, message", [
    ({"model": ModelConfig(hidden_sizes=(16,), recurrent="lstm")}, "recurrent policies are not mirrored"),
    ({"model": ModelConfig(hidden_sizes=(16,), exploration="gsde")}, "gSDE's stored noise matrices"),
    ({"model": ModelConfig(hidden_sizes=(16,), squash_actions=True), "loss": {"mirror_loss_coeff": 0.1}},
     "compares the mean actions of a Gaussian policy"),
    ({"loss": {"fast_forward": False}}, "here loss.fast_forward=False: train without loss.mirror"),
    ({"loss": {"mirror": "ppo_td.envs.mirrors:NoSuchMirror"}}, "NoSuchMirror"),
])
def test_what_cannot_be_mirrored_is_refused_naming_it(change, message):
    config = small(**change.pop("loss", {}))
    config = dataclasses.replace(config, **change)
    if config.model.recurrent != "none":
        config = dataclasses.replace(config, optim=dataclasses.replace(config.optim, sequence_length=8))
    with pytest.raises(ValueError, match=message):
        ppo_td.train(config, progress=False)


def test_a_mask_mirror_that_does_not_permute_the_actions_and_the_config_alone_are_refused():
    trading = ppo_td.get_preset("trading")
    masked = dataclasses.replace(trading, total_frames=trading.frames_per_batch, loss=dataclasses.replace(
        trading.loss, mirror="ppo_td.envs.mirrors:PendulumMirror", mirror_augment=True))
    with pytest.raises(ValueError, match=r"loss.mirror PendulumMirror fails on the env's observations \(8, 4\)"):
        ppo_td.train(masked, progress=False)  # a mirror of another task: refused on the env's shapes
    masked = dataclasses.replace(masked, loss=dataclasses.replace(masked.loss, mirror="test_symmetry:AllToZero"))
    with pytest.raises(ValueError, match=r"AllToZero.action\(\) maps the actions 0..\d+ to .*the action masks "
                                         r"are mirrored through action\(\), which must permute"):
        ppo_td.train(masked, progress=False)
    with pytest.raises(ValueError, match="loss.mirror alone changes nothing"):
        LossConfig(mirror="ppo_td.envs.mirrors:PendulumMirror")
    with pytest.raises(ValueError, match="loss.mirror.*given .* for loss.mirror_augment or loss.mirror_loss_coeff"):
        LossConfig(mirror_loss_coeff=0.5)


class AllToZero:
    """Every action mirrored to action 0: no permutation."""

    def observation(self, obs):
        return obs.clone()

    def action(self, action):
        return torch.zeros_like(action)


class CartPoleMirror:
    """CartPole reflected: every observation negated, left and right pushes swapped."""

    def observation(self, obs):
        return -obs

    def action(self, action):
        return 1 - action


def test_a_discrete_policy_keeps_the_originals_entropy_and_kl():
    """The entropy bonus and the KL read the original half: equal to the loss without the mirror images (a
    categorical's entropy differs from state to state, so averaging over the mirror images would change it)."""
    torch.manual_seed(4)
    config = ppo_td.get_preset("cleanrl")
    env = make_env(dataclasses.replace(config.env, num_envs=2), seed=0)
    actor, critic = make_actor_critic(env, ModelConfig(hidden_sizes=(8,)))
    env.close()
    with torch.no_grad():  # far from the near-uniform initial policy: entropies differ from state to state
        for p in actor.parameters():
            p.add_(torch.randn_like(p))
    g = torch.Generator().manual_seed(2)
    td = TensorDict({"observation": torch.randn(32, 4, generator=g), "action": torch.randint(0, 2, (32,), generator=g),
                     "action_log_prob": -torch.rand(32, generator=g) - 0.3,
                     "advantage": torch.randn(32, 1, generator=g), "state_value": torch.randn(32, 1, generator=g),
                     "value_target": torch.randn(32, 1, generator=g)}, batch_size=[32])
    plain, doubled = make_loss(actor, critic, config.loss), make_loss(actor, critic, config.loss)
    doubled.mirror = Mirror(CartPoleMirror(), augment=True, loss_coeff=0.0)
    a, b = plain(td), doubled(td)
    for key in ("loss_entropy", "entropy", "kl_approx", "clip_fraction"):
        torch.testing.assert_close(a[key], b[key])
    assert not torch.allclose(a["loss_objective"], b["loss_objective"])
    with pytest.raises(ValueError, match="compares the mean actions of a Gaussian policy"):
        ppo_td.train(dataclasses.replace(config, total_frames=config.frames_per_batch, loss=dataclasses.replace(
            config.loss, mirror="test_symmetry:CartPoleMirror", mirror_loss_coeff=0.1)), progress=False)


def test_agents_are_not_mirrored():
    vmas = ppo_td.get_preset("vmas-navigation")
    config = dataclasses.replace(vmas, loss=dataclasses.replace(vmas.loss, mirror="ppo_td.envs.mirrors:PendulumMirror",
                                                                mirror_augment=True))
    with pytest.raises(ValueError, match="runs in ppo_td's own one-agent loss forward .* here the agents' losses"):
        ppo_td.training.build_pipeline(config)


def test_walker2d_mirror_is_a_symmetry_of_the_simulator():
    """From a state and its mirror, the mirrored actions step to the mirrored observations (MuJoCo's Walker2d-v5,
    whose legs are alike): the mirror is the simulator's own symmetry, to float rounding."""
    gym = pytest.importorskip("gymnasium")
    pytest.importorskip("mujoco")
    import numpy as np

    mirror, env, rng = Walker2dMirror(), gym.make("Walker2d-v5"), np.random.default_rng(0)

    def steps(qpos, qvel, actions):
        env.reset(seed=0)
        env.unwrapped.set_state(qpos, qvel)
        return np.array([env.step(a)[0] for a in actions])

    env.reset(seed=3)
    for _ in range(20):  # a state in motion
        env.step(rng.uniform(-1, 1, 6))
    qpos, qvel = env.unwrapped.data.qpos.copy(), env.unwrapped.data.qvel.copy()
    swapped = [*range(3), 6, 7, 8, 3, 4, 5]  # the right leg's joints (3-5) and the left's (6-8)
    actions = rng.uniform(-1, 1, (10, 6))
    plain = steps(qpos, qvel, actions)
    mirrored = steps(qpos[swapped], qvel[swapped], [mirror.action(torch.tensor(a)).numpy() for a in actions])
    assert np.abs(mirror.observation(torch.tensor(plain)).numpy() - mirrored).max() < 1e-9
    env.close()


# --- a board game's symmetries: masked Discrete actions, k images at once

TICTACTOE = "pettingzoo.classic.tictactoe_v3:env"


def board_minibatch(actor, n=32):
    """Tic-tac-toe boards (each cell empty, the mover's or the other's), their legal moves the empty cells, a legal
    move each, and stored log-probabilities, advantages, values and targets."""
    g = torch.Generator().manual_seed(7)
    cells = torch.randint(-1, 2, (n, 9), generator=g)
    cells[:, 4] = 0  # a legal move in every row
    obs = torch.stack([cells == 1, cells == -1], -1).reshape(n, 3, 3, 2).to(torch.int8)
    mask = cells == 0
    action = torch.multinomial(mask.float(), 1, generator=g).squeeze(-1)
    return TensorDict({"observation": obs, "action_mask": mask, "action": action,
                       "action_log_prob": -torch.rand(n, generator=g) - 0.5,
                       "advantage": torch.randn(n, 1, generator=g), "state_value": torch.randn(n, 1, generator=g),
                       "value_target": torch.randn(n, 1, generator=g)}, batch_size=[n])


def board_parts():
    pytest.importorskip("pettingzoo")
    torch.manual_seed(6)
    env = make_env(ppo_td.EnvConfig(TICTACTOE, num_envs=2), seed=0)
    actor, critic = make_actor_critic(env, ModelConfig(hidden_sizes=(16,)))
    env.close()
    with torch.no_grad():  # far from the near-uniform initial policy
        for p in actor.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    return actor, critic


@pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")
@pytest.mark.parametrize("clip_value, entropy_coeff", [(None, 0.0), (0.2, 0.01)])
def test_each_board_image_scores_its_move_among_its_own_legal_moves(clip_value, entropy_coeff):
    """Augmenting with tic-tac-toe's 7 other symmetries: 8 copies of the minibatch, each image's legal moves read
    from its own board (its empty cells: the oracle never permutes a mask) and its move the image of the stored
    one; the clipped surrogate and the value loss over all 8, the advantage standardized over the originals."""
    from ppo_td.envs.mirrors import TicTacToeSymmetries

    actor, critic = board_parts()
    cfg = dataclasses.replace(ppo_td.get_preset("generic").loss, clip_value=clip_value, entropy_coeff=entropy_coeff)
    td = board_minibatch(actor)
    loss = make_loss(actor, critic, cfg)
    loss.mirror = Mirror(TicTacToeSymmetries(), augment=True, loss_coeff=0.0)
    loss.mirror.masks_of(9)
    out = loss(td)
    got = total_loss(out)
    sym, n = TicTacToeSymmetries(), td.batch_size[0]
    obs = torch.cat([td["observation"], sym.observation(td["observation"])])
    mask = (obs.reshape(8 * n, 9, 2).sum(-1) == 0)  # each image's empty cells
    action = torch.cat([td["action"], sym.action(td["action"])])
    big = TensorDict({"observation": obs, "action_mask": mask}, batch_size=[8 * n])
    logp = actor.get_dist(big).log_prob(action)
    assert torch.isfinite(logp).all()  # every image's move is legal on its own board
    adv = td["advantage"]
    adv = ((adv - adv.mean()) / (adv.std() + 1e-8)).repeat(8, 1)
    ratio = (logp - td["action_log_prob"].repeat(8)).exp().unsqueeze(-1)
    eps = cfg.clip_epsilon
    policy = -torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv).mean()
    value = critic(TensorDict({"observation": obs}, batch_size=[8 * n]))["state_value"]
    target = td["value_target"].repeat(8, 1)
    value_loss = (value - target) ** 2
    if clip_value:
        old_value = td["state_value"].repeat(8, 1)
        clipped = old_value + (value - old_value).clamp(-clip_value, clip_value)
        value_loss = torch.max(value_loss, (clipped - target) ** 2)
    entropy = actor.get_dist(big).entropy()[:n].mean()  # the originals', each among its own legal moves
    expected = policy + cfg.critic_coeff * value_loss.mean() - entropy_coeff * entropy
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    params = list(actor.parameters()) + list(critic.parameters())
    for g, e in zip(torch.autograd.grad(got, params, allow_unused=True),
                    torch.autograd.grad(expected, params, allow_unused=True), strict=True):
        if e is None:
            assert g is None or not g.any()
        else:
            torch.testing.assert_close(g, e, atol=1e-6, rtol=1e-5)
    original = make_loss(actor, critic, cfg)(td)  # the KL and the clip fraction read the originals
    for key in ("kl_approx", "clip_fraction"):
        torch.testing.assert_close(out[key], original[key])


class HalfAMirror:
    """Returns two images of the observations but one of the actions."""

    def observation(self, obs):
        return torch.cat([obs, obs])

    def action(self, action):
        return action


class NotAPermutation:
    def observation(self, obs):
        return obs

    def action(self, action):
        return action.clamp(max=3)


@pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")
def test_images_of_the_observations_and_actions_must_agree_and_a_mask_mirror_must_permute():
    actor, critic = board_parts()
    td = board_minibatch(actor)
    loss = make_loss(actor, critic, ppo_td.get_preset("generic").loss)
    loss.mirror = Mirror(HalfAMirror(), augment=True, loss_coeff=0.0)
    loss.mirror.masks_of(9)
    with pytest.raises(ValueError, match=r"returned 2 image\(s\) of the observations but 1 of the actions"):
        loss(td)
    with pytest.raises(ValueError, match=r"NotAPermutation.action\(\) maps the actions 0..8 to .*must permute"):
        Mirror(NotAPermutation(), augment=True, loss_coeff=0.0).masks_of(9)
    with pytest.raises(ValueError, match=r"returned \(5, 3\) for a batch of \(2, 3\).* k times its rows"):
        Mirror(WrongRows(), augment=True, loss_coeff=0.0).observation(torch.zeros(2, 3))


class WrongRows:
    def observation(self, obs):
        return torch.zeros(5, 3)

    def action(self, action):
        return action


@pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")
@pytest.mark.parametrize("game, mirror", [("tictactoe_v3", "TicTacToeSymmetries"),
                                          ("connect_four_v3", "ConnectFourMirror")])
def test_the_board_mirrors_are_the_games_own_symmetries(game, mirror):
    """Played in PettingZoo's game, the image of a random game's moves gives the image of each position seen (both
    seats' boards) and the same rewards: the mirrors are the games' symmetries. The 8 maps of tic-tac-toe's board
    are distinct and closed under composition (a group)."""
    pytest.importorskip("pettingzoo")
    import importlib

    import numpy as np

    from ppo_td.envs import mirrors

    make = importlib.import_module(f"pettingzoo.classic.{game}").env
    sym = getattr(mirrors, mirror)()
    images = sym.images.shape[0]
    rng = np.random.default_rng(1)
    for _ in range(20):
        plain = make()
        plain.reset(seed=0)
        moves, seen = [], []
        while not any(plain.terminations.values()):
            move = int(rng.choice(np.flatnonzero(plain.observe(plain.agent_selection)["action_mask"])))
            plain.step(move)
            moves.append(move)
            seen.append([torch.as_tensor(plain.observe(a)["observation"]) for a in plain.agents])
        for i in range(images):
            twin = make()
            twin.reset(seed=0)
            for move, boards in zip(moves, seen, strict=True):
                twin.step(int(sym.images[i, move]))
                for a, board in zip(twin.agents, boards, strict=True):
                    image = sym.observation(board.unsqueeze(0)).reshape(images, *board.shape)[i]
                    assert torch.equal(torch.as_tensor(twin.observe(a)["observation"]), image)
            assert twin.rewards == plain.rewards
    if images > 1:
        perms = {tuple(range(9))} | {tuple(p.tolist()) for p in sym.images}
        assert len(perms) == 8 and {tuple(p[q[a]] for a in range(9)) for p in perms for q in perms} == perms


@pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")
def test_a_board_mirror_runs_where_the_policy_reads_no_mask():
    """env.action_mask='none' (the refusal of other masks names it as the way out): the raw mask entry stays in the
    minibatch, the unmasked policy reads none, and the images are scored without one; the run trains."""
    from ppo_td.envs.mirrors import TicTacToeSymmetries

    pytest.importorskip("pettingzoo")
    torch.manual_seed(6)
    env = make_env(ppo_td.EnvConfig(TICTACTOE, num_envs=2, action_mask="none"), seed=0)
    actor, critic = make_actor_critic(env, ModelConfig(hidden_sizes=(16,)))
    env.close()
    td = board_minibatch(actor)
    td["action_mask"] = td["action_mask"].to(torch.int8)  # the raw entry, as the env leaves it
    cfg = ppo_td.get_preset("generic").loss
    loss = make_loss(actor, critic, cfg)
    loss.mirror = Mirror(TicTacToeSymmetries(), augment=True, loss_coeff=0.0)  # no masks_of: none to mirror
    out = loss(td)
    sym, n = TicTacToeSymmetries(), td.batch_size[0]
    big = TensorDict({"observation": torch.cat([td["observation"], sym.observation(td["observation"])])},
                     batch_size=[8 * n])
    logp = actor.get_dist(big).log_prob(torch.cat([td["action"], sym.action(td["action"])]))
    torch.testing.assert_close(out["kl_approx"], (td["action_log_prob"] - logp[:n]).mean())
    config = dataclasses.replace(
        ppo_td.get_preset("generic"), total_frames=256, frames_per_batch=128, eval_episodes=0,
        env=ppo_td.EnvConfig(TICTACTOE, num_envs=2, action_mask="none"),
        optim=dataclasses.replace(ppo_td.get_preset("generic").optim, num_minibatches=2, update_epochs=1),
        loss=dataclasses.replace(cfg, mirror="ppo_td.envs.mirrors:TicTacToeSymmetries", mirror_augment=True))
    assert len(ppo_td.train(config, progress=False).history) == 2


@pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")
@pytest.mark.parametrize("env_id, mirror, message", [
    ("pettingzoo.classic.connect_four_v3:env", "ppo_td.envs.mirrors:TicTacToeSymmetries",
     r"loss.mirror TicTacToeSymmetries fails on the env's observations \(2, 6, 7, 2\) and actions \(2,\): "
     r"TicTacToeSymmetries reads boards of 3 x 3 cells x planes; .* it is made for another game"),
    ("CartPole-v1", "test_symmetry:HalfAMirror",
     r"loss.mirror HalfAMirror returned 2 image\(s\) of the observations but 1 of the actions"),
])
def test_a_mirror_that_does_not_fit_the_env_is_refused_before_training(env_id, mirror, message):
    """The mirror is probed on the env's zero observation and action when the run is built: a board mirror on
    another game, or unequal image counts, refused then, not after the first batch is collected."""
    if env_id.startswith("pettingzoo"):
        pytest.importorskip("pettingzoo")
    base = ppo_td.get_preset("generic")
    config = dataclasses.replace(base, env=ppo_td.EnvConfig(env_id, num_envs=2), loss=dataclasses.replace(
        base.loss, mirror=mirror, mirror_augment=True))
    with pytest.raises(ValueError, match=message):
        ppo_td.training.build_pipeline(config)
