"""Which Unix account a verified LTI launch may take (coursekit/hub/lti.py ``check_launch`` and ``provision``, in
this process, with real ``useradd`` as root and the hub's real state file in a temporary folder; no hub, no
browser: the launches that reach these checks through JupyterHub are in test_hub_lti.py).

* The user-name rule holds for the whole string: generated hostile LMS user ids (a final newline or carriage
  return, uppercase, lookalike Unicode letters, dots, spaces, NUL, 33 characters) give a Unix name exactly when
  useradd's rule, written out here character by character, accepts them; "bob\\n" is refused with a sentence naming
  the id, before any account is made.
* An account is taken by a launch only when this hub made it: one that another install of the course made (the same
  account comment, ``attention-course``) is refused; one this hub's ``provision`` made is recorded in the hub's state
  and its user's next launch is let in.

Cost: about 3 s (two hundred generated ids, two useradd/userdel pairs and a group).
"""
import os
import pwd
import string
import subprocess

import pytest
from hub_helpers import remove_users
from hypothesis import given, settings, strategies as st

from coursekit.hub.access import MADE_BY_HUB, UNIX_NAME
from coursekit.hub.lti import LTI, Refused, check_launch, provision, unix_name
from coursekit.hub.state import HubState, made_accounts

PREFIX = "ltia-"
CONTEXT = "lms-course-accounts"
COURSE = "ltia-course"
LEARNER = ["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"]

root = pytest.mark.skipif(os.geteuid() != 0, reason="useradd needs root (the hub tests run as root)")


def useradds_rule(name):
    """useradd's rule, independently of the regular expression: 1 to 32 characters, the first a lowercase ASCII
    letter or '_', every other one a lowercase ASCII letter, a digit, '_' or '-'."""
    first, rest = set(string.ascii_lowercase + "_"), set(string.ascii_lowercase + string.digits + "_-")
    return 1 <= len(name) <= 32 and name[0] in first and all(c in rest for c in name[1:])


VALID = st.text(string.ascii_lowercase + string.digits + "_-", min_size=0, max_size=27)
HOSTILE = st.one_of(
    VALID.map(lambda v: "a" + v + "\n"), VALID.map(lambda v: "a" + v + "\r\n"), VALID.map(lambda v: "a" + v + "\x00"),
    VALID.map(lambda v: "A" + v), VALID.map(lambda v: "a" + v + " "), VALID.map(lambda v: "a" + v + ".x"),
    VALID.map(lambda v: "\u0430" + v),                               # Cyrillic a, a lookalike of a
    VALID.map(lambda v: "a" + v.ljust(27, "x")),                     # 28 + the prefix's 5: one too many
    st.text(min_size=1, max_size=40),                                # anything at all
    VALID.map(lambda v: "a" + v))                                    # and valid ones among them


@given(HOSTILE)
@settings(max_examples=200, deadline=None, database=None)  # no .hypothesis folder in the tree
@pytest.mark.pipeline  # makes Unix users or opens folders outside the clone: make test, not the fast loop
def test_an_lms_user_id_gives_a_unix_name_exactly_when_useradd_would_take_it(value):
    name = unix_name(value, PREFIX)
    assert (name is not None) == useradds_rule(PREFIX + value), repr(value)
    assert bool(UNIX_NAME.match(PREFIX + value)) == useradds_rule(PREFIX + value)  # .match, as other modules use it
    if name is not None:
        assert name == PREFIX + value


@pytest.mark.pipeline  # makes Unix users or opens folders outside the clone: make test, not the fast loop
def test_a_final_newline_is_no_valid_name():
    """The regression of the issue: `$` matches before a final newline, so "bob\\n" passed and useradd failed."""
    assert unix_name("bob\n", "") is None and UNIX_NAME.match("bob\n") is None
    assert unix_name("bob", "") == "bob"


@pytest.fixture
def hub_state(tmp_path):
    state = str(tmp_path)
    with HubState(state).change() as data:
        data["courses"][COURSE] = {"folder": str(tmp_path / "course"), "context_id": CONTEXT, "instructors": [],
                                   "students": {}, "lineitems": None}
    settings = {"deployment_ids": ["deployment-1"], "username_claim": "sub", "username_prefix": PREFIX,
                "configured": [], "state": state}
    return settings, HubState(state)


def claims(sub):
    """A verified launch's claims as ltiauthenticator hands them over: a learner of the course."""
    return {"sub": sub, LTI + "deployment_id": "deployment-1", LTI + "roles": LEARNER,
            LTI + "context": {"id": CONTEXT, "title": "Accounts"}, "given_name": "T", "family_name": "U"}


def test_an_id_ending_in_a_newline_is_refused_with_a_sentence_naming_it(hub_state):
    settings, state = hub_state
    with pytest.raises(Refused) as refused:
        check_launch(settings, state.read(), claims("bob\n"))
    assert "Your LMS user id 'bob\\n' gives no valid Unix user name" in refused.value.message
    assert "must be 1 to 32 lowercase letters" in refused.value.message


@root
@pytest.mark.pipeline  # makes Unix users or opens folders outside the clone: make test, not the fast loop
def test_an_account_another_install_made_is_not_taken(hub_state):
    """An account with the comment every install of the course writes (`useradd --comment attention-course`), made
    outside this hub: the launch whose id names it is refused, and the hub's state does not list it."""
    settings, state = hub_state
    name = PREFIX + "other"
    remove_users([name])
    subprocess.run(["useradd", "--no-create-home", "--comment", MADE_BY_HUB, name], check=True, capture_output=True)
    try:
        assert pwd.getpwnam(name).pw_gecos == MADE_BY_HUB
        with pytest.raises(Refused) as refused:
            check_launch(settings, state.read(), claims("other"))
        assert (f"Your LMS user id 'other' names the Unix user {name}, an account of this machine that the hub did "
                f"not make") in refused.value.message
        assert name not in made_accounts(state.read())
    finally:
        remove_users([name])


@root
@pytest.mark.pipeline  # makes Unix users or opens folders outside the clone: make test, not the fast loop
def test_an_account_this_hub_made_is_recorded_and_taken_again(hub_state):
    """The first launch: no account, so it is admitted; ``provision`` makes it and records it in the hub's state.
    The next launch of the same user finds an existing account, which this hub made: admitted."""
    from coursekit.groups import students_group
    settings, state = hub_state
    name = PREFIX + "new"
    remove_users([name])
    try:
        adm = check_launch(settings, state.read(), claims("new"))
        assert adm.name == name
        provision(settings, adm, out=lambda line: None)
        assert pwd.getpwnam(name) and made_accounts(state.read()) == {name}
        assert check_launch(settings, state.read(), claims("new")).name == name
    finally:
        remove_users([name])
        subprocess.run(["groupdel", students_group(COURSE)], capture_output=True)
