"""A submission's files as plain data: read from a folder, written into one (never outside it)."""
import os

MAX_FILE_BYTES = 10_000 * 1024  # nbgrader_config.py's max_file_size (10,000 kB): bigger files are not carried
# a graded notebook or its feedback page carries back the outputs the caps let through (grader.output_caps: 24 MB a
# notebook), its sources and the page's styles: bigger than that, it is left out and said
RESULT_FILE_BYTES = 64 * 2 ** 20


def files_of(folder, limit=MAX_FILE_BYTES):
    """{relative path: bytes} of a submission folder (checkpoints and files over ``limit`` bytes left out), and the
    files left out, in words."""
    files, skipped = {}, []
    for here, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in (".ipynb_checkpoints", "__pycache__")]
        for name in names:
            path = os.path.join(here, name)
            rel = os.path.relpath(path, folder)
            if os.path.islink(path) or not os.path.isfile(path):
                skipped.append(f"{rel} (not a plain file)")
            elif os.path.getsize(path) > limit:
                skipped.append(f"{rel} (over {limit // 1024} kB)")
            else:
                with open(path, "rb") as f:
                    files[rel] = f.read()
    return files, skipped


def write_files(folder, files):
    for rel, data in files.items():
        path = os.path.join(folder, rel)
        if os.path.relpath(os.path.abspath(path), folder).startswith(".."):
            continue  # never outside the folder
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def read_results(folder):
    """{relative path: bytes} of what grading wrote in ``folder``, each file at most ``RESULT_FILE_BYTES``, and the
    files left out, in words."""
    return files_of(folder, RESULT_FILE_BYTES) if os.path.isdir(folder) else ({}, [])


