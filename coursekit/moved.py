"""The class side's modules before they moved into packages (``coursekit/hub/``, ``coursekit/exchange/``,
``coursekit/lms/``), still importable by their old names, since files written outside this repository name them: a
course folder's ``nbgrader_config.py`` (its exchange classes, the hub's Autograde preprocessor, an LMS exporter), and
a hub's generated configuration (the grading service run with ``python -m``, the spawn hook, the formgrader's tab).
An old name is the same module object as the new one (``import`` gives the module itself; ``python -m`` runs the new
module's code), so an existing class keeps working until its files are written again."""
import importlib
import importlib.abc
import importlib.util
import sys

# old name: (the module an import gives, the module `python -m` runs)
MOVED = {
    "hub_access": ("hub.access",) * 2, "hub_state": ("hub.state",) * 2,
    "hub_courses": ("hub.courses",) * 2, "hub_lti": ("hub.lti",) * 2, "hub_lti_config": ("hub.lti_config",) * 2,
    "hub_lti_pages": ("hub.lti_pages",) * 2, "hub_grading": ("hub.service_client", "hub.service"),
    "formgrader_tab": ("hub.formgrader_tab",) * 2, "enrol": ("hub.enrol",) * 2,
    "course_exchange": ("exchange.classes",) * 2, "inbound": ("exchange.inbound",) * 2,
    "lms_export": ("lms.export",) * 2, "lms_return": ("lms.return_grades",) * 2, "lms_roster": ("lms.roster",) * 2,
}
# "coursekit.hub", "coursekit.exchange" and "coursekit.lms" are packages now: their old modules' names are not kept
# (an import of one of those names finds the package; no file of a class named them). tests/coursekit/test_moved.py
# holds every name the previous release wrote into a class's files.


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        head, _, old = fullname.partition(".")
        if head != "coursekit" or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module("coursekit." + MOVED[spec.name.split(".", 1)[1]][0])

    def exec_module(self, module):
        pass  # the module is the new one, already run

    def get_code(self, fullname):  # python -m coursekit.OLD runs the new module as __main__, in its own package
        new = "coursekit." + MOVED[fullname.split(".", 1)[1]][1]
        return compile(f"import runpy\nrunpy.run_module({new!r}, run_name='__main__', alter_sys=True)\n",
                       f"<{fullname}, moved to {new}>", "exec")


def keep_old_names():
    if not any(isinstance(f, _Moved) for f in sys.meta_path):
        sys.meta_path.append(_Moved())
