"""A gallery of buggy hand-written PPO updates: each is diagnosed, each fixed version is clean."""

import copy

import pytest
import torch
from torch import nn

from ppo_td.doctor import DoctorError, audit, explain

torch.manual_seed(0)


class Problem:
    """A small PPO minibatch problem on plain nn.Modules."""

    def __init__(self):
        torch.manual_seed(0)
        self.actor = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
        self.critic = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
        self.opt = torch.optim.Adam([*self.actor.parameters(), *self.critic.parameters()], lr=1e-3)
        self.obs = torch.randn(64, 4)
        self.next_obs = torch.randn(64, 4)
        self.rewards = torch.randn(64)
        with torch.no_grad():
            dist = self.dist(self.obs)
            self.actions = dist.sample()
            self.old_logp = dist.log_prob(self.actions)
            self.values = self.critic(self.obs).squeeze(-1)
            self.returns = self.rewards + 0.99 * self.critic(self.next_obs).squeeze(-1)
            self.adv = self.returns - self.values

    def dist(self, obs):
        return torch.distributions.Categorical(logits=self.actor(obs))

    def audit(self):
        return audit(actor=self.actor, critic=self.critic, optimizers=[self.opt])

    def ppo_loss(self, new_logp, adv, value, returns):
        ratio = (new_logp - self.old_logp).exp()
        pg = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
        return pg + 0.5 * ((value - returns) ** 2).mean()

    def step(self, loss, **backward_kwargs):
        self.opt.zero_grad()
        loss.backward(**backward_kwargs)
        self.opt.step()

    def correct_update(self, epochs=2):
        for _ in range(epochs):
            new_logp = self.dist(self.obs).log_prob(self.actions)
            value = self.critic(self.obs).squeeze(-1)
            self.step(self.ppo_loss(new_logp, self.adv, value, self.returns))


def items(a):
    """The kinds found, in report order (most severe first)."""
    return [f.item for f in a.findings]


def finding(a, item):
    return next(f for f in a.findings if f.item == item)


def test_fixed_update_is_clean():
    p = Problem()
    with p.audit() as a:
        p.correct_update()
    assert a.ok, a.report()
    assert "no findings" in a.report()


# 1. rollout data with a graph, reused in a later loss
def test_rollout_logprobs_with_graph_reused_under_retain_graph():
    p = Problem()
    with p.audit() as a:
        old_logp = p.dist(p.obs).log_prob(p.actions)  # recorded with gradients on: the bug
        p.opt.zero_grad()
        for _ in range(2):  # two losses on the same rollout before the step
            new_logp = p.dist(p.obs).log_prob(p.actions)
            value = p.critic(p.obs).squeeze(-1)
            p.ppo_loss(new_logp, p.adv, value, p.returns)
            loss = -((new_logp - old_logp).exp() * p.adv).mean() + ((value - p.returns) ** 2).mean()
            loss.backward(retain_graph=True)
        p.opt.step()
    assert items(a) == [10, 4, 1], a.report()
    assert "test_doctor.py:77" in finding(a, 10).made  # where the log-probs were recorded with their graph
    assert "actor forward #1" in finding(a, 1).culprit and "test_doctor.py" in finding(a, 1).culprit
    # and its consequence: gradient through new - old cancels, the policy gets an all-zero gradient
    assert "all-zero gradient at every one of 1 optimizer step(s): actor.0.weight" in finding(a, 4).culprit


# 2. critic outputs in the actor loss; a value target that is not detached
def test_advantage_not_detached_puts_actor_loss_gradient_on_critic():
    p = Problem()
    with p.audit() as a:
        new_logp = p.dist(p.obs).log_prob(p.actions)
        value = p.critic(p.obs).squeeze(-1)
        adv = p.returns - value  # the bug: no .detach()
        p.step(p.ppo_loss(new_logp, adv, value, p.returns))
    assert items(a) == [2], a.report()
    assert "critic.0.weight" in a.findings[0].culprit and "Mul" in a.findings[0].culprit


def test_value_target_with_gradient():
    p = Problem()
    with p.audit() as a:
        new_logp = p.dist(p.obs).log_prob(p.actions)
        value = p.critic(p.obs).squeeze(-1)
        target = p.rewards + 0.99 * p.critic(p.next_obs).squeeze(-1)  # the bug: target not detached
        p.step(p.ppo_loss(new_logp, p.adv, value, target))
    assert items(a) == [2], a.report()
    assert "value target" in a.findings[0].title


