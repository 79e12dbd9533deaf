"""Bringing a learner's notebooks up to the current release, keeping their answers.

``course update [--dir workspace]``: for each notebook of the workspace that was
released with another version of the course (or whose cells differ from the
current release), the current release takes its place.

* A notebook the learner has written in gets their answers carried over by
  exercise name (the answer cell of exercise ``softmax`` goes into the new
  ``softmax`` answer cell), and the command says what could not be carried over:
  an answer to an exercise the new release no longer has, and cells the learner
  added.
* A notebook the learner has not written in (every answer cell still the stub it
  was released with, as nbgrader's checksum of the cell says) is simply replaced.
* A notebook the workspace lacks is created; one that cannot be read is left alone.

Every notebook that is replaced is first moved, unchanged, into one folder:
``<workspace>/.previous/<its version>/<assignment>.ipynb`` (a number is added
when that exists). Nothing else is written.

A JupyterLab that has a notebook open keeps the old one in its tab, and saving
that tab would write it over the update. The command looks for Jupyter servers
running on the workspace (their ``jpserver-<pid>.json`` files in the workspace's
own runtime folder, where ``course lab`` puts them, and in Jupyter's default
one), asks each for its open notebooks (``/api/sessions``), and says which
updated notebooks are open and what to do; when it finds no server it still says
what to do if one is open.
"""
import glob
import json
import os
import urllib.request

import nbformat

from .bundle import VERSION_KEY

PREVIOUS = ".previous"


def answer_cells(nb):
    """{grade_id: cell} of the cells a learner writes in (nbgrader's solution cells)."""
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution") and c.metadata["nbgrader"].get("grade_id")}


def _plural(n, word, words=None):
    return f"{n} {word if n == 1 else (words or word + 's')}"


def merge_answers(old, new):
    """``new`` (a release) with ``old``'s answers carried over by exercise name.

    Returns (merged notebook, names carried, what could not be carried, in words)."""
    merged = nbformat.reads(nbformat.writes(new), as_version=4)
    theirs, ours = answer_cells(old), answer_cells(merged)
    carried, left = [], []
    for gid, cell in ours.items():
        if gid in theirs and theirs[gid].source != cell.source:
            cell.source = theirs[gid].source
            carried.append(gid)
    left += [f"your answer to {gid!r} (this release has no such exercise)"
             for gid, cell in theirs.items() if gid not in ours and cell.source.strip() and _written(cell)]
    known_ids = {c.get("id") for c in merged.cells}
    known_sources = {c.source for c in merged.cells}
    own = [c for c in old.cells if not c.metadata.get("nbgrader") and c.source.strip()
           and c.get("id") not in known_ids and c.source not in known_sources]
    if own:
        first = own[0].source.strip().splitlines()[0][:60]
        left.append(f"{_plural(len(own), 'cell')} you added, the first starting {first!r} (copy "
                    f"{'it' if len(own) == 1 else 'them'} over if you want {'it' if len(own) == 1 else 'them'})")
    return merged, carried, left


def _written(cell):
    """False when an answer cell is still the stub it was released with (nbgrader records a checksum of each
    answer cell in the release); True when the learner changed it, or when nothing says what it was."""
    from nbgrader.utils import compute_checksum
    recorded = cell.metadata.get("nbgrader", {}).get("checksum")
    return recorded is None or compute_checksum(cell) != recorded


def untouched(old, new):
    """True when the learner has not written in ``old``: every answer cell is its released stub and nothing the
    learner added would be left behind (what a notebook only opened, or run as it was released, looks like)."""
    _, _, left = merge_answers(old, new)
    return not left and not any(_written(c) for c in answer_cells(old).values())


def _is_current(old, new):
    """True when ``old`` was made from this very release: same version, same exercises, and every cell of the
    release that is not an answer is in it unchanged (cells the learner added do not matter)."""
    fixed = lambda nb: [(c.cell_type, c.source) for c in nb.cells  # noqa: E731
                        if not c.metadata.get("nbgrader", {}).get("solution")]
    have = set(fixed(old))
    return old.metadata.get(VERSION_KEY) == new.metadata.get(VERSION_KEY) and \
        set(answer_cells(old)) == set(answer_cells(new)) and all(cell in have for cell in fixed(new))


def _keep_path(target, assignment, version):
    """Where the learner's notebook goes, unchanged: ``.previous/<version>/<assignment>.ipynb`` (or ``-2``, ...)."""
    folder = os.path.join(target, PREVIOUS, str(version or "unknown"))
    candidate, n = os.path.join(folder, assignment + ".ipynb"), 1
    while os.path.exists(candidate):
        n += 1
        candidate = os.path.join(folder, f"{assignment}-{n}.ipynb")
    return candidate


def _alive(pid):
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, TypeError, ValueError):
        return True  # someone else's process, or no pid recorded: count it as running
    return True


def _inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def runtime_dirs(target):
    """Where Jupyter servers on ``target`` record themselves: ``course lab``'s (the workspace's own) and Jupyter's
    default runtime folder."""
    dirs = [os.path.join(target, ".jupyter", "runtime")]
    try:
        from jupyter_core.paths import jupyter_runtime_dir
        dirs.append(jupyter_runtime_dir())
    except ImportError:
        pass
    return list(dict.fromkeys(dirs))


