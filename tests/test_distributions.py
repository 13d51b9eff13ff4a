"""ClosedForm against torch's distribution objects: the same samples, RNG use, log-probs, entropies and
gradients, bit for bit; broken parameters refused as torch's argument validation refuses them."""

import pytest
import torch
from torch import distributions as D
from torchrl.modules import IndependentNormal, MaskedCategorical, TanhNormal
from torchrl.modules.distributions.utils import sample_and_log_prob

from ppo_td.models import ClosedForm
from ppo_td.models.gsde import GSDENormal


def _params(kind, requires_grad=False):
    g = torch.Generator().manual_seed(3)
    if kind in ("normal", "tanh_normal", "gsde"):
        loc = 5 * torch.randn(7, 3, generator=g)  # (saturates the tanh: its safe clamp matters)
        log_std = torch.randn(3, generator=g)
        leaves = [loc.requires_grad_(requires_grad), log_std.requires_grad_(requires_grad)]
        if kind == "gsde":  # a state-dependent scale and the noise the env copy's matrix gives
            scale = log_std.exp() * (1 + torch.rand(7, 3, generator=g))
            return leaves, (loc, scale, 0.3 * torch.randn(7, 3, generator=g))
        return leaves, (loc, log_std.exp().expand_as(loc))
    logits = 3 * torch.randn(7, 5, generator=g)
    logits[0, 1] = -float("inf")  # an impossible action stays impossible
    return [logits.requires_grad_(requires_grad)], (logits,)


def _torch_dist(kind, params):
    if kind == "normal":
        return IndependentNormal(*params)
    if kind == "gsde":
        return GSDENormal(*params)
    if kind == "tanh_normal":
        return TanhNormal(*params, low=torch.tensor([-1.0] * 3), high=torch.tensor([1.0] * 3))
    return D.Categorical(logits=params[0])


def _closed(kind, params):
    dist = _torch_dist(kind, params)
    kwargs = {"low": dist.low, "high": dist.high} if kind == "tanh_normal" else {}
    return ClosedForm.of(type(dist), kwargs, masked=False)


@pytest.mark.parametrize("kind", ["normal", "tanh_normal", "categorical", "gsde"])
def test_sampling_matches_torch_bit_for_bit(kind):
    _, params = _params(kind)
    closed = _closed(kind, params)
    torch.manual_seed(0)
    action, log_prob = closed.sample(params)
    rng_after = torch.get_rng_state()
    torch.manual_seed(0)
    dist = _torch_dist(kind, params)
    expected_action, expected_log_prob = sample_and_log_prob(dist, torch.Size(), reparameterize=dist.has_rsample)
    assert torch.equal(action, expected_action) and torch.equal(log_prob, expected_log_prob)
    assert torch.equal(rng_after, torch.get_rng_state())  # the same draws: later samples stay the same too
    if kind == "categorical":
        assert not (action[0] == 1).item()


@pytest.mark.parametrize("kind", ["normal", "categorical", "gsde"])
def test_scoring_matches_torch_with_gradients(kind):
    leaves, params = _params(kind, requires_grad=True)
    action = _torch_dist(kind, tuple(p.detach() for p in params)).sample()
    closed = ClosedForm.of(type(_torch_dist(kind, params)), {}, masked=False)
    log_prob, entropy = closed.log_prob_entropy(params, action)
    ours = torch.autograd.grad((log_prob * 0.7).sum() + entropy.sum(), leaves)
    leaves, params = _params(kind, requires_grad=True)
    dist = _torch_dist(kind, params)
    expected_log_prob, expected_entropy = dist.log_prob(action), dist.entropy()
    theirs = torch.autograd.grad((expected_log_prob * 0.7).sum() + expected_entropy.sum(), leaves)
    assert torch.equal(log_prob, expected_log_prob) and torch.equal(entropy, expected_entropy)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_tanh_normal_scoring_and_sampled_entropy_match_torch_with_gradients():
    """ClipPPOLoss's two uses of a tanh-normal: the stored action's log-prob, then one reparameterized draw's
    log-prob (its entropy estimate); the same values, gradients and random stream."""
    leaves, params = _params("tanh_normal", requires_grad=True)
    action = _torch_dist("tanh_normal", tuple(p.detach() for p in params)).sample()
    closed = _closed("tanh_normal", params)
    torch.manual_seed(1)
    log_prob, entropy = closed.log_prob_entropy(params, action)
    mc = closed.sample_log_prob(params, (1,))
    ours = torch.autograd.grad((log_prob * 0.7).sum() - mc.mean(), leaves)
    rng_after = torch.get_rng_state()
    leaves, params = _params("tanh_normal", requires_grad=True)
    dist = _torch_dist("tanh_normal", params)
    torch.manual_seed(1)
    expected_log_prob = dist.log_prob(action)
    _, expected_mc = sample_and_log_prob(dist, (1,), reparameterize=True)
    theirs = torch.autograd.grad((expected_log_prob * 0.7).sum() - expected_mc.mean(), leaves)
    assert entropy is None and torch.equal(log_prob, expected_log_prob) and torch.equal(mc, expected_mc)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    assert torch.equal(rng_after, torch.get_rng_state())


