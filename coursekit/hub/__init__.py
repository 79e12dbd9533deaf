"""The class on a JupyterHub (``course hub``), run as root: its set-up on one machine (``setup``), who may have what
(``access``, ``enrol``), several courses and the hub's state (``courses``, ``state``), LTI 1.3 login (``lti``,
``lti_config``, ``lti_pages``), the grading service (``service``, root's) and its client (``service_client``, the
instructor's), and the formgrader in a tab of its own (``formgrader_tab``, a server extension of instructors' servers
and `course instructor-lab`), its pages showing every name as text (``formgrader_pages``).
Nothing is imported here, so importing one module costs only what it needs."""
