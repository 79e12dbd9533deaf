"""A submission's files as plain data: read from a folder, written into one (never outside it)."""
import os

MAX_FILE_BYTES = 10_000 * 1024  # nbgrader_config.py's max_file_size (10,000 kB): bigger files are not carried


def files_of(folder):
    """{relative path: bytes} of a submission folder (checkpoints and over-size files left out)."""
    files, skipped = {}, []
    for here, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in (".ipynb_checkpoints", "__pycache__")]
        for name in names:
            path = os.path.join(here, name)
            rel = os.path.relpath(path, folder)
            if os.path.islink(path) or not os.path.isfile(path):
                skipped.append(f"{rel} (not a plain file)")
            elif os.path.getsize(path) > MAX_FILE_BYTES:
                skipped.append(f"{rel} (over {MAX_FILE_BYTES // 1024} kB)")
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


def read_files(folder):
    return files_of(folder)[0] if os.path.isdir(folder) else {}


