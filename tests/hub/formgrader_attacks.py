"""What a student can put in front of an instructor's formgrader, tried in Chromium on any server that shows it
(`course instructor-lab`, the hub's instructor server): links that carry a script in every part of the formgrader's
paths nbgrader reflects, a ``?path=`` naming a folder of theirs (whose nbgrader_config.py would run), and a gradebook
whose names (students' ids and names, assignments, notebooks, one notebook's file missing) are markup. Each payload,
if it ran, would set ``window.__pwned``; ``try_the_formgrader`` asserts none did, that what a page's script holds
is the link's value exactly (a JavaScript string, not one cut short), that the names are shown as text, that every
answer carries the formgrader's Content-Security-Policy, that nbgrader's own pages broke no rule of it, and that a
submission's maths is typeset by the server's own MathJax, with nothing asked of another machine."""
import datetime
import os
import shutil
import urllib.parse
import warnings

import nbformat

# One payload for every context a value lands in: a JavaScript string ("), an inline script (</script>), the page
# (an element with a handler) and a trailing backslash (which would cut a string short and break the page's script).
LINK = "x\";window.__pwned='js-string';\"</script><script>window.__pwned='script'</script>" \
       "<img src=x onerror=\"window.__pwned='handler'\">\\"


def markup(name):
    return f"<img src=x onerror=\"window.__pwned='{name}'\">"


# the gradebook: ids and file names without "/", as nbgrader's paths need them
STUDENT = "ck" + markup("student-id")
# a student's names as a roster or the LMS gives them (the first one without a space: a roster's name is split at
# its first space)
FIRST, LAST = "<script>window.__pwned='first-name'</script>", markup("last-name")
ASSIGNMENT = "a" + markup("assignment").replace("/", "")
NOTEBOOK = "n\";window.__pwned='notebook-js';\"" + markup("notebook")
MISSING = "m" + markup("missing-notebook")

# each formgrader path that puts a part of itself into the page: {path: (what answers, {script variable: value})}
REFLECTED = {
    "manage_students/{0}": ("page", {"student_id": LINK}),
    "manage_students/{0}/{0}": ("page", {"student_id": LINK, "assignment_id": LINK}),
    "gradebook/{0}": ("page", {"assignment_id": LINK}),
    "gradebook/{0}/{0}": ("page", {"assignment_id": LINK, "notebook_id": LINK}),
    "manage_submissions/{0}": ("page", {"assignment_id": LINK}),
    "submissions/{0}": ("page", {}),
    "submissions/{0}/next": ("page", {}),
    "submissions/{0}/{0}": ("files", {}),
    "{0}": ("page", {}),
    "api/student/{0}": ("data", {}),
    "api/student_submissions/{0}": ("data", {}),
    "api/submission/{0}/{0}": ("data", {}),
}
KEYWORDS = {"'self'", "'none'", "'unsafe-inline'", "data:"}
# a submitted notebook's maths, inline and displayed, which the formgrader typesets with the server's own MathJax
MATHS = "Scaled by $\\sqrt{d_k}$: $$\\mathrm{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}$$"
TYPESET = """() => [document.querySelectorAll('.text_cell_render .MathJax_CHTML').length,
    [...document.querySelectorAll('.text_cell_render')].map(c => c.innerText).filter(t => t.includes('$'))]"""


