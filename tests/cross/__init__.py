"""Tests across the package: the attack generator, the cache state machines, the findings of the last attack round."""
