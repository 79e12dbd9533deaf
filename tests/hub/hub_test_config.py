"""Read by the hub the tests start (`course hub --extra-config`), after the course's own configuration: a service
token that the test uses as the hub's admin API (to make each user's API token and stop their servers), and server
starts that answer at once. The login stays the course's own (PAM: the test sets each user's Unix password with
chpasswd, as an administrator would with passwd). Never used outside tests/hub/."""
import os

c = get_config()  # noqa: F821
c.JupyterHub.services.append({"name": "course-test", "api_token": os.environ["COURSE_HUB_TEST_TOKEN"]})
c.JupyterHub.load_roles = [{"name": "course-test", "services": ["course-test"],
                            "scopes": ["admin:users", "admin:servers", "tokens", "access:servers", "read:users"]}]
# a request to start a server answers at once (the test waits for all of them side by side)
c.JupyterHub.tornado_settings = {"slow_spawn_timeout": 0}
