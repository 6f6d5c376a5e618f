"""ipywidgets views, one module per topic (``widgets.circuits``: notebook 14's pattern viewer).

BRANCH nb14 ONLY: until the lead's layout move lands, the course's controls still live in the flat
file ``mha_course/widgets.py``, which this package shadows; it is loaded here under the name
``mha_course._widgets_flat`` and re-exported, so ``from mha_course.widgets import live_view`` keeps
working. At merge, take main's ``widgets/__init__.py`` instead of this file.
"""
import importlib.util as _util
import sys as _sys
from pathlib import Path as _Path

_FLAT = _Path(__file__).resolve().parent.parent / "widgets.py"
_spec = _util.spec_from_file_location("mha_course._widgets_flat", _FLAT)
_flat = _util.module_from_spec(_spec)
_sys.modules[_spec.name] = _flat
_spec.loader.exec_module(_flat)

__all__ = list(_flat.__all__)
globals().update({name: getattr(_flat, name) for name in __all__})