def fill_gradebook(course, student):
    """The course's gradebook with markup for names: ``student`` (named ``FIRST`` ``LAST``) and ``STUDENT`` each
    submitted ``ASSIGNMENT``, whose notebooks are ``NOTEBOOK`` (its autograded file there) and ``MISSING`` (no
    file); the assignment's source folder made too. Returns the submitted notebook's id of ``student``."""
    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning
    with warnings.catch_warnings(), \
            Gradebook("sqlite:///" + os.path.join(course, "gradebook.db"), course_id="attention-course") as gb:
        warnings.simplefilter("ignore", SAWarning)  # add_submission's own autoflush notes; nothing is lost
        gb.update_or_create_assignment(ASSIGNMENT)
        for nb in (NOTEBOOK, MISSING):
            gb.update_or_create_notebook(nb, ASSIGNMENT)
            gb.update_or_create_grade_cell("q1", nb, ASSIGNMENT, max_score=1, cell_type="code")  # lists need one
        gb.update_or_create_student(student, first_name=FIRST, last_name=LAST)
        gb.update_or_create_student(STUDENT, first_name=FIRST, last_name=LAST)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("A submitted notebook."),
                                             nbformat.v4.new_markdown_cell(MATHS)])
        for sid in (student, STUDENT):  # collected: the course's collect always writes the time (a row without one
            gb.add_submission(ASSIGNMENT, sid, timestamp=datetime.datetime(2026, 9, 1, 12))  # is `course extend`'s)
        for folder in [os.path.join(course, "autograded", sid, ASSIGNMENT) for sid in (student, STUDENT)] + [
                os.path.join(course, "source", ASSIGNMENT)]:  # the source: Manage Assignments lists its folders
            os.makedirs(folder, exist_ok=True)
            nbformat.write(nb, os.path.join(folder, NOTEBOOK + ".ipynb"))
        return gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student).id


def evil_folder(folder):
    """A folder of a student's with an nbgrader_config.py that, if read, writes a file beside it; (folder, file)."""
    os.makedirs(folder, mode=0o755)
    marker = os.path.join(folder, "ran")
    with open(os.path.join(folder, "nbgrader_config.py"), "w") as f:
        f.write(f"open({marker!r}, 'w').write('the formgrader read this file')\n")
    os.chmod(os.path.join(folder, "nbgrader_config.py"), 0o644)
    return folder, marker


def directives(policy):
    out = {}
    for part in policy.split(";"):
        words = part.split()
        if words and words[0] not in out:  # the first of a name is the one a browser takes
            out[words[0]] = words[1:]
    return out


def assert_policy(policy, frame_ancestors, kind="page", where=""):
    """``policy`` is the formgrader's: nothing from another origin, no object, base or foreign form, framed only
    where the server allows (``frame_ancestors``); the API's JSON and a submission's files run nothing at all."""
    d = directives(policy or "")
    assert d.get("frame-ancestors") == [frame_ancestors], (where, policy)
    assert d.get("base-uri") == ["'none'"], (where, policy)
    if kind == "page":
        assert d.get("default-src") == ["'self'"] and d.get("form-action") == ["'self'"], (where, policy)
        assert d.get("object-src") == ["'none'"], (where, policy)
    else:  # default-src 'none' covers object-src; no script, in a sandbox
        assert d.get("default-src") == ["'none'"] and "sandbox" in d and "script-src" not in d, (where, policy)
    for name, sources in d.items():  # no other origin anywhere: only the keywords above
        if name not in ("report-uri", "sandbox"):
            assert set(sources) <= KEYWORDS, (name, sources, where, policy)


def text_of(page):
    return page.evaluate("() => document.body.textContent")  # hidden elements too (a name the page hides)


def not_run(page, wait_ms=400):
    page.wait_for_timeout(wait_ms)  # an element's error handler fires once its image fails
    return page.evaluate("() => window.__pwned")


