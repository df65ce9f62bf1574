"""Every notebook's exercises. Each module ``nbNN`` registers its own on import.

Modules are discovered, so adding a notebook's exercises means adding one file here.
"""

import importlib
import pkgutil

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("nb")):
    importlib.import_module(f"{__name__}.{_mod}")
