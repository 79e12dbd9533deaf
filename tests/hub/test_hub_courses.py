"""Several courses on one hub (coursekit/hub/courses.py) and the LTI launch's checks (coursekit/hub/lti.py), what
each refuses in words, and `course hub --courses FILE` (Unix passwords) started as the README writes it.

In-process (no hub): a courses file and an LTI file with problems, each named; the roles an LMS sends; the user name
rule and every refusal of a verified launch; `course return --lms` away from a hub, and the grading service asked to
post on a hub without LTI. The hub's launches themselves, in a browser and not: test_hub_lti.py.
Cost: in-process about 2 s; `course hub --courses` (two courses, a login by password, the teaching assistant's
server) about 15 s, and 20 s more for that server and a restart.
"""
import grp
import json
import os
import pwd
import re
import stat
import subprocess
import sys
import textwrap
import urllib.error

import pytest

from coursekit.hub.access import HubError
from coursekit.hub.setup import student_nbgrader_config
from coursekit.hub.courses import read_courses
from coursekit.hub.state import HubState
from coursekit.hub.lti import AGS_CLAIM, Refused, check_launch
from coursekit.hub.lti_claims import LTI, MEMBERSHIP, lms_id, role_of, unix_name
from coursekit.hub.lti_config import read_lti_config


def course_dir(root, course_id):
    folder = os.path.join(root, course_id)
    os.makedirs(folder)
    with open(os.path.join(folder, "nbgrader_config.py"), "w") as f:
        f.write(f"c = get_config()\nc.CourseDirectory.course_id = {course_id!r}\n")
    return folder


def tables(path, text):
    import tomllib
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    with open(path, "rb") as f:
        return tomllib.load(f).get("course")


# ------------------------------------------------------------------ the courses file
def test_a_good_courses_file_reads_as_its_courses(tmp_path):
    course_dir(tmp_path, "enc101")
    course_dir(tmp_path, "dec102")
    (tmp_path / "enc.csv").write_text("id,name\nann,Ann Lee\nsam,Sam Roe\n")
    (tmp_path / "dec.csv").write_text("sam,Sam Roe\n")
    path = tmp_path / "courses.toml"
    courses, problems = read_courses(tables(path, """
        [[course]]
        folder = "enc101"
        instructors = ["alice"]
        roster = "enc.csv"
        [[course]]
        folder = "dec102"
        instructors = ["bob", "carol"]
        roster = "dec.csv"
        """), str(path))
    assert problems == []
    assert [(c.id, c.folder, c.instructors, c.students) for c in courses] == [
        ("enc101", str(tmp_path / "enc101"), ["alice"], ["ann", "sam"]),
        ("dec102", str(tmp_path / "dec102"), ["bob", "carol"], ["sam"])]
    ids = [c.id for c in courses]
    several, one = student_nbgrader_config(ids, "/srv/x"), student_nbgrader_config(ids[:1], "/srv/x")
    for config in (several, one):  # the hub's courses alone, a fetch that follows no link, a private submission
        assert "c.Authenticator.plugin_class = 'learner.submit.HubCourses'" in config
        assert "c.ExchangeFactory.fetch_assignment = 'learner.submit.CourseFetch'" in config
        assert "c.ExchangeFactory.submit = 'learner.submit.PrivateSubmit'" in config
    assert "c.Exchange.path_includes_course = True" in several and "c.CourseDirectory.course_id" not in several
    assert "c.CourseDirectory.course_id = 'enc101'" in one and "path_includes_course" not in one


