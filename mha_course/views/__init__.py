"""The course's matplotlib views, one module per topic; every plot helper takes ``ax=None`` and returns it.

``attention`` (00-05: heatmaps, colour maps, the style every view shares), ``diagram`` and ``stages``
(the block diagram and its stage table), ``positions`` (06-07), ``model`` (08), ``efficient`` (10),
``bridge`` (12). Views read what the core and the lessons compute; they never recompute attention.
"""