# 3. backward through a freed graph; an optimizer step between forward and backward
def test_second_backward_names_the_backward_that_freed_the_graph():
    p = Problem()
    with pytest.raises(DoctorError, match=r"(?s)second time.*reuses graph freed by backward #1.*retain_graph=True is"):
        with p.audit() as a:
            values = p.critic(p.obs).squeeze(-1)  # critic output computed once, with graph
            for _ in range(2):
                new_logp = p.dist(p.obs).log_prob(p.actions)
                p.step(p.ppo_loss(new_logp, (p.returns - values).detach(), values, p.returns))
    # and before that backward ran: the optimizer step changed the critic after the forward it reuses
    assert items(a) == [3, 7], a.report()
    assert "critic forward #1" in finding(a, 3).culprit
    assert "critic's parameters were stepped by opt" in finding(a, 7).culprit and "values = p.critic" in (
        finding(a, 7).culprit)
    assert a.error.finding is finding(a, 3) and "loss.backward(" in a.error.where


def test_inplace_error_names_the_optimizer_step_and_parameter():
    p = Problem()
    with pytest.raises(DoctorError, match=r"(?s)inplace operation.*critic\.2\.weight \[1, 16\].*optimizer step #1"):
        with p.audit() as a:
            values = p.critic(p.obs).squeeze(-1)  # computed once, before the loop
            for _ in range(2):
                new_logp = p.dist(p.obs).log_prob(p.actions)
                loss = p.ppo_loss(new_logp, p.adv, values, p.returns)
                p.step(loss, retain_graph=True)  # "fixing" the second-backward error with retain_graph
    assert items(a) == [3, 7, 1], a.report()


def test_explain_without_audit():
    p = Problem()
    values = p.critic(p.obs).squeeze(-1)
    ((values - p.returns) ** 2).mean().backward()
    with pytest.raises(RuntimeError) as info:
        ((values - p.returns) ** 2).mean().backward()
    explanation = explain(info.value)
    assert explanation.item == 3 and "torch.no_grad()" in explanation.fix and "retain_graph" in explanation.fix
    assert explain(RuntimeError("something else")).item is None


# 4. parameters that should learn but get no gradient
def test_graph_cut_by_item_leaves_actor_without_gradient():
    p = Problem()
    with p.audit() as a:
        new_logp = torch.tensor(p.dist(p.obs).log_prob(p.actions).mean().item())  # the bug: .item()
        value = p.critic(p.obs).squeeze(-1)
        p.step(-(new_logp * p.adv.mean()) + ((value - p.returns) ** 2).mean())
    assert items(a) == [4], a.report()
    assert "actor gets no gradient" in a.findings[0].title
    assert "was cut from the graph by .item() at" in a.findings[0].culprit and "# the bug: .item()" in (
        a.findings[0].culprit)


def test_stored_log_probs_used_as_new_ones():
    p = Problem()
    with p.audit() as a:
        value = p.critic(p.obs).squeeze(-1)
        p.step(p.ppo_loss(p.old_logp, p.adv, value, p.returns))  # the bug: no recomputed log-prob
    assert items(a) == [4], a.report()


# 5. non-finite losses, exploding gradients
@pytest.mark.filterwarnings("ignore:std\\(\\)")
def test_nan_loss_from_std_of_one_element():
    p = Problem()
    with p.audit() as a:
        new_logp = p.dist(p.obs[:1]).log_prob(p.actions[:1])
        adv = (p.adv[:1] - p.adv[:1].mean()) / p.adv[:1].std()  # std of one element is NaN
        p.step(-(new_logp * adv).mean())
    assert 5 in items(a), a.report()
    assert any("non-finite" in f.title for f in a.findings)


def test_exploding_gradient_norm():
    p = Problem()
    with p.audit() as a:
        new_logp = p.dist(p.obs).log_prob(p.actions)
        value = p.critic(p.obs).squeeze(-1)
        p.step(1e6 * p.ppo_loss(new_logp, p.adv, value, p.returns))
    assert items(a) == [5], a.report()
    assert "exploding" in a.findings[0].title


# 6. PPO ratio not 1 on the first minibatch
def test_old_log_probs_from_a_stale_copy():
    p = Problem()
    stale = copy.deepcopy(p.actor)
    with torch.no_grad():
        for param in stale.parameters():
            param.add_(0.3 * torch.randn_like(param))
        p.old_logp = torch.distributions.Categorical(logits=stale(p.obs)).log_prob(p.actions)
    with p.audit() as a:
        new_logp = p.dist(p.obs).log_prob(p.actions)
        a.check_ratio(new_logp - p.old_logp)
        value = p.critic(p.obs).squeeze(-1)
        p.step(p.ppo_loss(new_logp, p.adv, value, p.returns))
    assert items(a) == [6], a.report()


def test_ratio_of_the_current_policy_is_clean():
    p = Problem()
    with p.audit() as a:
        a.check_ratio(p.dist(p.obs).log_prob(p.actions) - p.old_logp)
        p.correct_update()
    assert a.ok, a.report()


