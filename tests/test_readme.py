"""The README's composition example runs as written, and its trained policy balances CartPole to the limit."""

import re
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


@pytest.mark.slow
def test_the_readme_composition_example_runs(tmp_path, monkeypatch):
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    assert "load_policy" in block and "run(pipeline)" in block
    monkeypatch.chdir(tmp_path)  # its run folder goes here
    namespace: dict = {}
    exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - the documentation's own code
    returns = namespace["result"].eval_returns  # CartPole's "solved": a mean of 475 (one episode may fall short: the
    assert sum(returns) / len(returns) >= 475, returns  # weights differ in their last bits from one CPU to another)
    assert namespace["step"] == 499 and not namespace["terminated"]  # the loaded policy held the pole 500 steps
    assert (tmp_path / "runs" / "cartpole" / "checkpoint.pt").is_file()


def test_the_readme_stays_short():
    """What, why, the two commands, the composition example, the CLI, one dated results table: guides go in docs/."""
    size = len(README.read_bytes())
    assert size <= 10_240, f"README.md is {size:,} bytes, over 10,240: move detail to docs/"
