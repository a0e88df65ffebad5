"""A class on JupyterHub: the hub's configuration, nbgrader's exchange and the class's accounts.

`python3 tasks.py hub` runs this on one machine (a trial of what The Littlest JupyterHub gives a class):

    the hub (root)        JupyterHub with PAM accounts, configurable-http-proxy in front, and each
                          user's server started as that Unix user (LocalProcessSpawner)
    every user's server   the hub environment (.hub/env: jupyterhub-singleuser, JupyterLab, nbgrader),
                          run by a Python every account can execute
    a student             nbgrader's assignment list (fetch, validate, submit, fetch feedback) and
                          nothing of the instructor's tools (no formgrader, no course list, no
                          create-assignment), on the server and in JupyterLab's menus
    the instructor        the same server with the formgrader on their course folder; grading itself
                          is `plmcourse grade ... --exchange FOLDER` in the course's environment
    the exchange          one folder every account writes into (mode 1777, as nbgrader asks);
                          nbgrader keeps each student's submissions apart inside it

The configuration is written into one state folder (STATE_FILES); nothing outside it changes but the
accounts. course/INSTRUCTORS.md says how the same pieces are set up for a real class.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

COURSE_ID = "plmcourse"  # course/nbgrader_config.py's CourseDirectory.course_id: the exchange's folder
STUDENT_SERVER_OFF = ("formgrader", "course_list")  # nbgrader's server parts a student's server goes without
STUDENT_LAB_OFF = ("formgrader", "course-list", "create-assignment")  # and its JupyterLab plugins


@dataclass
class Hub:
    state: Path                      # the hub's own folder: its config, database, cookie secret, role configs
    env: Path                        # the hub environment's prefix (bin/jupyterhub, bin/jupyterhub-singleuser)
    proxy: Path                      # configurable-http-proxy's command
    exchange: Path                   # nbgrader's exchange
    instructor: str
    students: list[str]
    course: Path                     # the instructor's course folder (nbgrader's CourseDirectory.root)
    port: int = 8000
    token: str = field(default_factory=lambda: secrets.token_hex(32))  # the grader service's API token

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def make_exchange(root: Path) -> Path:
    """nbgrader's exchange folder: every account may write into it, none may remove another's files."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o1777)
    return root


def _nbgrader_config(hub: Hub, instructor: bool) -> str:
    lines = ['c = get_config()  # noqa: F821', f'c.CourseDirectory.course_id = "{COURSE_ID}"',
             f'c.Exchange.root = {str(hub.exchange)!r}']
    if instructor:
        lines.append(f'c.CourseDirectory.root = {str(hub.course)!r}')
    return "\n".join(lines) + "\n"


