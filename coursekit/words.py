"""Counts in the lines the ``course`` commands print: "1 student", "3 students", "0 students", never "student(s)"
nor "1 students". Every count a command prints goes through ``counted``."""


def counted(n, noun, nouns=None):
    """``n`` followed by ``noun`` when n is 1, else by its plural ``nouns`` (default: ``noun`` + "s"); a float as
    few digits as it needs (1.5 points, 1 point)."""
    shown = f"{n:g}" if isinstance(n, float) else str(n)
    return f"{shown} {noun if n == 1 else nouns or noun + 's'}"
