"""ipywidgets controls over pure, tested functions: sliders for the sizes a lesson is about.

``controls`` (``live_view``, ``option_live_view``, ``SizeControls``: h only takes divisors of d_model),
``gqa`` (09: h and h_kv), ``quiz`` (11: the self-quiz). Every live view has a static twin in ``views``.
"""
from .controls import LiveView, OptionControls, SizeControls, live_view, option_live_view

__all__ = ["SizeControls", "LiveView", "live_view", "OptionControls", "option_live_view"]
