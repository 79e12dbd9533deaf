"""A hub of several courses whose users launch from the LTI 1.3 test platform (``lti_platform.py``): `course hub --lti
FILE` started as the README writes it, its LTI file naming the platform's issuer, client id, URLs and deployment, the
tool's key (the hub makes it; the test registers its public half with the platform, as an administrator does) and one
[[course]] table per course folder with the LMS context it serves."""
import json
import os
import re
import subprocess

from hub_helpers import COURSE_BIN, HERE, Hub, course_copy_for, remove_users

from coursekit.groups import students_group
from coursekit.groups import REFERENCE_GROUP


def course_folder(folder, course_id):
    """A copy of the course in ``folder/course_id`` whose nbgrader_config.py names ``course_id`` (what an
    administrator edits in each course folder's copy: nbgrader's ``c.CourseDirectory.course_id``)."""
    root = course_copy_for(folder)
    path = os.path.join(folder, course_id)
    os.rename(root, path)
    config = os.path.join(path, "nbgrader_config.py")
    text = open(config).read()
    text, n = re.subn(r'^c\.CourseDirectory\.course_id = "attention-course"$',
                      f'c.CourseDirectory.course_id = "{course_id}"', text, flags=re.M)
    assert n == 1, "the course's nbgrader_config.py no longer sets its course id on one line"
    open(config, "w").write(text)
    return path


LTI_FILE = """\
issuer = "{issuer}"
client_id = "{client_id}"
login_url = "{login_url}"
token_url = "{token_url}"
jwks_url = "{jwks_url}"
deployment_ids = ["{deployment_id}"]
tool_key = "keys/lti-tool-key.pem"
username_claim = "sub"
username_prefix = "{prefix}"
{courses}
"""


class LtiHub(Hub):
    """``course hub --lti FILE`` as a process, with the test's service token (``hub_test_config.py``)."""

    def __init__(self, folder, lms, courses, prefix):
        """``courses``: {course id: LMS context id}."""
        super().__init__(folder, instructor=None, students=[])
        os.remove(self.roster)
        self.lms, self.prefix, self.contexts = lms, prefix, dict(courses)
        self.courses = {cid: course_folder(folder, cid) for cid in courses}
        self.lti_file = os.path.join(folder, "lti.toml")
        tables = "".join(f'\n[[course]]\nfolder = "{cid}"\ncontext_id = "{ctx}"\n' for cid, ctx in courses.items())
        with open(self.lti_file, "w") as f:
            f.write(LTI_FILE.format(issuer=lms.issuer, client_id=lms.client_id, login_url=lms.authorize_url,
                                    token_url=lms.token_url, jwks_url=lms.jwks_url, deployment_id=lms.deployment_id,
                                    prefix=prefix, courses=tables))
        lms.register_tool(f"{self.base}/hub/lti13/oauth_login", [f"{self.base}/hub/lti13/oauth_callback"],
                          target_link_uri=f"{self.base}/hub/")

    def command(self, *extra, create_users=True):
        return [COURSE_BIN, "hub", "--lti", self.lti_file, "--port", str(self.port),
                "--exchange", self.exchange, "--state", self.state,
                "--extra-config", os.path.join(HERE, "hub_test_config.py"), *extra]

    def start(self, timeout=180):
        super().start(timeout)
        public = json.load(open(os.path.join(self.state, "lti-tool-public-key.json")))
        self.lms.tool["jwks"] = [public["jwk"]]  # the administrator registers the tool's public key
        return self

    def user(self, sub):
        return self.prefix + sub

    def groups(self):
        return [g for cid in self.courses for g in (f"{cid}-staff", students_group(cid))] + [REFERENCE_GROUP]

    def clean_up(self, subs):
        remove_users([self.user(s) for s in subs])
        for group in self.groups():
            subprocess.run(["groupdel", group], capture_output=True)
