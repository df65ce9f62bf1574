"""A pytest plugin that makes frameworks unimportable, to test that the suite skips cleanly without them.

    ATTENTION_COURSE_BLOCK=torch python -m pytest -p block_framework tests/test_checks.py

Only `tests/test_environment.py` uses it; it imports nothing of the course.
"""

import os
import sys

for _name in filter(None, os.environ.get("ATTENTION_COURSE_BLOCK", "").split(",")):
    sys.modules[_name] = None  # `import torch` now raises ImportError, as if it were not installed
