"""Classic PPO mistakes as textual edits of the correct host scripts in this folder.

``MISTAKES[host][code]`` is a list of ``(old, new)`` edits: each ``old`` occurs exactly once in the host file, and the
edits apply in order with ``str.replace(old, new, 1)``. ``LINES[host][code]`` is the 1-based line, in the mutated
text, where the wrong tensor is made (or the wrong call stands); for b2 and b3, the forward of the network that made
the old log-probs (with a graph; of another policy), which the doctor sees, where the ``log_prob`` call is a line
later; for e2, the ``log_prob`` call whose per-dimension result is left unsummed. Codes:

a1 no zero_grad                      a2 zero_grad on another module/optimizer   a3 zero_grad between backward and step
b1 old log-probs = current policy    b2 old log-probs carry a graph              b3 old log-probs from another policy
c1 ratio detached                    d1 entropy minimised                        d2 surrogate ascended
d3 min/max swapped in the surrogate  e1 value [B, 1] against returns [B]         e2 multi-dim log-probs not summed
f1 parameters no optimizer holds     g1 dropout in train mode while acting       h1 advantages normalised over 1 sample
i1 a loss term dropped from the sum  i2 value estimation run with gradients     i3 the collector acts deterministically
i4 a replay buffer keeps stale batches across iterations (storage larger than one batch, never emptied)
i5 old log-probs overwritten by a fresh forward of the actor after the advantages (the anchor moves every epoch)

Notes on the variants chosen so that every mutated script runs to completion:
* b2 recomputes the old log-probs with grad per minibatch, right before the ratio (a graph shared by all minibatches
  would make the second ``backward()`` raise "backward through the graph a second time").
* e2 drops the sum over action dims where the log-probs are made; where the advantages are [B] the edit also gives them
  a trailing 1 (and widens the preallocated buffer) -- a bare [B, act_dim] against [B] would raise a broadcast error.
* h1 uses minibatches of one sample and ``std(correction=0)``; the default (unbiased) std of one element is NaN,
  which makes the next ``Categorical``/``Normal`` raise on NaN parameters.
* The TorchRL hosts (``torchrl_tutorial.py``, ``torchrl_sota.py``) act inside the ``Collector``, which runs the policy
  once without gradient when it is constructed (then once per step of each batch, at the ``for`` over the collector
  or ``next(collector_iter)``): the line of g1 and i3 is the collector's construction. The tutorial keeps its modules
  in eval mode (as TorchRL's tutorial does), so its g1 also drops ``policy_module.eval()``. i4 in the sota host also
  widens the loss log (one row per minibatch of the larger storage). i5 recomputes ``action_log_prob`` from the stored
  action (the action itself is kept). i2 is where value estimation with gradients matters in TorchRL: ``GAE`` with
  its value network holds the network out (``differentiable=True``, even without ``torch.no_grad()``, leaves the
  advantages without a graph), so i2 computes the values itself with gradients and runs ``GAE(value_network=None,
  differentiable=True)`` on them; its line is the first value forward. In the sota host i1's line is where the
  trained loss is summed without the critic term (``total_loss = actor_loss`` makes no tensor).
"""
from pathlib import Path

HERE = Path(__file__).resolve().parent

# mistake code -> the kind of finding it must produce (ppo_td.doctor.findings.KINDS), and its name in the table
KIND = {"a1": 9, "a2": 9, "a3": 9, "b1": 10, "b2": 10, "b3": 6, "c1": 11, "d1": 12, "d2": 12, "d3": 12, "e1": 13,
        "e2": 13, "f1": 14, "g1": 15, "h1": 16, "i1": 17, "i2": 2, "i3": 18, "i4": 6, "i5": 10}
NAMES = {"a1": "no zero_grad", "a2": "zero_grad on another module", "a3": "zero_grad between backward and step",
         "b1": "old log-probs = current policy", "b2": "old log-probs carry a graph",
         "b3": "old log-probs from another policy", "c1": "ratio detached", "d1": "entropy minimized",
         "d2": "surrogate ascended", "d3": "min/max swapped", "e1": "value [B,1] vs returns [B]",
         "e2": "multi-dim log-probs not summed", "f1": "critic in no optimizer", "g1": "dropout while acting",
         "h1": "advantages normalized over 1 sample", "i1": "a loss term dropped", "i2": "GAE on values with grad",
         "i3": "collector acts deterministically", "i4": "buffer keeps stale batches",
         "i5": "old log-probs recomputed after GAE"}

