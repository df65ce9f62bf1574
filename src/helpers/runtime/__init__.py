"""What runs next to the student's code: in the student's own kernel and in the grader's sandbox.

Nothing here knows a right answer. These modules find the cell that defined an answer
(:mod:`.cells`, :mod:`.history`), run the student's cell or function on inputs they are handed
(:mod:`.collect`), and measure what the exercise asks about (dtype, framework, trainable
parameters, inputs left unchanged, memory, one pass). They hold no reference computation, no
wrong variant and no solution, and they never import :mod:`helpers.course` (the registry):
the grader's sandbox contains only this package, :mod:`helpers.convert`, the plotting modules and
the sandbox's own recorder, so the answers it judges cannot be computed there by the course.
"""
