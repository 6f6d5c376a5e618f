"""Numpy experiments, one module per topic (the lessons the notebooks teach from)."""