_A = " " * 16  # update-loop indentation of the CleanRL hosts (inside ``if __name__ == "__main__":``)
_CLEANRL = {
    "a1": [(f"{_A}optimizer.zero_grad()\n", "")],
    "a2": [("optimizer.zero_grad()", "agent.critic.zero_grad()")],
    "a3": [(f"optimizer.zero_grad()\n{_A}loss.backward()\n", f"loss.backward()\n{_A}optimizer.zero_grad()\n")],
    "b1": [("logratio = newlogprob - b_logprobs[mb_inds]", "logratio = newlogprob - newlogprob.detach()")],
    "b3": [("import random\n", "import copy\nimport random\n"),
           ("    agent = Agent(envs)\n", "    agent = Agent(envs)\n    behaviour = copy.deepcopy(agent)\n"),
           ("= agent.get_action_and_value(next_obs)", "= behaviour.get_action_and_value(next_obs)")],
    "c1": [("ratio = logratio.exp()", "ratio = logratio.exp().detach()")],
    "d1": [("loss = pg_loss - ent_coef * entropy_loss", "loss = pg_loss + ent_coef * entropy_loss")],
    "d2": [("loss = pg_loss - ent_coef * entropy_loss", "loss = -pg_loss - ent_coef * entropy_loss")],
    "d3": [("pg_loss = torch.max(pg_loss1, pg_loss2)", "pg_loss = torch.min(pg_loss1, pg_loss2)")],
    "e1": [(f"{_A}newvalue = newvalue.view(-1)\n", "")],
    "h1": [("minibatch_size = batch_size // num_minibatches", "minibatch_size = 1"),
           ("(mb_advantages.std() + 1e-8)", "(mb_advantages.std(correction=0) + 1e-8)")],
}

