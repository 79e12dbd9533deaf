"""The grading machine: what grades a submission on the instructor's side, and never ships to a student.

    sandbox, slots     bubblewrap around student code, each sandbox with its own budget (a user, control groups)
    worker             the sandboxed process that holds a student's definitions for the judge
    remote, wire       the trusted side's stand-ins for them, and what may cross (plain data only)
    judge              the verdict of one notebook, decided outside the student's kernel
    audit              the kernel's launcher and the notes of what the sandbox refused
    nbgrader_plugin    nbgrader's side of it: the sandboxed kernel, the trusted verdict, the course's preprocessors
    untrusted          a submission made inert for every page made from it, and the feedback page
    reference          the reference (solutions/), provided to the checks on this side only
    seeds, plain,      each student's hidden-case seed; text made safe for a terminal; a process's descendants
    processes

The checks themselves (``learner.check``) are the learner's side: this package uses them; they never import it.
"""
