"""The course's registry: every exercise, its reference computations, its wrong variants and
the catalogue of mistakes. Trusted: it runs in the student's kernel (for ``check``) and in the
grader's own process, but never in the grader's sandbox, where student code runs next to
:mod:`helpers.runtime` alone.
"""
