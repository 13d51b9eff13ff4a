"""`ppo-td doctor SCRIPT.py` on scripts written the ways users write them (beyond the gallery): no false
alarm on correct code, each mistake found, and a useful report whatever the script does."""

import json
import textwrap

import pytest

from ppo_td.cli import main

PREAMBLE = """
import torch
from torch import nn
from torch.distributions import Bernoulli, Categorical
torch.manual_seed(0)
obs, acts, ret = torch.randn(64, 4), torch.randint(2, (64,)), torch.randn(64)
"""

CASES = {
    # correct code: no finding
    "parts of one module, correct": (set(), """
        class ActorCritic(nn.Module):
            def __init__(self):
                super().__init__()
                self.trunk, self.pi, self.v = nn.Linear(4, 16), nn.Linear(16, 2), nn.Linear(16, 1)
            def forward(self, x):
                h = self.trunk(x).tanh()
                return self.v(h).squeeze(-1), self.pi(h)  # value first
        net = ActorCritic()
        opt = torch.optim.Adam(net.parameters())
        for _ in range(4):
            value, logits = net(obs)
            d = Categorical(logits=logits)
            adv = (ret - value).detach()
            loss = -(d.log_prob(acts) * adv).mean() + 0.5 * (value - ret).pow(2).mean() - 0.01 * d.entropy().mean()
            opt.zero_grad(); loss.backward(); opt.step()
        """),
    "one-logit Bernoulli policy, correct": (set(), """
        net, critic = nn.Linear(4, 1), nn.Linear(4, 1)
        opt = torch.optim.Adam([*net.parameters(), *critic.parameters()])
        for _ in range(4):
            logp = Bernoulli(logits=net(obs).squeeze(-1)).log_prob(acts.float())
            value = critic(obs).squeeze(-1)
            loss = -(logp * (ret - value).detach()).mean() + (value - ret).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
        """),
    "two losses on one forward, then one step": (set(), """
        encoder, actor, critic = nn.Linear(4, 16), nn.Linear(16, 2), nn.Linear(16, 1)
        opt = torch.optim.Adam([*encoder.parameters(), *actor.parameters(), *critic.parameters()])
        for _ in range(4):
            h = encoder(obs).tanh()
            policy_loss = -(Categorical(logits=actor(h)).log_prob(acts) * ret).mean()
            value_loss = (critic(h).squeeze(-1) - ret).pow(2).mean()
            opt.zero_grad(); policy_loss.backward(retain_graph=True); value_loss.backward(); opt.step()
        """),
    # mistakes
    "advantage not detached inside one module": ({2}, """
        class ActorCritic(nn.Module):
            def __init__(self):
                super().__init__()
                self.actor, self.critic = nn.Linear(4, 2), nn.Linear(4, 1)
            def forward(self, x):
                return Categorical(logits=self.actor(x)), self.critic(x).squeeze(-1)
        model = ActorCritic()
        opt = torch.optim.Adam(model.parameters())
        for _ in range(4):
            dist, value = model(obs)
            loss = -(dist.log_prob(acts) * (ret - value)).mean() + (value - ret).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
        """),
    "two mistakes on one line": ({2}, """
        pi, v = nn.Linear(4, 2), nn.Linear(4, 1)
        opt = torch.optim.Adam([*pi.parameters(), *v.parameters()])
        for _ in range(3):
            value = v(obs).squeeze(-1)
            target = ret + 0.9 * v(obs.flip(0)).squeeze(-1)
            loss = -(Categorical(logits=pi(obs)).log_prob(acts) * (target - value)).mean() + \\
                torch.nn.functional.smooth_l1_loss(value, target)
            opt.zero_grad(); loss.backward(); opt.step()
        """),
    "optimizer created in every update": ({8}, """
        policy = nn.Linear(4, 2)
        def update():
            opt = torch.optim.Adam(policy.parameters())
            for _ in range(2):
                loss = -(Categorical(logits=policy(obs)).log_prob(acts) * ret).mean()
                opt.zero_grad(); loss.backward(); opt.step()
        for _ in range(3):
            update()
        """),
}


def _run(tmp_path, capsys, body, *args):
    script = tmp_path / "user_script.py"
    script.write_text(PREAMBLE + textwrap.dedent(body))
    code = main(["doctor", str(script), "--json", *args])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("case", list(CASES))
