"""The hub tests' folder: see hub_helpers.py for the hub, the users and the helpers that act as them."""
import os
import shutil
import tempfile

import pytest
from hub_helpers import need_hub_parts, python_reachable


@pytest.fixture(scope="module")
def class_folder():
    """A folder under /tmp that every user may enter (pytest's own temporary folders are closed to them), and this
    install's Python within every user's reach meanwhile."""
    need_hub_parts()
    folder = tempfile.mkdtemp(prefix="course-hub-test-", dir="/tmp")
    os.chmod(folder, 0o755)
    with python_reachable():
        yield folder
    shutil.rmtree(folder, ignore_errors=True)
