"""ClosedForm against torch's distribution objects: the same samples, RNG use, log-probs, entropies and
gradients, bit for bit; broken parameters refused as torch's argument validation refuses them."""

import pytest
import torch
from torch import distributions as D
from torchrl.modules import IndependentNormal, MaskedCategorical, TanhNormal
from torchrl.modules.distributions.utils import sample_and_log_prob

from ppo_td.models import ClosedForm


def _params(kind, requires_grad=False):
    g = torch.Generator().manual_seed(3)
    if kind == "normal":
        loc = 5 * torch.randn(7, 3, generator=g)
        log_std = torch.randn(3, generator=g)
        leaves = [loc.requires_grad_(requires_grad), log_std.requires_grad_(requires_grad)]
        return leaves, (loc, log_std.exp().expand_as(loc))
    logits = 3 * torch.randn(7, 5, generator=g)
    logits[0, 1] = -float("inf")  # an impossible action stays impossible
    return [logits.requires_grad_(requires_grad)], (logits,)


def _torch_dist(kind, params):
    if kind == "normal":
        return IndependentNormal(*params)
    return D.Categorical(logits=params[0])


@pytest.mark.parametrize("kind", ["normal", "categorical"])
def test_sampling_matches_torch_bit_for_bit(kind):
    _, params = _params(kind)
    closed = ClosedForm.of(type(_torch_dist(kind, params)), {}, masked=False)
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


@pytest.mark.parametrize("kind", ["normal", "categorical"])
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


def test_only_the_two_plain_distributions_have_a_closed_form():
    assert ClosedForm.of(IndependentNormal, {}, masked=False).kind == "normal"
    assert ClosedForm.of(D.Categorical, {}, masked=False).kind == "categorical"
    assert ClosedForm.of(MaskedCategorical, {}, masked=True) is None
    assert ClosedForm.of(D.Categorical, {}, masked=True) is None
    assert ClosedForm.of(TanhNormal, {"low": -1.0, "high": 1.0}, masked=False) is None
    assert ClosedForm.of(IndependentNormal, {"tanh_loc": True}, masked=False) is None  # kwargs change the math


@pytest.mark.parametrize(("kind", "broken"), [("normal", "loc nan"), ("normal", "scale zero"),
                                              ("normal", "scale inf"), ("categorical", "logits nan")])
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
    closed = ClosedForm.of(IndependentNormal if kind == "normal" else D.Categorical, {}, masked=False)
    with pytest.raises(ValueError, match="NaN"):
        closed.sample(tuple(params))