def test_audit_patches_nothing_and_stops_watching_after_the_block():
    """The audit sees backward calls through torch's public function-override mode: torch is left as it is,
    and a backward after the block is not audited."""
    functions = (torch.autograd.backward, torch.Tensor.backward)
    p = Problem()
    with p.audit() as a:
        assert (torch.autograd.backward, torch.Tensor.backward) == functions
        p.correct_update(epochs=1)
        torch.autograd.backward(p.critic(p.obs).sum())  # the functional form is seen too
    assert a.report().startswith("ppo_td doctor: 2 backward call(s)")
    p.correct_update(epochs=1)
    assert a.report().startswith("ppo_td doctor: 2 backward call(s)")


def test_modules_and_optimizers_in_containers_are_named_by_the_user():
    """A policy, two value networks in a list, three optimizers in a dict: every finding names them."""
    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    v_net, q_net = nn.Linear(4, 1), nn.Linear(5, 1)
    opts = {"pi": torch.optim.SGD(policy.parameters(), lr=0.1), "v": torch.optim.SGD(v_net.parameters(), lr=0.1),
            "q": torch.optim.SGD(q_net.parameters(), lr=0.1)}
    obs, actions = torch.randn(32, 4), torch.randint(2, (32,))
    with audit(policy=policy, critics=[v_net, q_net], optimizers=opts) as a:
        v, q = v_net(obs).squeeze(-1), q_net(torch.cat([obs, actions[:, None].float()], 1)).squeeze(-1)
        logp = torch.distributions.Categorical(logits=policy(obs)).log_prob(actions)
        loss = -(logp * (q - v)).mean() + (v - 1).pow(2).mean() + (q - 1).pow(2).mean()  # q - v not detached
        for opt in opts.values():
            opt.zero_grad()
        loss.backward()
        for opt in opts.values():
            opt.step()
    assert a.role("critics[0]") == a.role("critics[1]") == "value" and a.role("policy") == "policy"
    assert items(a) == [2], a.report()
    assert "reaches critics[0], critics[1]" in a.findings[0].culprit and "MulBackward" in a.findings[0].culprit
    assert "optimizers: pi, v, q" in a.report()


def test_the_same_finding_at_one_line_is_reported_once_with_its_count_and_steps():
    p = Problem()
    with p.audit() as a:
        for _ in range(5):
            new_logp = p.dist(p.obs).log_prob(p.actions)
            value = p.critic(p.obs).squeeze(-1)
            p.step(p.ppo_loss(new_logp, p.returns - value, value, p.returns))  # advantage not detached
    assert len(a.findings) == 1 and a.findings[0].count == 5 and a.findings[0].steps == [1, 2, 3, 4, 5]
    assert "(seen 5x, during step(s) 1-5)" in a.report()
    assert a.to_dict()["findings"][0]["count"] == 5


def test_audit_refuses_what_is_not_a_module_or_an_optimizer():
    with pytest.raises(TypeError, match=r"critics\[1\] is a str, not a torch.nn.Module"):
        with audit(critics=[nn.Linear(2, 1), "v_net"]):
            pass
    with pytest.raises(TypeError, match="not a torch.optim.Optimizer"):
        with audit(actor=nn.Linear(2, 1), optimizers=[nn.Linear(2, 1)]):
            pass


def test_an_error_in_the_users_code_keeps_the_findings_and_names_the_line():
    p = Problem()
    with pytest.raises(ZeroDivisionError):
        with p.audit() as a:
            value = p.critic(p.obs).squeeze(-1)
            p.step(p.ppo_loss(p.dist(p.obs).log_prob(p.actions), p.returns - value, value, p.returns))
            print(1 / 0)  # the user's bug, unrelated to autograd
    assert items(a) == [2] and a.error.type == "ZeroDivisionError" and "1 / 0" in a.error.where
    report = a.report()
    assert report.index("[2]") < report.index("the code stopped with ZeroDivisionError")


def test_optimizers_alone_lead_to_the_modules_they_train():
    """No module passed: the modules are found as the code calls them, by the names the code gives them."""
    p = Problem()
    with audit(optimizers=[p.opt]) as a:
        value = p.critic(p.obs).squeeze(-1)
        p.step(p.ppo_loss(p.dist(p.obs).log_prob(p.actions), p.returns - value, value, p.returns))
    assert {n: a.role(n) for n in a.modules} == {"critic": "value", "actor": "policy"}
    assert items(a) == [2] and "reaches critic" in a.findings[0].culprit


def test_an_all_zero_gradient_is_found_whatever_the_order_of_zero_grad():
    """zero_grad() after step() (gradients are None when the audit ends) hides nothing."""
    p = Problem()
    with p.audit() as a:
        for _ in range(2):
            value = p.critic(p.obs).squeeze(-1)
            new_logp = p.dist(p.obs).log_prob(p.actions)
            loss = -(new_logp - new_logp.detach()).sum() * 0 + ((value - p.returns) ** 2).mean()
            loss.backward()
            p.opt.step()
            p.opt.zero_grad()
    assert items(a) == [4], a.report()
    assert "all-zero gradient at every one of 2 optimizer step(s): actor.0.weight" in a.findings[0].culprit
