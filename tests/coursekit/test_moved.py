"""Nothing lost for an existing class (issue 54, item 6): every name that the previous release wrote into a class's
own files still resolves, to the module that does that job now (``coursekit/moved.py``).

The files: a course folder's ``nbgrader_config.py`` (the exchange's classes, the hub's Autograde preprocessor, the
course's preprocessors), the hub's generated configuration (the grading service run with ``python -m``, the spawn
hook of several courses, the LTI authenticator, the instructors' server extension, the students' exchange classes)
and the LMS export plugins that ``nbgrader export --exporter`` names. The names are those of the files written by
commit 6a6e9d6, before the class side moved into packages. Cost: about a second (the authenticator's JupyterHub
import, and the service started with its old name up to reading its settings)."""
import importlib
import subprocess
import sys

import pytest

# "module:name" as the previous release wrote them
OLD_NAMES = [
    # the course folder's nbgrader_config.py
    "coursekit.course_exchange:CourseReleaseAssignment", "coursekit.course_exchange:CourseCollect",
    "coursekit.course_exchange:CourseReleaseFeedback", "coursekit.hub_grading:graded_by_hub_preprocessor",
    "learner.submit:PrivateSubmit", "learner.submit:CourseFetch", "learner.submit:CourseFetchFeedback",
    "learner.submit:CourseList", "grader.nbgrader_plugin:SandboxedExecute", "grader.nbgrader_plugin:TrustedVerdict",
    "grader.nbgrader_plugin:StampVersion", "grader.nbgrader_plugin:ShortenTracebacks",
    "grader.untrusted:FeedbackExporter", "grader.untrusted:FeedbackPage", "grader.untrusted:NeutraliseSubmission",
    # the hub's configuration (coursekit/hub.py, hub_courses.py and hub_lti.py of that release)
    "coursekit.hub_courses:spawn_hook", "coursekit.hub_lti:CourseLTI13Authenticator", "learner.submit:HubCourses",
    "coursekit.formgrader_tab:_jupyter_server_extension_points",
    "coursekit.formgrader_tab:_load_jupyter_server_extension",
    # nbgrader export --exporter
    "coursekit.lms_export:CanvasExport", "coursekit.lms_export:MoodleExport", "coursekit.lms_export:GenericExport",
]
# an old module name gives the module that does its job now, itself
SAME_MODULE = {"coursekit.course_exchange": "coursekit.exchange.classes",
               "coursekit.hub_grading": "coursekit.hub.service_client", "coursekit.hub_courses": "coursekit.hub.courses",
               "coursekit.hub_lti": "coursekit.hub.lti", "coursekit.formgrader_tab": "coursekit.hub.formgrader_tab",
               "coursekit.lms_export": "coursekit.lms.export", "coursekit.enrol": "coursekit.hub.enrol"}


@pytest.mark.parametrize("path", OLD_NAMES)
def test_every_name_the_previous_release_wrote_into_a_classs_files_resolves(path):
    module, _, name = path.partition(":")
    assert getattr(importlib.import_module(module), name) is not None


def test_an_old_module_name_is_the_new_module_and_the_settings_it_was_given_still_apply():
    for old, new in SAME_MODULE.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    # c.GradedByHub.course_root and c.CourseLTI13Authenticator.settings_file, as the old files set them (the old names
    # by string, as the files name them: tests/test_layout.py reads every import statement for a file)
    graded_by_hub = importlib.import_module("coursekit.hub_grading").graded_by_hub_preprocessor()
    assert "course_root" in graded_by_hub.class_traits(config=True)
    assert "settings_file" in importlib.import_module("coursekit.hub_lti").CourseLTI13Authenticator.class_traits(
        config=True)


def test_the_grading_service_started_by_its_old_name_runs_the_service(tmp_path):
    """``python -m coursekit.hub_grading SETTINGS``, the command of an old hub configuration: the service itself runs
    (here it stops at once, at the settings file that is not there)."""
    missing = tmp_path / "grading.json"
    proc = subprocess.run([sys.executable, "-m", "coursekit.hub_grading", str(missing)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "FileNotFoundError" in proc.stderr and str(missing) in proc.stderr, proc.stderr
    assert "coursekit/hub/service.py" in proc.stderr, proc.stderr  # the service's own code read it