def write_role_configs(hub: Hub) -> dict:
    """The Jupyter config folder of each role, reached through JUPYTER_CONFIG_PATH (read before the hub
    environment's own): nbgrader's course id and exchange for everyone; a student's without the
    instructor's tools. role -> folder."""
    folders = {}
    for role in ("student", "instructor"):
        folder = hub.state / "roles" / role
        (folder / "labconfig").mkdir(parents=True, exist_ok=True)
        (folder / "nbgrader_config.py").write_text(_nbgrader_config(hub, role == "instructor"))
        off = STUDENT_SERVER_OFF if role == "student" else ()
        server = {"ServerApp": {"jpserver_extensions": {f"nbgrader.server_extensions.{name}": name not in off
                                                        for name in ("formgrader", "course_list",
                                                                     "assignment_list", "validate_assignment")}}}
        (folder / "jupyter_server_config.json").write_text(json.dumps(server, indent=2) + "\n")
        hidden = {f"@jupyter/nbgrader:{name}": True for name in (STUDENT_LAB_OFF if role == "student" else ())}
        hidden["@jupyterlab/apputils-extension:announcements"] = True  # it would ask to fetch news online
        (folder / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": hidden}) + "\n")
        for path in [folder, *folder.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)  # read by every user's server
        folders[role] = folder
    return folders


def hub_config(hub: Hub, roles: dict) -> str:
    """jupyterhub_config.py for `hub`."""
    return f'''# Written by plmcourse.hub; see its docstring.
c = get_config()  # noqa: F821
c.JupyterHub.bind_url = "{hub.url}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub.port + 1}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{hub.port + 2}"
c.ConfigurableHTTPProxy.command = [{str(hub.proxy)!r}]
c.ConfigurableHTTPProxy.pid_file = {str(hub.state / "proxy.pid")!r}
c.JupyterHub.db_url = "sqlite:///" + {str(hub.state / "jupyterhub.sqlite")!r}
c.JupyterHub.cookie_secret_file = {str(hub.state / "cookie_secret")!r}
c.JupyterHub.authenticator_class = "pam"  # the class's Unix accounts and their passwords
c.Authenticator.allowed_users = {set(hub.students)!r}
c.Authenticator.admin_users = {{{hub.instructor!r}}}
c.Spawner.cmd = [{str(hub.env / "bin" / "jupyterhub-singleuser")!r}]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120

ROLES = {json.dumps({k: str(v) for k, v in roles.items()})}


def role_config(spawner):
    """Each server reads its role's Jupyter config first (plmcourse.hub.write_role_configs)."""
    role = "instructor" if spawner.user.name == {hub.instructor!r} else "student"
    spawner.environment["JUPYTER_CONFIG_PATH"] = ROLES[role]


c.Spawner.pre_spawn_hook = role_config
# The course's grader: starts servers and acts for the accounts in tests and scripts (no person holds it).
c.JupyterHub.services = [{{"name": "plmcourse-grader", "api_token": {hub.token!r}}}]
c.JupyterHub.load_roles = [{{"name": "plmcourse-grader", "services": ["plmcourse-grader"],
                            "scopes": ["admin:users", "admin:servers", "tokens", "access:servers"]}}]
'''


def create_accounts(names: list[str], password: str | None = None) -> dict:
    """Unix accounts with home folders (useradd, root only); name -> password (new accounts get one, set with
    chpasswd; accounts that exist keep theirs and are left out)."""
    made = {}
    for name in names:
        if subprocess.run(["id", name], capture_output=True).returncode == 0:
            continue
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True, capture_output=True)
        made[name] = password or secrets.token_urlsafe(12)
    if made:
        lines = "".join(f"{name}:{pw}\n" for name, pw in made.items())
        subprocess.run(["chpasswd"], input=lines, text=True, check=True, capture_output=True)
    return made


def remove_accounts(names: list[str]) -> None:
    for name in names:
        subprocess.run(["userdel", "--remove", name], capture_output=True)


def start(hub: Hub, log: Path | None = None, wait: float = 60.0) -> subprocess.Popen:
    """Write the configuration and start JupyterHub (root); returns once its API answers."""
    hub.state.mkdir(parents=True, exist_ok=True)
    os.chmod(hub.state, 0o755)
    make_exchange(hub.exchange)
    roles = write_role_configs(hub)
    config = hub.state / "jupyterhub_config.py"
    config.write_text(hub_config(hub, roles))
    os.chmod(config, 0o600)  # it holds the grader's token
    out = open(log or hub.state / "jupyterhub.log", "ab")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join([str(hub.env / "bin"), str(Path(hub.proxy).parent), env.get("PATH", "")])
    process = subprocess.Popen([str(hub.env / "bin" / "jupyterhub"), "-f", str(config)], cwd=hub.state,
                               stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterHub stopped at start (exit {process.returncode}); see {out.name}")
        try:
            api(hub, "GET", "/hub/api/")
            return process
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.5)
    process.terminate()
    raise RuntimeError(f"JupyterHub did not answer within {wait:g} s; see {out.name}")


def api(hub: Hub, method: str, path: str, body=None, token: str | None = None, form: dict | None = None):
    """One call of the hub's REST API, or through the proxy of a user's server (path /user/NAME/...), with the
    grader's token or `token`; the decoded JSON reply (None when empty)."""
    data, headers = None, {"Authorization": f"token {token or hub.token}"}
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(hub.url + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=120) as reply:
        text = reply.read()
    return json.loads(text) if text.strip() else None


def start_server(hub: Hub, name: str, wait: float = 120.0) -> str:
    """Start `name`'s server (as that account) and return a token that acts for them."""
    try:
        api(hub, "POST", f"/hub/api/users/{name}/server")
    except urllib.error.HTTPError as error:
        if error.code != 400:  # 400: already running
            raise
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        user = api(hub, "GET", f"/hub/api/users/{name}")
        if user.get("servers", {}).get("", {}).get("ready"):
            break
        time.sleep(0.5)
    else:
        raise RuntimeError(f"{name}'s server was not ready within {wait:g} s")
    return api(hub, "POST", f"/hub/api/users/{name}/tokens", {"note": "plmcourse", "expires_in": 3600})["token"]


