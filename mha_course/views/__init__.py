"""Matplotlib views, one module per topic."""
