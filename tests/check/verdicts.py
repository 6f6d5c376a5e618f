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


def catalogue(*exercises):
    """{name: exercise} and the (name, index) pair of every catalogued mistake, for ``parametrize``."""
    by_name = {e.name: e for e in exercises}
    return by_name, [(n, i) for n, e in by_name.items() for i in range(len(e.mistakes))]


def named_as_itself(capsys, exercise, i, check=None):
    """Catalogued mistake ``i`` of ``exercise`` is recognised as exactly itself, refused by ``check``
    (the checker a learner calls; by default ``exercise.check``) and named with its fix."""
    mistake = exercise.mistakes[i]
    assert [m.name for m in exercise.recognise(mistake.fn)] == [mistake.name]
    ok = (check or exercise.check)(mistake.fn)
    out = capsys.readouterr().out
    assert ok is False and f"Looks like: {mistake.name}. Fix: {mistake.fix}" in out, out


def says(capsys, checker, fn, said):
    """``fn`` is refused and named: the feedback says \"Looks like: <said>\"."""
    with np.errstate(all="ignore"):
        ok = checker(fn)
    out = capsys.readouterr().out
    assert ok is False and f"Looks like: {said}" in out, out
