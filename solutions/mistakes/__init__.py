"""The known mistakes, one module per notebook (``solutions/mistakes/<topic>.py``, the topics of ``learner/syllabus.py``).

Each function is a deliberately wrong variant of a reference function, with the
reference's signature. The checks run them on the same inputs as the learner's
function and, when the learner's output equals one, names the mistake; an
exercise lists its mistakes as ``"<topic>:<function>"``. The foundation's
(notebooks 01-04) call the reference itself, one edit away from it; the later
notebooks' are self-contained (torch only), so the tests can compile them as a
learner's notebook code. Like the rest of ``solutions/``, instructor-only.
"""
