"""What the checker tests of 06-09 assert about a verdict: passed, named as a catalogued mistake, or looked at closer."""
import numpy as np


def run(capsys, checker, fn):
    """(result, printed text) of ``checker(fn)``."""
    ok = checker(fn)
    return ok, capsys.readouterr().out


def named(capsys, checker, fn, name):
    """``fn`` is refused and named as the catalogued mistake ``name``."""
    with np.errstate(all="ignore"):
        ok, out = run(capsys, checker, fn)
    assert ok is False and f"Looks like: {name}" in out, out


def closer(capsys, checker, fn, says):
    """``fn`` is refused, matches no catalogued mistake, and the closer look says ``says``."""
    ok, out = run(capsys, checker, fn)
    assert ok is False and "Looks like" not in out and "A closer look:" in out and says in out, out