def assignment_action(hub: Hub, name: str, token: str, action: str, assignment: str) -> dict:
    """What a button of JupyterLab's assignment list does (fetch, submit, fetch_feedback, ...): a POST to
    nbgrader's handler on `name`'s own server. Raises RuntimeError with nbgrader's words if it failed."""
    reply = api(hub, "POST", f"/user/{name}/assignments/{action}", token=token,
                form={"course_id": COURSE_ID, "assignment_id": assignment})
    if not (reply and reply.get("success")):
        raise RuntimeError(f"{name}: {action} of {assignment} failed: {(reply or {}).get('value', reply)}")
    return reply


def save_notebook(hub: Hub, name: str, token: str, path: str, notebook: dict) -> None:
    """Save a notebook (its JSON as a dict) into `name`'s home through their server, as JupyterLab does."""
    api(hub, "PUT", f"/user/{name}/api/contents/{urllib.parse.quote(path)}", token=token,
        body={"type": "notebook", "format": "json", "content": notebook})


def feedback_pages(hub: Hub, name: str, token: str, assignment: str) -> list[str]:
    """Fetch `name`'s feedback (the assignment list's "Fetch Feedback") and return the text of each page."""
    assignment_action(hub, name, token, "fetch_feedback", assignment)
    contents = f"/user/{name}/api/contents/"
    pages = []
    for stamp in api(hub, "GET", contents + urllib.parse.quote(f"{assignment}/feedback"), token=token)["content"]:
        for item in api(hub, "GET", contents + urllib.parse.quote(stamp["path"]), token=token)["content"]:
            if item["name"].endswith(".html"):
                page = api(hub, "GET", contents + urllib.parse.quote(item["path"]) + "?type=file&format=text",
                           token=token)
                pages.append(page["content"])
    return pages


def stop(process: subprocess.Popen) -> None:
    """Stop the hub; it stops its proxy and every server it started (JupyterHub's cleanup_servers)."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def instructor_course(course: Path, home: Path, owner: str) -> Path:
    """The instructor's course folder in their home: a copy of course/ (configuration, sources, release and
    gradebook), theirs."""
    import shutil

    target = Path(home) / "course"
    if not target.exists():
        shutil.copytree(course, target, ignore=shutil.ignore_patterns(
            "submitted", "autograded", "feedback", "review", ".judge-secret", "*.log", ".plmcourse-cache"))
        subprocess.run(["chown", "-R", f"{owner}:{owner}", str(target)], check=True)
    return target


def main(argv: list[str] | None = None) -> int:
    import argparse
    import pwd

    parser = argparse.ArgumentParser(prog="python3 tasks.py hub", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hub", type=Path, required=True, help="the hub folder tasks.py built (.hub)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--exchange", type=Path, default=Path("/srv/nbgrader/exchange"))
    parser.add_argument("--instructor", default="instructor")
    parser.add_argument("--students", nargs="*", default=["student1", "student2", "student3"])
    args = parser.parse_args(argv)
    made = create_accounts([args.instructor, *args.students])
    home = Path(pwd.getpwnam(args.instructor).pw_dir)
    course = instructor_course(Path(__file__).resolve().parents[1] / "course", home, args.instructor)
    hub = Hub(state=args.hub / "state", env=args.hub / "env",
              proxy=args.hub / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy",
              exchange=args.exchange, instructor=args.instructor, students=args.students, course=course,
              port=args.port)
    process = start(hub)
    print(f"hub: {hub.url} (log: {hub.state / 'jupyterhub.log'})")
    for name, password in made.items():
        print(f"hub: account {name}, password {password}")
    if not made:
        print("hub: the accounts existed already and keep their passwords")
    print(f"hub: the instructor's course is {course}; release an assignment there with "
          f"`nbgrader release_assignment NAME`, grade with `plmcourse grade all NAME --exchange {args.exchange}`")
    print("hub: Ctrl-C (or SIGTERM) stops the hub; the accounts stay")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as Ctrl-C: a service manager stops it so
    try:
        process.wait()
    except KeyboardInterrupt:
        stop(process)
    return 0


if __name__ == "__main__":
    sys.exit(main())
