"""The contract breaks the attack generator still finds, one line each: the open work of each callable's owner.

``test_attack_surface`` marks each callable here as an expected failure, *strict*: a callable that
stops breaking fails the run until its line is removed, and a callable that is not listed fails
as soon as it breaks. So this file can only shrink. Each line is the first break the default
profile found (regenerate: ``pytest tests/cross/test_attack_surface.py --junitxml=...``; the
reproducer of one is ``pytest "tests/cross/test_attack_surface.py::test_attack[<name>]"``).
"""

BREAKS: dict[str, str] = {
}

# Callables whose valid call the table cannot yet build (no Spec for a parameter, or a call that raises).
UNBUILT: dict[str, str] = {
}
