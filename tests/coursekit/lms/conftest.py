"""The LMSs' importers in their own languages, started once for the session (lms_readers.py)."""
import pytest
from lms_readers import start


@pytest.fixture(scope="session")
def php():
    reader = start("php", "php-cli", "moodle_csv_reader.php")
    yield reader
    reader.close()


@pytest.fixture(scope="session")
def ruby():
    reader = start("ruby", "ruby", "canvas_csv_reader.rb")
    yield reader
    reader.close()
