"""The corpus of realistic student attempts (tests/corpus/*.yaml), played in a kernel as a student
plays them: no wrong attempt passes, no valid one is rejected, no diagnosis names a cause the attempt
does not have, no traceback from helpers. One test class per notebook, so `--dist loadscope` spreads
the notebooks over the workers. `benchmarks/diagnosis.py` prints how many wrong attempts are named.
"""

import re

import pytest
from corpus.runner import corpus_files, judge_result, load, run_notebook

_FILES = corpus_files()


def _make_class(path):
    def test_every_attempt_gets_the_verdict_it_deserves(self):
        attempts = load(path)
        assert len(attempts) >= 20, f"{path.name}: a notebook's corpus has at least 20 attempts"
        problems = []
        for result in run_notebook(attempts[0].notebook, attempts):
            problems += judge_result(result)
        assert not problems, "\n".join(problems)

    name = "TestCorpus_" + re.sub(r"\W", "_", path.stem)
    return name, type(name, (), {"test_every_attempt_gets_the_verdict_it_deserves":
                                  test_every_attempt_gets_the_verdict_it_deserves})


for _path in _FILES:
    _name, _cls = _make_class(_path)
    globals()[_name] = _cls


def test_the_corpus_covers_every_notebook_and_both_kinds_of_attempt():
    from paths import SOLUTIONS

    notebooks = {load(p)[0].notebook for p in _FILES}
    assert notebooks == {p.stem for p in SOLUTIONS.glob("*.ipynb")}
    attempts = [a for p in _FILES for a in load(p)]
    assert len(attempts) >= 300
    assert sum(a.expect == "pass" for a in attempts) >= 60
    assert sum(a.expect == "fail" for a in attempts) >= 200


@pytest.mark.parametrize("path", _FILES, ids=lambda p: p.stem)
def test_every_attempt_names_a_real_exercise_and_mistake(path):
    from helpers.course import spec
    from helpers.course.mistakes import MISTAKES

    for a in load(path):
        assert spec.get(a.exercise).notebook == a.notebook, a.name
        codes = [] if a.diagnosis in (None, "none") else ([a.diagnosis] if isinstance(a.diagnosis, str)
                                                          else a.diagnosis)
        assert set(codes) - {"none"} <= set(MISTAKES), (a.name, codes)