def test_a_courses_file_with_problems_is_refused_naming_each(tmp_path):
    course_dir(tmp_path, "enc101")
    course_dir(tmp_path / "other", "enc101")
    course_dir(tmp_path, "dec102")
    course_dir(tmp_path, "Bad.Id")
    (tmp_path / "r.csv").write_text("alice,Alice\nbob,Bob\n")
    path = tmp_path / "courses.toml"
    _, problems = read_courses(tables(path, """
        [[course]]
        folder = "enc101"
        instructors = ["alice"]
        roster = "r.csv"
        colour = "blue"
        [[course]]
        folder = "other/enc101"
        instructors = ["alice", "Not A Name"]
        roster = "r.csv"
        [[course]]
        folder = "dec102"
        context_id = "c-1"
        [[course]]
        folder = "Bad.Id"
        instructors = ["dora"]
        roster = "r.csv"
        [[course]]
        folder = "missing"
        """), str(path))
    text = "\n".join(problems)
    expect = [
        "course 1 (" + str(tmp_path / "enc101") + "): unknown key(s) colour",
        "course 2 (" + str(tmp_path / "other" / "enc101") + "): 'Not A Name' is not a valid Unix user name",
        "course 3 (" + str(tmp_path / "dec102") + "): name its instructor(s): instructors = [\"NAME\"]",
        "no roster = \"...\"",
        "context_id is for a hub with LTI login",
        "its course id 'Bad.Id' (c.CourseDirectory.course_id) must be 1 to 23 lowercase",
        "course 5 (" + str(tmp_path / "missing") + "): not a course folder (no nbgrader_config.py)",
        "have the same course id enc101: give each course folder its own c.CourseDirectory.course_id",
        "alice is an instructor of enc101 and enc101: an instructor's server serves one course",
        "alice is an instructor of enc101 and on the roster of enc101: one role each",
    ]
    for sentence in expect:
        assert sentence in text, f"{sentence!r} not in:\n{text}"


def test_an_lti_file_with_problems_is_refused_naming_each(tmp_path):
    path = tmp_path / "lti.toml"
    path.write_text(textwrap.dedent("""
        issuer = "https://lms.example"
        login_url = "lms.example/auth"
        token_url = "https://lms.example/token"
        deployment_ids = []
        username_claim = "email"
        username_prefix = "Upper"
        secret = 1
        """))
    with pytest.raises(HubError) as refused:
        read_lti_config(str(path))
    text = str(refused.value)
    for sentence in ("unknown key(s) secret", "no client_id", "login_url must be an http(s) URL",
                     "jwks_url must be an http(s) URL", "deployment_ids must list the deployment id(s)",
                     "no tool_key", "username_claim must be \"sub\" or \"custom:NAME\"", "username_prefix must be"):
        assert sentence in text, f"{sentence!r} not in:\n{text}"
    path.write_text("issuer = \n")
    with pytest.raises(HubError, match=r"lti.toml is not valid TOML: .*line 1"):
        read_lti_config(str(path))


# ------------------------------------------------------------------ a launch's roles and user name
@pytest.mark.parametrize("roles, role", [
    ([MEMBERSHIP + "#Instructor", "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Faculty"], "instructor"),
    ([MEMBERSHIP + "/Instructor#TeachingAssistant"], "instructor"),
    ([MEMBERSHIP + "/instructor#TeachingAssistant"], "instructor"),  # as Canvas's role map spells it
    (["TeachingAssistant"], "instructor"),
    ([MEMBERSHIP + "#Learner", "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Student"], "student"),
    ([MEMBERSHIP + "/Learner#Learner"], "student"),
    (["Learner"], "student"),
    ([MEMBERSHIP + "#Learner", MEMBERSHIP + "#Instructor"], "instructor"),
    ([MEMBERSHIP + "#Mentor"], None),
    ([MEMBERSHIP + "#Administrator", "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Administrator"],
     None),
    (["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Faculty"], None),  # no role in the course
    ([], None),
    ("Instructor", None),  # not a list
])
def test_the_course_role_comes_from_the_context_roles(roles, role):
    assert role_of(roles) == role


def test_the_user_name_is_the_lms_id_unchanged_or_nothing():
    assert unix_name("42", "m") == "m42" and unix_name("jdoe", "") == "jdoe"
    # an older Canvas expands $Canvas.user.id to a number: the same id
    assert lms_id({LTI + "custom": {"canvas_user_id": 4211}}, "custom:canvas_user_id") == "4211"
    assert lms_id({LTI + "custom": {"canvas_user_id": True}}, "custom:canvas_user_id") is None
    for value, prefix in (("42", ""), ("Ada", ""), ("a.b", ""), ("x" * 32, "u"), ("a b", ""), ("ä", "u")):
        assert unix_name(value, prefix) is None, (value, prefix)


SETTINGS = {"deployment_ids": ["dep-1"], "username_claim": "sub", "username_prefix": "u", "configured": ["ukept"]}
STATE = {"courses": {"enc": {"folder": "/srv/enc", "context_id": "ctx-enc", "instructors": ["uteach"],
                             "students": {"ustu": "stu"}, "lineitems": None},
                     "dec": {"folder": "/srv/dec", "context_id": "ctx-dec", "instructors": [], "students": {},
                             "lineitems": None}},
         "users": {"uteach": {"sub": "teach"}, "ustu": {"sub": "stu"}}}