def _masked_params(requires_grad=False, shape=(7, 5)):
    g = torch.Generator().manual_seed(5)
    logits = (3 * torch.randn(*shape, generator=g)).requires_grad_(requires_grad)
    mask = torch.rand(*shape, generator=g) > 0.4
    mask[..., 2] = True  # every row has a legal action
    return logits, mask


@pytest.mark.parametrize("shape", [(7, 5), (3, 4, 5)])
def test_masked_categorical_sampling_matches_torchrl_bit_for_bit(shape):
    """The fast collector's masked sampling: the same actions, log-probs and random draws as TorchRL's
    MaskedCategorical (never an illegal action)."""
    logits, mask = _masked_params(shape=shape)
    closed = ClosedForm.of(MaskedCategorical, {}, masked=True)
    torch.manual_seed(0)
    action, log_prob = closed.sample((logits,), mask)
    rng_after = torch.get_rng_state()
    torch.manual_seed(0)
    expected_action, expected_log_prob = sample_and_log_prob(MaskedCategorical(logits=logits, mask=mask), torch.Size())
    assert torch.equal(action, expected_action) and torch.equal(log_prob, expected_log_prob)
    assert torch.equal(rng_after, torch.get_rng_state())
    assert mask.gather(-1, action.unsqueeze(-1)).all()
    with pytest.raises(ValueError, match="needs the legal-action mask"):
        closed.sample((logits,))
    broken = logits.clone()  # NaN at an illegal action: masked away, as MaskedCategorical masks it
    broken[~mask] = float("nan")
    torch.manual_seed(0)
    assert torch.equal(closed.sample((broken,), mask)[0], action)
    broken[mask] = float("nan")  # at a legal one: refused
    with pytest.raises(ValueError, match="NaN"):
        closed.sample((broken,), mask)


@pytest.mark.parametrize("shape", [(7, 5), (3, 4, 5)])
def test_masked_categorical_scoring_matches_torchrl_with_gradients(shape):
    """The fast loss's masked scoring: the stored action's log-prob and the entropy over the legal actions, with
    their gradients, as MaskedCategorical computes them; an illegal action's log-prob is -inf as there."""
    logits, mask = _masked_params(requires_grad=True, shape=shape)
    action = MaskedCategorical(logits=logits.detach(), mask=mask).sample()
    closed = ClosedForm.of(MaskedCategorical, {}, masked=True)
    log_prob, entropy = closed.log_prob_entropy((logits,), action, mask)
    ours = torch.autograd.grad((log_prob * 0.7).sum() + entropy.sum(), [logits])
    dist = MaskedCategorical(logits=logits, mask=mask)
    expected_log_prob, expected_entropy = dist.log_prob(action), dist.entropy()
    theirs = torch.autograd.grad((expected_log_prob * 0.7).sum() + expected_entropy.sum(), [logits])
    assert torch.equal(log_prob, expected_log_prob) and torch.equal(entropy, expected_entropy)
    assert torch.equal(ours[0], theirs[0])
    illegal = (~mask).nonzero()[0]
    wrong = action.clone()
    wrong[tuple(illegal[:-1])] = illegal[-1]
    assert closed.log_prob_entropy((logits,), wrong, mask)[0][tuple(illegal[:-1])] == -float("inf")
    assert torch.equal(closed.log_prob_entropy((logits,), wrong, mask)[0], dist.log_prob(wrong))


def test_which_distributions_have_a_closed_form():
    assert ClosedForm.of(IndependentNormal, {}, masked=False).kind == "normal"
    assert ClosedForm.of(GSDENormal, {}, masked=False).kind == "gsde"
    assert ClosedForm.of(D.Categorical, {}, masked=False).kind == "categorical"
    assert ClosedForm.of(MaskedCategorical, {}, masked=True).kind == "masked_categorical"
    assert ClosedForm.of(MaskedCategorical, {"neg_inf": -1e9}, masked=True) is None
    assert ClosedForm.of(D.Categorical, {}, masked=True) is None
    unit = {"low": torch.tensor([-1.0, -1.0]), "high": torch.tensor([1.0, 1.0])}
    assert ClosedForm.of(TanhNormal, unit, masked=False).kind == "tanh_normal"
    assert ClosedForm.of(TanhNormal, {"low": -2.0, "high": 2.0}, masked=False) is None  # an affine map after it
    assert ClosedForm.of(TanhNormal, {**unit, "tanh_loc": True}, masked=False) is None
    assert ClosedForm.of(IndependentNormal, {"tanh_loc": True}, masked=False) is None  # kwargs change the math


@pytest.mark.parametrize(("kind", "broken"), [("normal", "loc nan"), ("normal", "scale zero"),
                                              ("normal", "scale inf"), ("categorical", "logits nan"),
                                              ("gsde", "loc nan"), ("gsde", "scale zero")])
def test_broken_parameters_are_refused_when_sampling(kind, broken):
    _, params = _params(kind)
    params = [p.clone() for p in params]
    if broken == "loc nan":
        params[0][2, 1] = float("nan")
    elif broken == "scale zero":
        params[1][4, 0] = 0.0
    elif broken == "scale inf":
        params[1][4, 0] = float("inf")
    else:
        params[0][1, 2] = float("nan")
    closed = ClosedForm.of({"normal": IndependentNormal, "gsde": GSDENormal}.get(kind, D.Categorical), {}, masked=False)
    with pytest.raises(ValueError, match="NaN"):
        closed.sample(tuple(params))
