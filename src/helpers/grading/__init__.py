"""The instructor's grader, in parts (the command is ``python -m helpers.grade``).

- :mod:`.protocol` — framing and the plain-array encoding shared by both sides;
- :mod:`.zygote` — runs INSIDE the sandbox: preloads the frameworks once, then forks one
  fresh process per submission that executes the notebook and records, for each exercise, what
  :mod:`helpers.runtime` gathers on the inputs the grader chose;
- :mod:`.sandbox` — the trusted side of a worker: starts bubblewrap, sends jobs, enforces
  the outer deadline, restarts a dead sandbox;
- :mod:`.verdict` — turns what came out of the sandbox (hostile data) into outcomes with
  :func:`helpers.course.spec.evaluate`;
- :mod:`.report` — the journal (``results.jsonl``), ``grades.csv`` and the feedback pages.

Only :mod:`.zygote` (with :mod:`.protocol` and :mod:`helpers.runtime`) ever runs next to student
code: the sandbox's view of the package is ``protocol.SANDBOX_VIEW``, which leaves out the
registry (:mod:`helpers.course`). Everything that decides a grade runs in the grader's own process.
"""
