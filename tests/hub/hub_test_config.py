"""Read by the hub the tests start (`course hub --extra-config`), after the course's own configuration: a login
that takes one shared password instead of PAM, and a service token that the test uses as the hub's admin API
(to make each user's API token and stop their servers). Never used outside tests/hub/."""
import os

c = get_config()  # noqa: F821
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = os.environ["COURSE_HUB_TEST_PASSWORD"]
c.JupyterHub.services = [{"name": "course-test", "api_token": os.environ["COURSE_HUB_TEST_TOKEN"]}]
c.JupyterHub.load_roles = [{"name": "course-test", "services": ["course-test"],
                            "scopes": ["admin:users", "admin:servers", "tokens", "access:servers", "read:users"]}]
# a request to start a server answers at once (the test waits for all of them side by side)
c.JupyterHub.tornado_settings = {"slow_spawn_timeout": 0}