def test_user_scripts(tmp_path, capsys, case):
    kinds, body = CASES[case]
    code, report = _run(tmp_path, capsys, body)
    assert {f["item"] for f in report["findings"]} == kinds, report
    assert code == (1 if kinds else 0) and report["error"] is None and report["audited"]


def test_two_mistakes_on_one_line_are_two_findings(tmp_path, capsys):
    _, report = _run(tmp_path, capsys, CASES["two mistakes on one line"][1])
    titles = sorted(f["title"] for f in report["findings"])
    assert len(titles) == 2 and "value target" in titles[1] and "advantage is not detached" in titles[0]


def test_parts_of_one_module_are_audited_apart(tmp_path, capsys):
    _, report = _run(tmp_path, capsys, CASES["advantage not detached inside one module"][1])
    assert report["modules"] == {"model.actor": "policy", "model.critic": "value"}


@pytest.mark.parametrize(("body", "ended", "where"), [
    ("for i in range(3)\n    pass\n", "raised SyntaxError", "user_script.py:7"),
    ("import argparse\nargparse.ArgumentParser().parse_args(['--nope'])\n", "exited with 2", "user_script.py:8"),
])
def test_a_script_that_fails_at_once_is_reported_with_its_line(tmp_path, capsys, body, ended, where):
    code, report = _run(tmp_path, capsys, body)
    assert code == 1 and ended in report["ended"] and where in report["error"]["where"], report


def test_nothing_audited_is_not_a_clean_bill(tmp_path, capsys):
    code, report = _run(tmp_path, capsys, "print('hello')\n")
    assert code == 1 and not report["audited"]


def test_a_bare_except_does_not_keep_the_script_running_unnoticed(tmp_path, capsys):
    body = """
        policy = nn.Linear(4, 2)
        opt = torch.optim.Adam(policy.parameters())
        for _ in range(50):
            try:
                loss = -(Categorical(logits=policy(obs)).log_prob(acts) * ret).mean()
                opt.zero_grad(); loss.backward(); opt.step()
            except:  # noqa: E722
                pass
        """
    code, report = _run(tmp_path, capsys, body, "--steps", "3")
    assert code == 0 and report["ended"] == "stopped after 3 optimizer steps (--steps)", report


def test_json_stays_parseable_when_the_script_writes_to_file_descriptor_1(tmp_path, capfd):
    """capfd sees file descriptor 1 itself: the script's raw write must have gone to stderr."""
    code, report = _run(tmp_path, capfd, "import os\nos.write(1, b'raw bytes on fd 1\\n')\n")
    assert report["ended"] == "the script ended"


# the two cases: a value computed with gradients through the user's own method, in the update loop; and
# log-probs stored with their graph during the rollout. The finding names the user's call, then the inner lines.
CHAIN_VALUES = """
    class Agent(nn.Module):
        def __init__(self):
            super().__init__()
            self.pi, self.vf = nn.Linear(4, 2), nn.Linear(4, 1)
        def value(self, x):
            return self.vf(x).squeeze(-1)
        def dist(self, x):
            return Categorical(logits=self.pi(x))
    def compute_gae(values):
        return ret - values
    agent = Agent()
    opt = torch.optim.Adam(agent.parameters(), lr=1e-3)
    for _ in range(3):
        values = agent.value(obs)
        adv = compute_gae(values)
        for _ in range(2):
            logp = agent.dist(obs).log_prob(acts)
            loss = -(logp * adv).mean() + (agent.value(obs) - ret).pow(2).mean()
            opt.zero_grad(); loss.backward(retain_graph=True); opt.step()
    """
CHAIN_LOG_PROBS = """
    policy, critic = nn.Linear(4, 2), nn.Linear(4, 1)
    opt = torch.optim.Adam([*policy.parameters(), *critic.parameters()], lr=1e-3)
    stored = []
    for t in range(8):
        dist = Categorical(logits=policy(obs[t]))
        stored.append(dist.log_prob(acts[t]))
    old = torch.stack(stored)
    new = Categorical(logits=policy(obs[:8])).log_prob(acts[:8])
    loss = -((new - old).exp() * ret[:8]).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    """


def _at(tmp_path, body: str, text: str) -> str:
    """``file:line (text)`` of the line holding ``text`` in the script :func:`_run` writes."""
    lines = (PREAMBLE + textwrap.dedent(body)).splitlines()
    number = next(i for i, line in enumerate(lines, 1) if text in line)
    return f"{tmp_path / 'user_script.py'}:{number} ({lines[number - 1].strip()})"