_B = " " * 12  # update-loop indentation of the other hosts
MISTAKES = {
    "cleanrl_discrete.py": {
        **_CLEANRL,
        "b2": [(f"{_A}logratio = newlogprob - b_logprobs[mb_inds]\n",
                f"{_A}mb_logprobs = agent.get_action_and_value(b_obs[mb_inds], b_actions.long()[mb_inds])[1]\n"
                f"{_A}logratio = newlogprob - mb_logprobs\n")],
        "f1": [("torch.optim.Adam(agent.parameters(),", "torch.optim.Adam(agent.actor.parameters(),")],
        "g1": [("self.actor = nn.Sequential(layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),",
                "self.actor = nn.Sequential(layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(), nn.Dropout(0.2),")],
    },
    "cleanrl_continuous.py": {
        **_CLEANRL,
        "b2": [(f"{_A}logratio = newlogprob - b_logprobs[mb_inds]\n",
                f"{_A}mb_logprobs = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])[1]\n"
                f"{_A}logratio = newlogprob - mb_logprobs\n")],
        "e2": [("logprob = probs.log_prob(action).sum(1)", "logprob = probs.log_prob(action)"),
               ("logprobs = torch.zeros((num_steps, num_envs))",
                "logprobs = torch.zeros((num_steps, num_envs) + envs.single_action_space.shape)"),
               ("b_logprobs = logprobs.reshape(-1)",
                "b_logprobs = logprobs.reshape((-1,) + envs.single_action_space.shape)"),
               ("mb_advantages = b_advantages[mb_inds]", "mb_advantages = b_advantages[mb_inds].unsqueeze(1)")],
        "f1": [("torch.optim.Adam(agent.parameters(),",
                "torch.optim.Adam([*agent.actor_mean.parameters(), agent.actor_logstd],")],
        "g1": [("self.actor_mean = nn.Sequential(layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),",
                "self.actor_mean = nn.Sequential(layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(), nn.Dropout(0.2),")],
    },
    "sb3_style.py": {
        "a1": [(f"{_B}actor_optim.zero_grad()\n", "")],
        "a2": [("actor_optim.zero_grad()", "critic_optim.zero_grad()")],
        "a3": [(f"actor_optim.zero_grad()\n{_B}(policy_loss + ent_coef * entropy_loss).backward()\n",
                f"(policy_loss + ent_coef * entropy_loss).backward()\n{_B}actor_optim.zero_grad()\n")],
        "b1": [("ratio = torch.exp(log_prob - old_log_prob)", "ratio = torch.exp(log_prob - log_prob.detach())")],
        "b2": [("old_log_prob = torch.as_tensor(buffer.log_probs[idx])",
                "old_log_prob = Categorical(logits=actor(obs_b)).log_prob(actions)")],
        "b3": [("import gymnasium as gym\n", "import copy\n\nimport gymnasium as gym\n"),
               ("critic = Critic(obs_dim)\n", "critic = Critic(obs_dim)\nbehaviour = copy.deepcopy(actor)\n"),
               ("dist = Categorical(logits=actor(obs_t))", "dist = Categorical(logits=behaviour(obs_t))")],
        "c1": [("ratio = torch.exp(log_prob - old_log_prob)", "ratio = torch.exp(log_prob - old_log_prob).detach()")],
        "d1": [("entropy_loss = -dist.entropy().mean()", "entropy_loss = dist.entropy().mean()")],
        "d2": [("policy_loss = -torch.min(", "policy_loss = torch.min(")],
        "d3": [("policy_loss = -torch.min(", "policy_loss = -torch.max(")],
        "e1": [("F.mse_loss(critic(obs_b).squeeze(-1), returns)", "F.mse_loss(critic(obs_b), returns)")],
        "f1": [("critic_optim = torch.optim.Adam(critic.parameters()",
                "critic_optim = torch.optim.Adam(actor.parameters()")],
        "g1": [("nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, n_actions)",
                "nn.Linear(obs_dim, 64), nn.Tanh(), nn.Dropout(0.2), nn.Linear(64, n_actions)")],
        "h1": [("n_iterations, n_steps, n_epochs, batch_size = 2, 128, 2, 32",
                "n_iterations, n_steps, n_epochs, batch_size = 2, 128, 2, 1"),
               ("(adv.std() + 1e-8)", "(adv.std(correction=0) + 1e-8)")],
    },
    "shared_trunk.py": {
        "a1": [(f"{_B}optimizer.zero_grad()\n", "")],
        "a2": [("optimizer.zero_grad()", "net.v.zero_grad()")],
        "a3": [(f"optimizer.zero_grad()\n{_B}loss.backward()\n", f"loss.backward()\n{_B}optimizer.zero_grad()\n")],
        "b1": [("ratio = torch.exp(logprob - b_logp[mb])", "ratio = torch.exp(logprob - logprob.detach())")],
        "b2": [(f"{_B}ratio = torch.exp(logprob - b_logp[mb])\n",
                f"{_B}old_logprob = Categorical(logits=net(b_obs[mb])[0]).log_prob(b_act[mb]).sum(-1)\n"
                f"{_B}ratio = torch.exp(logprob - old_logprob)\n")],
        "b3": [("import numpy as np\n", "import copy\n\nimport numpy as np\n"),
               ("net = Net()\n", "net = Net()\nbehaviour = copy.deepcopy(net)\n"),
               ("logits, value = net(obs_t)", "logits, value = behaviour(obs_t)")],
        "c1": [("ratio = torch.exp(logprob - b_logp[mb])", "ratio = torch.exp(logprob - b_logp[mb]).detach()")],
        "d1": [("loss = pg_loss - ent_coef * entropy", "loss = pg_loss + ent_coef * entropy")],
        "d2": [("pg_loss = -torch.min(surr1, surr2)", "pg_loss = torch.min(surr1, surr2)")],
        "d3": [("pg_loss = -torch.min(surr1, surr2)", "pg_loss = -torch.max(surr1, surr2)")],
        "e2": [("logprob = dist.log_prob(action).sum(-1)", "logprob = dist.log_prob(action)"),
               ("logprob = dist.log_prob(b_act[mb]).sum(-1)", "logprob = dist.log_prob(b_act[mb])"),
               ("b_adv, b_ret = advantages.reshape(-1), returns.reshape(-1)",
                "b_adv, b_ret = advantages.reshape(-1, 1), returns.reshape(-1)")],
        "f1": [("torch.optim.Adam(net.parameters(), lr=lr)",
                "torch.optim.Adam([*net.trunk.parameters(), *net.pi.parameters()], lr=lr)")],
        "g1": [("nn.Sequential(nn.Linear(3, 64), nn.Tanh(),",
                "nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Dropout(0.2),")],
    },
    "recurrent.py": {
        "a1": [(f"{_B}optimizer.zero_grad()\n", "")],
        "a2": [("optimizer.zero_grad()", "agent.critic.zero_grad()")],
        "a3": [(f"optimizer.zero_grad()\n{_B}loss.backward()\n", f"loss.backward()\n{_B}optimizer.zero_grad()\n")],
        "b1": [("logratio = newlogprob - logp_buf[mb].reshape(-1)", "logratio = newlogprob - newlogprob.detach()")],
        "b2": [(f"{_B}logratio = newlogprob - logp_buf[mb].reshape(-1)\n",
                f"{_B}old_logits = agent(obs_buf[mb], torch.zeros(1, len(mb), hidden))[0]\n"
                f"{_B}old_logprob = Categorical(logits=old_logits).log_prob(act_buf[mb])\n"
                f"{_B}logratio = newlogprob - old_logprob.reshape(-1)\n")],
        "b3": [("import numpy as np\n", "import copy\n\nimport numpy as np\n"),
               ("agent = Agent()\n", "agent = Agent()\nbehaviour = copy.deepcopy(agent)\n"),
               ("logits, value, h = agent(obs_buf[:, t:t + 1], h)",
                "logits, value, h = behaviour(obs_buf[:, t:t + 1], h)")],
        "c1": [("ratio = logratio.exp()", "ratio = logratio.exp().detach()")],
        "d1": [("loss = pg_loss - ent_coef", "loss = pg_loss + ent_coef")],
        "d2": [("pg_loss = -torch.min(", "pg_loss = torch.min(")],
        "d3": [("pg_loss = -torch.min(", "pg_loss = -torch.max(")],
        "e1": [("newvalue = newvalue.reshape(-1)", "newvalue = newvalue.flatten(0, 1)")],
        "f1": [("torch.optim.Adam(agent.parameters(), lr=lr)",
                "torch.optim.Adam([*agent.gru.parameters(), *agent.actor.parameters()], lr=lr)")],
        "g1": [("nn.Sequential(nn.Linear(hidden, 32), nn.Tanh(),",
                "nn.Sequential(nn.Linear(hidden, 32), nn.Tanh(), nn.Dropout(0.2),")],
    },
    "agent_group.py": {
        "a1": [(f"{_B}optimizer.zero_grad()\n", "")],
        "a2": [("optimizer.zero_grad()", "critic.zero_grad()")],
        "a3": [(f"optimizer.zero_grad()\n{_B}loss.backward()\n", f"loss.backward()\n{_B}optimizer.zero_grad()\n")],
        "b1": [("ratio = torch.exp(newlogprob - b_logp[mb])", "ratio = torch.exp(newlogprob - newlogprob.detach())")],
        "b2": [(f"{_B}ratio = torch.exp(newlogprob - b_logp[mb])\n",
                f"{_B}old_dist = Categorical(logits=actor(b_obs[mb]).unflatten(-1, (n_sub, n_choices)))\n"
                f"{_B}old_logprob = old_dist.log_prob(b_act[mb]).sum(-1, keepdim=True)\n"
                f"{_B}ratio = torch.exp(newlogprob - old_logprob)\n")],
        "b3": [("import numpy as np\n", "import copy\n\nimport numpy as np\n"),
               ("obs = env.obs\n", "behaviour = copy.deepcopy(actor)\nobs = env.obs\n"),
               ("dist = Categorical(logits=actor(obs_t)", "dist = Categorical(logits=behaviour(obs_t)")],
        "c1": [("ratio = torch.exp(newlogprob - b_logp[mb])", "ratio = torch.exp(newlogprob - b_logp[mb]).detach()")],
        "d1": [("loss = pg_loss - ent_coef * entropy", "loss = pg_loss + ent_coef * entropy")],
        "d2": [("pg_loss = -torch.min(surr1, surr2)", "pg_loss = torch.min(surr1, surr2)")],
        "d3": [("pg_loss = -torch.min(surr1, surr2)", "pg_loss = -torch.max(surr1, surr2)")],
        "e2": [("logprob = dist.log_prob(action).sum(-1, keepdim=True)", "logprob = dist.log_prob(action)"),
               ("newlogprob = dist.log_prob(b_act[mb]).sum(-1, keepdim=True)",
                "newlogprob = dist.log_prob(b_act[mb])")],
        "f1": [("torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=lr)",
                "torch.optim.Adam(actor.parameters(), lr=lr)")],
        "g1": [("actor = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(),",
                "actor = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Dropout(0.2),")],
    },
}

