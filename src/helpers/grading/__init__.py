"""The instructor's grader, in parts (the command is ``python -m helpers.grade``).

- :mod:`.protocol` — framing and the plain-array encoding shared by both sides;
- :mod:`.zygote` — runs INSIDE the sandbox: preloads the frameworks once, then forks one
  fresh process per submission that executes the notebook and records the answers;
- :mod:`.sandbox` — the trusted side of a worker: starts bubblewrap, sends jobs, enforces
  the outer deadline, restarts a dead sandbox;
- :mod:`.verdict` — turns what came out of the sandbox (hostile data) into outcomes with
  :func:`helpers.spec.evaluate`;
- :mod:`.report` — the journal (``results.jsonl``), ``grades.csv`` and the feedback pages.

Only :mod:`.zygote` ever runs next to student code; everything that decides a grade runs in
the grader's own process.
"""
