"""The LMS: grades by LTI Advantage's Assignment and Grade Services (``ags``), the gradebook as each platform's import
file (``export``), ``course return --lms`` (``return_grades``, the instructor's side; ``posting``, the grading service's, root's) and the class list by NRPS (``roster``). The LTI login
itself is the hub's (coursekit/hub/lti.py). Nothing is imported here."""