_T = " " * 12  # update-loop indentation of torchrl_tutorial.py
_TLOG = ('tensordict_data["action_log_prob"] = '
         'policy_module.get_dist(tensordict_data).log_prob(tensordict_data["action"])')
MISTAKES["torchrl_tutorial.py"] = {
    "a1": [(f"{_T}optim.zero_grad()\n", "")],
    "a2": [("optim.zero_grad()", "value_module.zero_grad()")],
    "a3": [(f"{_T}optim.step()\n{_T}optim.zero_grad()\n", f"{_T}optim.step()\n"),
           (f"{_T}loss_value.backward()\n", f"{_T}loss_value.backward()\n{_T}optim.zero_grad()\n")],
    "d1": [('+ loss_vals["loss_entropy"]', '- loss_vals["loss_entropy"]')],
    "d2": [('loss_value = loss_vals["loss_objective"]', 'loss_value = -loss_vals["loss_objective"]')],
    "f1": [("torch.optim.Adam(loss_module.parameters(), lr)", "torch.optim.Adam(policy_module.parameters(), lr)")],
    "g1": [("nn.LazyLinear(2 * env.action_spec.shape[-1]),",
            "nn.Dropout(0.2), nn.LazyLinear(2 * env.action_spec.shape[-1]),"),
           ("policy_module.eval()\n", "")],
    "i1": [(' + loss_vals["loss_critic"]', "")],
    "i2": [("value_network=value_module, average_gae=True)",
            "value_network=None, average_gae=True, differentiable=True)"),
           ("        advantage_module(tensordict_data)\n",
            '        value_module(tensordict_data)\n        value_module(tensordict_data["next"])\n'
            "        advantage_module(tensordict_data)\n")],
    "i3": [("from torchrl.envs.libs.gym import GymEnv\n",
            "from torchrl.envs.libs.gym import GymEnv\nfrom torchrl.envs.utils import ExplorationType\n"),
           ("split_trajs=False)", "split_trajs=False, exploration_type=ExplorationType.DETERMINISTIC)")],
    "i4": [("LazyTensorStorage(max_size=frames_per_batch)", "LazyTensorStorage(max_size=4 * frames_per_batch)")],
    "i5": [("        advantage_module(tensordict_data)\n",
            f"        advantage_module(tensordict_data)\n        with torch.no_grad():\n{_T}{_TLOG}\n")],
}

