"""Bringing a learner's notebooks up to the current release, keeping their answers.

``course update [--dir workspace]``: for each notebook of the workspace that was
released with another version of the course (or whose cells differ from the
current release), the current release takes its place, with the learner's
answers carried over by exercise name (the answer cell of exercise ``softmax``
goes into the new ``softmax`` answer cell). The old file is kept beside it as
``<assignment>.before-<version>.ipynb`` (a number is added if that exists), and
whatever could not be carried over is reported: an answer to an exercise the
new release no longer has, and code cells the learner added. A notebook the
workspace lacks is created; nothing else is written.
"""
import os

import nbformat

VERSION_KEY = "course_version"


def answer_cells(nb):
    """{grade_id: cell} of the cells a learner writes in (nbgrader's solution cells)."""
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution") and c.metadata["nbgrader"].get("grade_id")}


def merge(old, new):
    """``new`` (a release) with ``old``'s answers carried over by exercise name.

    Returns (merged notebook, names carried, what could not be carried, in words)."""
    merged = nbformat.reads(nbformat.writes(new), as_version=4)
    theirs, ours = answer_cells(old), answer_cells(merged)
    carried, left = [], []
    for gid, cell in ours.items():
        if gid in theirs and theirs[gid].source != cell.source:
            cell.source = theirs[gid].source
            carried.append(gid)
    left += [f"the answer of {gid!r}: this release has no such exercise (it stays in the old file)"
             for gid, cell in theirs.items() if gid not in ours and cell.source.strip()]
    known_ids = {c.get("id") for c in merged.cells}
    known_sources = {c.source for c in merged.cells}
    own = [c for c in old.cells if c.cell_type == "code" and not c.metadata.get("nbgrader") and c.source.strip()
           and c.get("id") not in known_ids and c.source not in known_sources]
    if own:
        first = own[0].source.strip().splitlines()[0][:60]
        left.append(f"{len(own)} code cell(s) of your own, the first starting {first!r} (they stay in the old "
                    f"file; copy them over if you want them)")
    return merged, carried, left


def _is_current(old, new):
    """True when ``old`` was made from this very release: same version, same exercises, and every cell of the
    release that is not an answer is in it unchanged (cells the learner added do not matter)."""
    fixed = lambda nb: [(c.cell_type, c.source) for c in nb.cells  # noqa: E731
                        if not c.metadata.get("nbgrader", {}).get("solution")]
    have = set(fixed(old))
    return old.metadata.get(VERSION_KEY) == new.metadata.get(VERSION_KEY) and \
        set(answer_cells(old)) == set(answer_cells(new)) and all(cell in have for cell in fixed(new))


def _keep_path(path, version):
    base = path[:-len(".ipynb")] + f".before-{version or 'unknown'}"
    candidate, n = base + ".ipynb", 1
    while os.path.exists(candidate):
        n += 1
        candidate = f"{base}-{n}.ipynb"
    return candidate


def update_workspace(target, releases):
    """Update ``target``'s notebooks from ``releases`` ({assignment: path of its current release}).

    Returns one line per notebook, saying what happened."""
    lines = []
    for a, release_path in sorted(releases.items()):
        path = os.path.join(target, a, a + ".ipynb")
        new = nbformat.read(release_path, as_version=4)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _write(new, path)
            lines.append(f"created  {a}: the current release (you did not have it)")
            continue
        try:
            old = nbformat.read(path, as_version=4)
        except Exception as exc:
            lines.append(f"skipped  {a}: your notebook cannot be read ({type(exc).__name__}); nothing was changed")
            continue
        if _is_current(old, new):
            lines.append(f"current  {a}: already the current release")
            continue
        merged, carried, left = merge(old, new)
        kept = _keep_path(path, old.metadata.get(VERSION_KEY))
        os.replace(path, kept)  # the learner's file, unchanged, under a new name
        _write(merged, path)
        lines.append(f"updated  {a}: {len(carried)} answer(s) carried over; your old file is "
                     f"{os.path.relpath(kept, target)}")
        lines += [f"         not carried: {what}" for what in left]
    return lines


def _write(nb, path):
    nbformat.write(nb, path + ".tmp")
    os.replace(path + ".tmp", path)  # never a half-written notebook
