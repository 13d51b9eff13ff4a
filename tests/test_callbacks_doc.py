"""docs/callbacks.md's two examples run as written: each ends its run complete through its callback."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).parent.parent / "docs" / "callbacks.md"


def _examples():
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_page_has_its_two_examples():
    assert len(_examples()) == 2


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1], ids=["own-value-and-stop", "no-improvement"])
def test_each_example_runs_as_written(index, capsys):
    namespace: dict = {}
    exec(compile(_examples()[index], str(DOC), "exec"), namespace)  # noqa: S102 - the documentation's own code
    result = namespace["result"]
    assert result.ended_early and not result.stopped and result.eval_returns  # stopped by the callback, as done
    if index == 0:
        assert result.history[-1]["long_share"] == 1.0
    else:
        assert result.history[-1]["evaluations_without_improvement"] == 3
        assert namespace["best_policy"] is not None and "best evaluation" in capsys.readouterr().out