_S = " " * 8  # update() indentation of torchrl_sota.py
MISTAKES["torchrl_sota.py"] = {
    "a1": [(f"{_S}optim.zero_grad(set_to_none=True)\n", "")],
    "a2": [("optim.zero_grad(set_to_none=True)", "critic.zero_grad(set_to_none=True)")],
    "a3": [(f"{_S}optim.zero_grad(set_to_none=True)\n", ""),
           (f"{_S}total_loss.backward()\n", f"{_S}total_loss.backward()\n{_S}optim.zero_grad(set_to_none=True)\n")],
    "d1": [('actor_loss = loss["loss_objective"] + loss["loss_entropy"]',
            'actor_loss = loss["loss_objective"] - loss["loss_entropy"]')],
    "d2": [('actor_loss = loss["loss_objective"]', 'actor_loss = -loss["loss_objective"]')],
    "f1": [('    critic_optim = torch.optim.Adam(critic.parameters(), lr=cfg["lr"], eps=1e-5)\n', ""),
           ("group_optimizers(actor_optim, critic_optim)", "group_optimizers(actor_optim)"),
           ("del actor_optim, critic_optim", "del actor_optim")],
    "g1": [("out_features=num_outputs,\n                     num_cells=[64, 64], device=device)",
            "out_features=num_outputs,\n                     num_cells=[64, 64], dropout=0.2, device=device)")],
    "i1": [("total_loss = critic_loss + actor_loss", "total_loss = actor_loss")],
    "i2": [("value_network=critic, average_gae=False,", "value_network=None, average_gae=False, differentiable=True,"),
           ("            with torch.no_grad():\n                data = adv_module(data)\n",
            '            critic(data)\n            critic(data["next"])\n            data = adv_module(data)\n')],
    "i3": [("max_frames_per_traj=-1)",
            "max_frames_per_traj=-1,\n                          exploration_type=ExplorationType.DETERMINISTIC)")],
    "i4": [('LazyTensorStorage(cfg["frames_per_batch"], device=device)',
            'LazyTensorStorage(2 * cfg["frames_per_batch"], device=device)'),
           ('TensorDict(batch_size=[cfg["ppo_epochs"], num_mini_batches])',
            'TensorDict(batch_size=[cfg["ppo_epochs"], 2 * num_mini_batches])')],
    "i5": [(f"{_S}        data = adv_module(data)\n",
            f"{_S}        data = adv_module(data)\n"
            f'{_S}        data["action_log_prob"] = actor.get_dist(data).log_prob(data["action"])\n')],
}