def claims(sub="new", context="ctx-enc", role="Learner", deployment="dep-1", **more):
    return {"sub": sub, LTI + "deployment_id": deployment, LTI + "roles": [f"{MEMBERSHIP}#{role}"],
            LTI + "context": {"id": context, "title": f"Course {context}"}, "given_name": "Ann", "family_name": "Lee",
            **more}


def test_a_good_launch_is_admitted_with_what_the_hub_makes():
    adm = check_launch(SETTINGS, STATE, claims(email="ann@uni.example",
                                               **{AGS_CLAIM: {"lineitems": "https://lms/ags/ctx-enc/lineitems"}}))
    assert (adm.name, adm.role, adm.course, adm.folder, adm.sub) == ("unew", "student", "enc", "/srv/enc", "new")
    assert (adm.first_name, adm.last_name, adm.email, adm.lineitems) == (
        "Ann", "Lee", "ann@uni.example", "https://lms/ags/ctx-enc/lineitems")
    assert check_launch(SETTINGS, STATE, claims(sub="teach", role="Instructor")).role == "instructor"
    assert check_launch(SETTINGS, STATE, claims(sub="stu", context="ctx-dec")).course == "dec"  # a second course
    custom = dict(SETTINGS, username_claim="custom:canvas_user_id", username_prefix="c")
    adm = check_launch(custom, STATE, claims(sub="5f1c-uuid", **{LTI + "custom": {"canvas_user_id": "17"}}))
    assert (adm.name, adm.sub) == ("c17", "5f1c-uuid")


@pytest.mark.parametrize("settings, launch, why", [
    (SETTINGS, claims(deployment="dep-2"), "This hub is not set up for the LMS deployment 'dep-2'"),
    (SETTINGS, claims(context="ctx-other"), "This hub serves no course for the LMS course 'Course ctx-other' "
                                            "(context id 'ctx-other')"),
    (SETTINGS, claims(role="Mentor"), "The LMS gave you the role(s) Mentor in 'Course ctx-enc', which this course "
                                      "does not know"),
    (SETTINGS, claims(sub="Ann.Lee"), "Your LMS user id 'Ann.Lee' gives no valid Unix user name: a Unix user name "
                                      "here is the LMS user id (sub) with 'u' before it, unchanged"),
    (dict(SETTINGS, username_prefix=""), claims(sub="root"),
     "Your LMS user id 'root' names the Unix user root, an account of this machine that the hub did not make"),
    (dict(SETTINGS, username_claim="custom:login"), claims(), "The launch carries no custom:login"),
    (SETTINGS, claims(sub="teach", context="ctx-dec", role="Instructor"),
     "You are already an instructor of enc on this hub"),
    (SETTINGS, claims(sub="stu", role="Instructor"), "You are a student of enc on this hub"),
    (SETTINGS, claims(sub="teach", context="ctx-dec"), "You are an instructor of enc on this hub"),
    (dict(SETTINGS, username_claim="custom:login"),
     claims(sub="other-sub", **{LTI + "custom": {"login": "stu"}}),
     "The Unix user ustu belongs to another LMS user on this hub"),
])
def test_a_verified_launch_is_refused_in_words(settings, launch, why):
    with pytest.raises(Refused) as refused:
        check_launch(settings, STATE, launch)
    assert why in refused.value.message, refused.value.message


def test_course_hub_says_what_it_needs_to_know(capsys, tmp_path):
    """No class named, or a class named twice: a sentence, exit 2, nothing started."""
    from coursekit.cli import main
    assert main(["hub", "--instructor", "alice", "--state", str(tmp_path)]) == 2
    assert "give the class: --instructor NAME --roster roster.csv (one course), --courses FILE (several), or --lti " \
           "FILE" in capsys.readouterr().err


def test_course_hub_without_bubblewrap_refuses_before_it_sets_anything_up(capsys, tmp_path, monkeypatch):
    """`make setup && course hub` never installed bwrap (only `make hub` does): the hub would start and every
    submission would fail at grading. It says so and stops, whichever way it is started; no user or folder is made."""
    from coursekit.cli import main
    (tmp_path / "r.csv").write_text("username\nckbwrapless1\n")
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert main(["hub", "--instructor", "ckbwrapless0", "--roster", str(tmp_path / "r.csv"),
                 "--state", str(tmp_path / "state")]) == 2
    err = capsys.readouterr().err
    assert "the hub grades in a sandbox" in err and "apt-get install bubblewrap" in err and "Nothing was set up" in err
    assert not (tmp_path / "state").exists()
    for name in ("ckbwrapless0", "ckbwrapless1"):
        with pytest.raises(KeyError):
            pwd.getpwnam(name)