def try_the_formgrader(page, base, frame_ancestors, folder, student, submission_id, shots):
    """All of the above against the formgrader at ``base`` (``.../formgrader``), in ``page`` (logged in to its
    server). ``frame_ancestors``: the server's own rule for framing; ``folder``: where a student's evil folder may
    be made; ``student``: the student of ``fill_gradebook``; ``shots``: where to leave a screenshot of a failure."""
    violations, elsewhere = [], []
    page.on("console", lambda m: violations.append((page.url, m.text)) if "Content Security Policy" in m.text else None)
    origin = urllib.parse.urlsplit(base)
    page.on("request", lambda r: elsewhere.append(r.url) if r.url.startswith("http") and urllib.parse.urlsplit(
        r.url).netloc != origin.netloc else None)
    quoted = urllib.parse.quote(LINK, safe="")
    try:
        # every reflected path, a script in it
        for pattern, (kind, held) in REFLECTED.items():
            url = f"{base}/{pattern.format(quoted)}"
            answer = page.request.get(url, max_redirects=0)  # the formgrader's own answer
            assert_policy(answer.headers.get("content-security-policy"), frame_ancestors, kind, pattern)
            if not answer.body():
                continue  # nothing a browser would show (nbgrader's 404 of a path it does not know)
            page.goto(url)
            assert not_run(page) is None, (pattern, page.content()[:3000])
            for name, value in held.items():  # a JavaScript string holding the link's value, whole
                assert page.evaluate(f"() => window.{name}") == value, (pattern, name)
            if held:
                assert LINK in text_of(page), pattern  # shown as text

        # a link naming a student's folder: refused, its nbgrader_config.py never read
        evil, marker = evil_folder(os.path.join(folder, "evil-course"))
        answer = page.goto(f"{base}?path={urllib.parse.quote(evil)}")
        assert answer.status == 400 and not os.path.exists(marker), (answer.status, page.content()[:2000])
        shutil.rmtree(evil)

        # the gradebook's names, on every page that lists them
        wanted = {"manage_assignments": ASSIGNMENT, "gradebook": ASSIGNMENT, "manage_students": STUDENT,
                  f"gradebook/{q(ASSIGNMENT)}": NOTEBOOK, f"gradebook/{q(ASSIGNMENT)}/{q(NOTEBOOK)}": FIRST,
                  f"manage_submissions/{q(ASSIGNMENT)}": STUDENT, f"manage_students/{q(STUDENT)}": ASSIGNMENT,
                  f"manage_students/{q(student)}/{q(ASSIGNMENT)}": MISSING + " (file missing)",
                  f"manage_students/{q(STUDENT)}/{q(ASSIGNMENT)}": NOTEBOOK,
                  f"submissions/{submission_id}/": LAST}
        for path, text in wanted.items():
            answer = page.goto(f"{base}/{path}")
            assert answer.status == 200, (path, answer.status)
            page.get_by_text(text).first.wait_for(state="attached", timeout=60_000)  # listed, as text
            assert not_run(page) is None, (path, page.content()[:3000])
            assert_policy(answer.headers.get("content-security-policy"), frame_ancestors, "page", path)
        assert f"{LAST}, {FIRST}" in text_of(page) and LAST not in page.content()  # the submission's page: text
        # its maths typeset by MathJax from this server (the machine may have no internet; nothing is asked of one)
        page.wait_for_function(f"() => ({TYPESET})()[0] >= 2", timeout=60_000)
        assert page.evaluate(TYPESET)[1] == [], page.evaluate(TYPESET)
        # the formgrader's dialog of an error, given a message with markup (a failed request names its student)
        page.goto(f"{base}/manage_assignments")
        page.evaluate("m => createModal('course-test-modal', 'Error', m)", markup("dialog"))
        page.locator("#course-test-modal .modal-body").wait_for(timeout=30_000)
        assert markup("dialog") in page.inner_text("#course-test-modal .modal-body")
        assert not_run(page) is None
        # the API's JSON, opened as a page: nothing runs
        for path in ("api/students", f"api/submissions/{q(ASSIGNMENT)}", f"api/notebooks/{q(ASSIGNMENT)}"):
            answer = page.goto(f"{base}/{path}")
            assert not_run(page) is None, path
            assert_policy(answer.headers.get("content-security-policy"), frame_ancestors, "data", path)
    except BaseException as exc:
        os.makedirs(shots, exist_ok=True)
        shot = os.path.join(shots, "formgrader-attack.png")
        try:
            page.screenshot(path=shot)
            exc.add_note(f"screenshot of the page: {shot}")
        except Exception:
            pass
        raise
    # nbgrader's own pages under the policy: nothing refused, MathJax included (on the API's JSON, opened as a page,
    # the policy refusing the markup in it is the point), and nothing asked of another machine
    refused = [(url, text) for url, text in violations if "/formgrader/api/" not in url]
    assert refused == [], refused
    assert elsewhere == [], elsewhere


def q(value):
    return urllib.parse.quote(value, safe="")