LINES = {
    "cleanrl_discrete.py": dict(
        a1=114, a2=115, a3=115, b1=101, b2=101, b3=71, c1=102, d1=113,
        d2=113, d3=109, e1=110, f1=52, g1=69, h1=106),
    "cleanrl_continuous.py": dict(
        a1=134, a2=135, a3=135, b1=121, b2=121, b3=91, c1=122, d1=133,
        d2=133, d3=129, e1=130, e2=60, f1=72, g1=89, h1=126),
    "sb3_style.py": dict(
        a1=93, a2=94, a3=94, b1=90, b2=83, b3=71, c1=90, d1=92,
        d2=91, d3=91, e1=98, f1=59, g1=68, h1=86),
    "shared_trunk.py": dict(
        a1=92, a2=93, a3=93, b1=85, b2=85, b3=54, c1=85, d1=91,
        d2=88, d3=88, e2=84, f1=44, g1=51),
    "recurrent.py": dict(
        a1=92, a2=93, a3=93, b1=84, b2=84, b3=64, c1=85, d1=91,
        d2=88, d3=88, e1=90, f1=52, g1=61),
    "agent_group.py": dict(
        a1=84, a2=85, a3=85, b1=75, b2=75, b3=50, c1=75, d1=83,
        d2=80, d3=80, e2=74, f1=40, g1=47),
    "torchrl_tutorial.py": dict(
        a1=80, a2=80, a3=81, d1=79, d2=79, f1=70, g1=55, i1=79, i2=74, i3=57, i4=58, i5=76),
    "torchrl_sota.py": dict(
        a1=138, a2=139, a3=139, d1=137, d2=137, f1=118, g1=98, i1=137, i2=153, i3=98, i4=102, i5=155),
}


def mutate(host_path, code):
    """Return ``(text, line)``: the host script at ``host_path`` with mistake ``code`` injected, and its line."""
    host_path = Path(host_path)
    if not host_path.is_absolute() and not host_path.exists():
        host_path = HERE / host_path
    text = host_path.read_text()
    for old, new in MISTAKES[host_path.name][code]:
        count = text.count(old)
        if count != 1:
            raise ValueError(f"{host_path.name}/{code}: {old!r} occurs {count} times, not once")
        text = text.replace(old, new, 1)
    return text, LINES[host_path.name][code]