def test_a_finding_names_the_users_call_then_the_lines_inside_it(tmp_path, capsys):
    _, report = _run(tmp_path, capsys, CHAIN_VALUES)
    call, inner = _at(tmp_path, CHAIN_VALUES, "values = agent.value"), _at(tmp_path, CHAIN_VALUES, "self.vf(x)")
    found = [f for f in report["findings"] if f["made"].startswith(call)]
    assert found, json.dumps(report["findings"], indent=1)
    for f in found:  # the outer call first, then the line inside the module; the fix names the outer line
        assert f["made"] == f"{call} -> {inner}", f["made"]
        assert f["change"] == call.split(" ")[0]
    main(["doctor", str(tmp_path / "user_script.py")])
    assert f"fix: at {call.split(' ')[0]}: " in capsys.readouterr().out


def test_stored_log_probs_are_named_at_their_log_prob_call(tmp_path, capsys):
    _, report = _run(tmp_path, capsys, CHAIN_LOG_PROBS)
    (carried,) = [f for f in report["findings"] if f["item"] == 10]
    assert carried["made"] == _at(tmp_path, CHAIN_LOG_PROBS, "stored.append"), carried


def _notebook(path, cells: list[str]) -> None:
    """A Jupyter notebook (nbformat 4) of markdown and code cells: a cell starting with '# md' is markdown."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(c[4:]) if c.startswith("# md") else nbformat.v4.new_code_cell(c)
                for c in cells]
    nbformat.write(nb, str(path))


NOTEBOOK = ["# md A first PPO, in a notebook",
            "%matplotlib inline\n" + PREAMBLE.strip() + '\nmsg = ("%d steps"\n       % 3)',
            "%%writefile helper_for_nb.py\ndef coef():\n    return 0.5\n",
            "# md The update", "%%time\npolicy, critic = nn.Linear(4, 2), nn.Linear(4, 1)\n"
            "opt = torch.optim.Adam([*policy.parameters(), *critic.parameters()], lr=1e-3)",
            "!pip list\nfrom helper_for_nb import coef\nfor _ in range(3):\n"
            "    dist = Categorical(logits=policy(obs))\n"
            "    value = critic(obs).squeeze(-1)\n    adv = (ret - value).detach()\n"
            "    loss = -(dist.log_prob(acts) * adv).mean() + (value - ret).pow(2).mean()"
            " + 0.01 * dist.entropy().mean()\n"
            "    opt.zero_grad(); loss.backward(); opt.step()\n",
            "display(loss)\nimport matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()"]


def test_a_notebook_runs_its_cells_in_order_and_names_cell_and_line(tmp_path, capsys):
    path = tmp_path / "first_ppo.ipynb"
    _notebook(path, NOTEBOOK)
    code = main(["doctor", str(path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["ended"] == "the notebook ended" and report["error"] is None, report
    (entropy,) = [f for f in report["findings"] if f["item"] == 12]  # the entropy bonus added: minimized
    # the fourth code cell (In [4]), its seventh line: the shell escape's line keeps its number
    assert entropy["made"].startswith(f"{path}, cell 4, line 7 (loss = -(dist.log_prob(acts)"), entropy
    assert entropy["where"] == f"{path}, cell 4, line 8 (opt.zero_grad(); loss.backward(); opt.step())", entropy
    assert (tmp_path / "helper_for_nb.py").read_text() == "def coef():\n    return 0.5\n"  # %%writefile wrote it
    main(["doctor", str(path)])
    assert f"fix: at {path}, cell 4, line 7: " in capsys.readouterr().out


def test_a_notebook_error_names_its_cell_and_the_run_keeps_the_findings_before_it(tmp_path, capsys):
    path = tmp_path / "broken.ipynb"
    _notebook(path, [PREAMBLE, "net = nn.Linear(4, 2)\nopt = torch.optim.Adam(net.parameters())\n"
                     "loss = net(obs).sum()\nloss.backward(); opt.step()\nloss.backward()"])
    code = main(["doctor", str(path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["ended"] == "the script raised RuntimeError", report
    assert report["error"]["where"].startswith(f"{path}, cell 2, line 5 (loss.backward())"), report["error"]


def test_a_file_that_is_no_notebook_is_refused_by_name(tmp_path, capsys):
    path = tmp_path / "not_a.ipynb"
    path.write_text("print('hello')\n")
    assert main(["doctor", str(path)]) == 2
    assert f"{path} is not a Jupyter notebook" in capsys.readouterr().err