@pytest.mark.skipif(os.geteuid() != 0, reason="past course hub's check for root: run as root (make test does)")
def test_course_hub_refuses_a_class_named_twice(capsys, tmp_path):
    from coursekit.cli import main
    assert main(["hub", "--courses", str(tmp_path / "c.toml"), "--roster", "r.csv", "--state", str(tmp_path)]) == 2
    assert "with --courses or --lti the file names each course's instructors and roster" in capsys.readouterr().err


def test_first_launches_that_arrive_together_are_enrolled_in_batches(monkeypatch):
    """The gradebook is written by one process per batch: the launches that arrive while one batch is written go
    together into the next; a batch that fails fails each of its launches, and the next batch is written."""
    import asyncio
    import threading
    import time

    from coursekit.hub import lti as hub_lti
    batches, release = [], threading.Event()

    def enrol(python, folder, records):
        batches.append(sorted(r["id"] for r in records))
        if len(batches) == 1:
            release.wait(10)  # the first batch is slow: the others arrive meanwhile
        if "bad" in batches[-1]:
            raise RuntimeError("its gradebook could not be written (disk full)")
    monkeypatch.setattr(hub_lti, "enrol_as_owner", enrol)

    async def launches():
        enroller = hub_lti.Enroller("python")
        first = asyncio.ensure_future(enroller.enrol("/srv/enc", {"id": "a"}))
        await asyncio.sleep(0.2)
        others = [asyncio.ensure_future(enroller.enrol("/srv/enc", {"id": n})) for n in ("b", "c", "d")]
        await asyncio.sleep(0.2)
        release.set()
        await asyncio.gather(first, *others)
        failed = await asyncio.gather(enroller.enrol("/srv/enc", {"id": "bad"}), return_exceptions=True)
        await enroller.enrol("/srv/enc", {"id": "e"})
        return failed
    t0 = time.monotonic()
    failed = asyncio.run(launches())
    assert batches == [["a"], ["b", "c", "d"], ["bad"], ["e"]] and time.monotonic() - t0 < 10
    assert isinstance(failed[0], RuntimeError) and "disk full" in str(failed[0])


# ------------------------------------------------------------------ grades to the LMS away from an LTI hub
def test_return_lms_away_from_the_hub_says_where_it_works(tmp_path, monkeypatch):
    from coursekit.lms.return_grades import post_scores
    monkeypatch.delenv("COURSE_GRADING_URL", raising=False)
    said = []
    assert post_scores(str(tmp_path), "03_softmax", out=said.append, err=said.append) == 2
    assert "run it in a terminal of your JupyterLab there" in said[0] and "course export --lms" in said[0]


def test_the_service_posts_nothing_on_a_hub_without_lti(tmp_path):
    from coursekit.lms.posting import Refusal, post_for_instructor
    with pytest.raises(Refusal) as refused:
        post_for_instructor({"courses": {}, "hub_state": str(tmp_path)}, "/srv/enc", {})
    assert refused.value.status == 409 and "started without --lti" in refused.value.message


def test_the_service_needs_a_launch_before_it_knows_where_to_post(tmp_path):
    from coursekit.lms.posting import Refusal, post_for_instructor
    with HubState(str(tmp_path)).change() as data:
        data["courses"]["enc"] = dict(STATE["courses"]["enc"])
    body = {"assignment": "03_softmax", "maximum": 16, "students": ["ustu"], "scores": {"ustu": 3}}
    with pytest.raises(Refusal) as refused:
        post_for_instructor({"lti": {"client_id": "x"}, "hub_state": str(tmp_path)}, "/srv/enc", body)
    assert refused.value.status == 409 and "no launch from the LMS has brought enc's line items URL" in \
        refused.value.message
    assert stat.S_IMODE(os.stat(tmp_path / "courses.json").st_mode) == 0o600


