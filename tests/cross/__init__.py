"""Tests across the package: the attack generator of issue 32, the cache state machines, the qa3 findings."""