def running_labs(target):
    """The Jupyter servers running on ``target`` (their root is the workspace, a folder inside it or one above it):
    a list of (url, set of absolute paths of the notebooks open there, or None when the server did not say)."""
    labs, seen = [], set()
    for folder in runtime_dirs(target):
        for info_file in sorted(glob.glob(os.path.join(folder, "jpserver-*.json"))):
            try:
                with open(info_file) as f:
                    info = json.load(f)
            except (OSError, ValueError):
                continue
            root = info.get("root_dir") or ""
            if not root or not _alive(info.get("pid")) or info.get("pid") in seen:
                continue
            if not (_inside(target, root) or _inside(root, target)):
                continue
            seen.add(info.get("pid"))
            url = info.get("url") or ""
            labs.append((url, _open_notebooks(url, info.get("token") or "", root)))
    return labs


def _open_notebooks(url, token, root):
    """Absolute paths of the notebooks a server has sessions for (open in a tab with a kernel), or None."""
    if not url.startswith("http"):
        return None
    request = urllib.request.Request(url.rstrip("/") + "/api/sessions",
                                     headers={"Authorization": f"token {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            sessions = json.load(response)
    except (OSError, ValueError):
        return None
    return {os.path.realpath(os.path.join(root, s["path"])) for s in sessions if s.get("path")}


def update_workspace(target, releases, labs=None):
    """Update ``target``'s notebooks from ``releases`` ({assignment: path of its current release}).

    ``labs``: the Jupyter servers running on ``target`` (``running_labs``; found when None).
    Returns the lines to print: one per notebook, saying what happened, then what was kept and what to do."""
    target = os.path.abspath(target)
    if labs is None:
        labs = running_labs(target)
    lines, kept, replaced, counts = [], set(), [], {}
    for a, release_path in sorted(releases.items()):
        path = os.path.join(target, a, a + ".ipynb")
        new = nbformat.read(release_path, as_version=4)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _write(new, path)
            lines.append(f"created   {a}: new to your workspace")
            counts["created"] = counts.get("created", 0) + 1
            continue
        try:
            old = nbformat.read(path, as_version=4)
        except Exception as exc:
            lines.append(f"skipped   {a}: your notebook cannot be read ({type(exc).__name__}); nothing was changed")
            counts["skipped"] = counts.get("skipped", 0) + 1
            continue
        if _is_current(old, new):
            lines.append(f"current   {a}: already the current release")
            counts["current"] = counts.get("current", 0) + 1
            continue
        if untouched(old, new):
            merged, carried, left = new, [], []
            lines.append(f"replaced  {a}: you had not started it; it is now the current release")
            counts["replaced"] = counts.get("replaced", 0) + 1
        else:
            merged, carried, left = merge_answers(old, new)
            if carried:
                lines.append(f"updated   {a}: your {'answer' if len(carried) == 1 else 'answers'} to "
                             f"{', '.join(carried)} carried over")
            else:
                lines.append(f"updated   {a}: the current release" + (", with nothing of yours in it:" if left else ""))
            lines += [f"          left in your old copy: {what}" for what in left]
            counts["updated"] = counts.get("updated", 0) + 1
        keep = _keep_path(target, a, old.metadata.get(VERSION_KEY))
        os.makedirs(os.path.dirname(keep), exist_ok=True)
        os.replace(path, keep)  # the learner's file, unchanged, in .previous/<version>/
        _write(merged, path)
        kept.add(os.path.relpath(os.path.dirname(keep), target))
        replaced.append(path)
    lines.append("")
    said = {"updated": "updated", "replaced": "replaced (not started)", "created": "created",
            "current": "already current", "skipped": "skipped"}
    parts = [(said[w], counts[w]) for w in said if counts.get(w)]
    lines.append(", ".join(f"{_plural(n, 'notebook')} {what}" if i == 0 else f"{n} {what}"
                           for i, (what, n) in enumerate(parts)) + ".")
    if kept:
        lines.append("Your notebooks as they were before this update are in "
                     f"{', '.join(os.path.join(target, k) + os.sep for k in sorted(kept))}")
    if replaced:
        lines += lab_warning(target, replaced, labs)
    return lines


def lab_warning(target, replaced, labs):
    """What to tell a learner whose JupyterLab may still show the old notebooks."""
    advice = ("close its tab without saving, or reload it from disk (File > Reload Notebook from Disk) before you "
              "save: saving the old tab would write the old notebook over the update. If you typed in it since "
              "your last save, first save that as a copy (File > Save Notebook As...).")
    if not labs:
        return [f"If JupyterLab has one of these notebooks open, {advice}"]
    lines = []
    for url, open_paths in labs:
        names = sorted(os.path.relpath(p, target) for p in replaced if open_paths and os.path.realpath(p) in open_paths)
        if names:
            lines.append(f"JupyterLab at {url} has {', '.join(names)} open. For each, {advice}")
        else:
            lines.append(f"JupyterLab is running on this workspace ({url}). If it has one of these notebooks "
                         f"open, {advice}")
    return lines


def _write(nb, path):
    nbformat.write(nb, path + ".tmp")
    os.replace(path + ".tmp", path)  # never a half-written notebook