# ------------------------------------------------------------------ course hub --courses
@pytest.mark.pipeline
@pytest.mark.xdist_group("hub")
def test_course_hub_with_a_courses_file(class_folder):
    """`course hub --courses FILE --create-users` as the README writes it, for two courses: each course's
    instructors' group and students' group, its folder and its folder in the exchange (the outbound its students'
    alone), the grading service's settings naming both, the students' settings naming no course; a student of both
    logs in with their Unix password. A teaching assistant listed among one course's instructors gets that course's
    formgrader (their server's lists its students) and nothing of the other's (its folder closed to them, the
    grading service's settings naming them for theirs alone); taken off the list, a restart takes it all back. A file
    with a problem is refused whole, nothing made."""
    import requests
    from hub_helpers import COURSE_BIN, HERE, Hub, modes_of, remove_users, restore_modes
    from lti_hub import course_folder

    from coursekit.groups import students_group
    from coursekit.hub.setup import PUBLIC_STATE
    from coursekit.hub.access import REFERENCE_FOLDER
    teach = {"ckc-enc": "ckc-alice", "ckc-dec": "ckc-bob"}
    ta = "ckc-tara"  # enc's teaching assistant: its second instructor
    staff = {"ckc-enc": [teach["ckc-enc"], ta], "ckc-dec": [teach["ckc-dec"]]}
    students = {"ckc-enc": ["ckc-ann", "ckc-sam"], "ckc-dec": ["ckc-sam"]}
    users = [*teach.values(), ta, "ckc-ann", "ckc-sam"]
    groups = [g for cid in teach for g in (f"{cid}-staff", students_group(cid))] + ["course-reference"]
    hub = Hub(class_folder, instructor=None, students=[])
    reference_modes = modes_of(REFERENCE_FOLDER)
    remove_users(users)
    try:
        for cid in teach:
            course_folder(class_folder, cid)
            with open(os.path.join(class_folder, f"{cid}.csv"), "w") as f:
                f.write("".join(f"{s},Student {s}\n" for s in students[cid]))
        path = os.path.join(class_folder, "courses.toml")
        with open(path, "w") as f:
            f.write("".join(f'[[course]]\nfolder = "{cid}"\ninstructors = {json.dumps(staff[cid])}\n'
                            f'roster = "{cid}.csv"\n' for cid in teach))
        command = [COURSE_BIN, "hub", "--courses", path, "--create-users", "--port", str(hub.port), "--exchange",
                   hub.exchange, "--state", hub.state, "--extra-config", os.path.join(HERE, "hub_test_config.py")]
        hub.command = lambda *extra, create_users=True: command
        # one instructor of both: refused, nothing made
        with open(path + ".bad", "w") as f:
            f.write(open(path).read().replace('"ckc-bob"', '"ckc-alice"'))
        refused = subprocess.run([*command[:3], path + ".bad", *command[4:]], env=hub.env(), capture_output=True,
                                 text=True, timeout=300)
        assert refused.returncode == 2 and "ckc-alice is an instructor of ckc-enc and ckc-dec" in refused.stderr, \
            refused.stdout + refused.stderr
        assert subprocess.run(["id", "ckc-alice"], capture_output=True).returncode != 0, "a user was made"

        hub.start()
        subprocess.run(["chpasswd"], input="".join(f"{n}:{hub.password}\n" for n in users), text=True, check=True)
        for cid, instructor in teach.items():
            folder = os.path.join(class_folder, cid)
            assert grp.getgrgid(os.stat(folder).st_gid).gr_name == f"{cid}-staff"
            assert pwd.getpwuid(os.stat(folder).st_uid).pw_name == instructor  # the first instructor's
            assert sorted(grp.getgrnam(f"{cid}-staff").gr_mem) == sorted(staff[cid])
            assert sorted(grp.getgrnam(students_group(cid)).gr_mem) == sorted(students[cid] + staff[cid])
            outbound = os.stat(os.path.join(hub.exchange, cid, "outbound"))
            assert stat.S_IMODE(outbound.st_mode) == 0o2750
            assert grp.getgrgid(outbound.st_gid).gr_name == students_group(cid)
        assert grp.getgrgid(os.stat(REFERENCE_FOLDER).st_gid).gr_name == "course-reference"
        grading = json.load(open(os.path.join(hub.state, "grading.json")))
        assert {f: sorted(c["instructors"]) for f, c in grading["courses"].items()} == {
            os.path.join(class_folder, cid): sorted(staff[cid]) for cid in teach}
        state = HubState(hub.state).read()
        assert {cid: sorted(c["students"]) for cid, c in state["courses"].items()} == students
        student_config = open(os.path.join(hub.state, "courses", "students", "jupyter", "student",
                                           "nbgrader_config.py")).read()
        assert "c.Exchange.path_includes_course = True" in student_config
        # a student of both logs in with their Unix password, as on a hub of one course
        session = requests.Session()
        page = session.get(f"{hub.base}/hub/login", timeout=30)
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text).group(1)
        answer = session.post(f"{hub.base}/hub/login", data={"username": "ckc-sam", "password": hub.password,
                                                              "_xsrf": xsrf}, allow_redirects=False, timeout=60)
        assert answer.status_code == 302 and any(c.name.startswith("jupyterhub-session") for c in session.cookies)
        # nothing of the hub's state is a student's to read but the settings their server reads (the database, the
        # cookie secret, the service's settings, the hub's state of the courses, pid files: none), and no student
        # may add a course to the exchange
        private = [os.path.join(here, f) for here, _, files in os.walk(hub.state) for f in files
                   if os.path.relpath(os.path.join(here, f), hub.state).split(os.sep)[0] not in PUBLIC_STATE]
        assert {"jupyterhub.sqlite", "jupyterhub_cookie_secret", "grading.json", "courses.json"} <= \
            {os.path.basename(p) for p in private}, private
        tries = ("import os, sys\nfor p in sys.argv[1:]:\n    try:\n        open(p, 'rb').read(1); print('READ', p)\n"
                 "    except OSError: pass\ntry:\n    os.listdir(sys.argv[1].rsplit('/', 1)[0]); print('LISTED')\n"
                 "except OSError: pass\n")
        said = subprocess.run(["runuser", "-u", "ckc-ann", "--", sys.executable, "-c", tries,
                               os.path.join(hub.state, "jupyterhub.sqlite"), *private],
                              capture_output=True, text=True, timeout=60)
        assert said.returncode == 0 and said.stdout == "", said.stdout + said.stderr
        made = subprocess.run(["runuser", "-u", "ckc-ann", "--", "mkdir", os.path.join(hub.exchange, "zz-fake")],
                              capture_output=True, text=True, timeout=60)
        assert made.returncode != 0 and "Permission denied" in made.stderr, made
        assert (os.stat(hub.exchange).st_uid, stat.S_IMODE(os.stat(hub.exchange).st_mode)) == (0, 0o755)
        # the teaching assistant: enc's formgrader in their own server, on enc's folder; dec's folder closed to them
        hub.spawn(ta)
        hub.wait_ready(ta)
        token = hub.user_token(ta)
        listed = {s["id"] for s in hub.server(ta, "GET", "/formgrader/api/students", token=token)}
        assert listed == set(students["ckc-enc"]), listed  # enc's roster (dec's has no ckc-ann)
        for cid, allowed in (("ckc-enc", True), ("ckc-dec", False)):
            gradebook = os.path.join(class_folder, cid, "gradebook.db")
            read = subprocess.run(["runuser", "-u", ta, "--", "head", "-c", "1", gradebook], capture_output=True,
                                  timeout=60)
            assert (read.returncode == 0) == allowed, (cid, read.stderr)
        with pytest.raises(urllib.error.HTTPError) as other:  # another instructor's server is not theirs
            hub.server(teach["ckc-dec"], "GET", "/formgrader/api/students", token=token)
        assert other.value.code in (403, 404), other.value.code
        # taken off enc's list and the hub started again: an instructor of nothing, in none of the groups
        hub.stop()
        text = open(path).read()
        with open(path, "w") as f:
            f.write(text.replace(f', "{ta}"', ""))
        hub.start()
        assert HubState(hub.state).read()["courses"]["ckc-enc"]["instructors"] == [teach["ckc-enc"]]
        assert all(ta not in grp.getgrnam(g).gr_mem for g in ("ckc-enc-staff", "course-reference"))
        read = subprocess.run(["runuser", "-u", ta, "--", "head", "-c", "1",
                               os.path.join(class_folder, "ckc-enc", "gradebook.db")], capture_output=True, timeout=60)
        assert read.returncode != 0, "the former teaching assistant still reads enc's gradebook"
    finally:
        hub.stop()
        restore_modes(reference_modes)
        remove_users(users)
        for group in groups:
            subprocess.run(["groupdel", group], capture_output=True)
