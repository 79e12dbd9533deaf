"""A graded class in a real nbgrader gradebook, built through nbgrader's Gradebook API (no grading run): what the
tests of the grade exports and of the grades sent to the LMS read."""
import os
import sqlite3
import warnings


def stamp_alembic_head(path):
    """The schema revision nbgrader's Gradebook writes first into a new database, found in this process (nbgrader
    would run `alembic heads` in a subprocess for it: seconds on a busy machine)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR
    config = Config()
    config.set_main_option("script_location", ALEMBIC_DIR)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        db.execute("INSERT INTO alembic_version (version_num) VALUES (?)",
                   (ScriptDirectory.from_config(config).get_current_head(),))


def build_gradebook(root, cells, students, scores, late=None, course_id="attention-course", submitted=None):
    """``root``/gradebook.db holding ``cells`` ({assignment: {grade cell: max points}}, one notebook each, named
    like it), ``students`` ({id: (first name, last name, email, lms_user_id or "")}), their ``scores`` ({student:
    {assignment: {grade cell: points}}}: a submission each), ``late`` penalties ({(student, assignment):
    points}) and ``submitted`` times ({(student, assignment): datetime}, nbgrader's submission timestamp). Returns
    the database's path."""
    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning
    db = os.path.join(root, "gradebook.db")
    stamp_alembic_head(db)
    with warnings.catch_warnings(), Gradebook("sqlite:///" + db, course_id=course_id) as gb:
        warnings.simplefilter("ignore", SAWarning)  # add_submission's own autoflush notes; nothing is lost
        for a, grade_cells in cells.items():
            gb.add_assignment(a)
            gb.add_notebook(a, a)
            for cell, points in grade_cells.items():
                gb.add_grade_cell(cell, a, a, max_score=points, cell_type="code")
        for sid, (first, last, email, lms) in students.items():
            gb.add_student(sid, first_name=first, last_name=last, email=email, lms_user_id=lms or None)
        for sid, by_assignment in scores.items():
            for a, points in by_assignment.items():
                when = (submitted or {}).get((sid, a))
                gb.add_submission(a, sid, **({"timestamp": when} if when else {}))
                for cell, score in points.items():
                    gb.find_grade(cell, a, a, sid).auto_score = score
                if late and (sid, a) in late:
                    gb.find_submission_notebook(a, a, sid).late_submission_penalty = late[(sid, a)]
                gb.db.commit()
    return db
