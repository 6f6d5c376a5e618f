"""JupyterHub for a workshop on one machine (`make hub`; read by deploy/hub/workshop_hub.py).

- Bound to 127.0.0.1 unless MHA_HUB_IP says otherwise; the proxy on MHA_HUB_PORT, its API on
  the next port, the hub itself on the one after.
- **Isolation**: every learner is a Unix user of their own (group ``mha-learners``, home 0700),
  created on first login by the pre-spawn hook below; LocalProcessSpawner runs each learner's
  Jupyter server as that user, so learners cannot read each other's files or signal each
  other's kernels. A name that belongs to an existing account outside the group (``root``,
  ``postgres``) is refused.
- **The course installed once**: every server runs this hub's interpreter (a venv the learners
  can read, with the course installed); on the first login the start command writes the
  learner's student copy, ``mha-course student ~/mha-course``, and opens notebook 00 in it.
  A learner's later logins reuse that copy (``mha-course student`` never overwrites work).
- **Login**: a shared workshop password (MHA_HUB_PASSWORD, at least 8 characters), and
  optionally a list of learners (MHA_HUB_LEARNERS, a file with one ``name`` or
  ``name:password`` per line; only those names may log in, and a name with its own password
  needs it). An admin (MHA_HUB_ADMIN, MHA_HUB_ADMIN_PASSWORD of 32+ characters) may see the
  admin page.
- **Threads**: BLAS runs MHA_HUB_THREADS threads per learner (default 1), so 30 learners on a
  few cores do not each start one thread per core.
- **Memory**: each process of a learner (the server, each kernel) may allocate MHA_HUB_MEMORY_KIB
  KiB (``workshop_hub.py --memory``, default 2 GiB; RLIMIT_DATA, set by ``ulimit -d`` in the
  start command and inherited by every kernel). Past it numpy raises MemoryError in that kernel,
  naming the array it could not make (the textbook attention at seq_len 16384 wants 8 GiB),
  instead of one learner's experiment exhausting the machine for everyone.
- **Idle culling**: jupyterhub-idle-culler stops a server idle for MHA_HUB_CULL_TIMEOUT seconds
  (default 3600); its kernels and its memory go with it. The copy in the learner's home stays.
"""
import grp
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from jupyterhub.authenticators.shared import SharedPasswordAuthenticator

from mha_course import runtime  # the course is installed in the hub's venv

c = get_config()  # noqa: F821  (JupyterHub's config loader provides it)

ENV = os.environ
BIN = Path(sys.executable).parent                      # the hub's venv: the course is installed in it
STATE = Path(ENV.get("MHA_HUB_STATE", "build/hub/state")).resolve()
IP = ENV.get("MHA_HUB_IP", "127.0.0.1")
PORT = int(ENV.get("MHA_HUB_PORT", "8000"))
THREADS = ENV.get("MHA_HUB_THREADS", "1")
MEMORY_KIB = int(ENV.get("MHA_HUB_MEMORY_KIB", str(2 * 1024 * 1024)))  # per process of a learner
CULL_TIMEOUT = int(ENV.get("MHA_HUB_CULL_TIMEOUT", "3600"))
GROUP = ENV.get("MHA_HUB_GROUP", "mha-learners")
HOMES = Path(ENV.get("MHA_HUB_HOMES", "/home"))
COPY = "mha-course"                                     # the student copy: ~/mha-course/notebooks/
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,30}$")
STATE.mkdir(parents=True, exist_ok=True)
SBIN = os.pathsep.join([ENV.get("PATH", ""), "/usr/sbin", "/sbin"])

# ---- network: the proxy is what learners reach; everything else stays on loopback ---------
c.JupyterHub.ip = IP
c.JupyterHub.port = PORT
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = PORT + 2
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PORT + 1}"
c.ConfigurableHTTPProxy.command = [ENV.get("MHA_HUB_PROXY", "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
c.ConfigurableHTTPProxy.auth_token = ENV.get("MHA_HUB_PROXY_TOKEN") or secrets.token_hex(32)
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True                   # stopping the hub stops every learner's server
c.JupyterHub.cleanup_proxy = True
c.JupyterHub.concurrent_spawn_limit = int(ENV.get("MHA_HUB_SPAWN_LIMIT", "0"))  # 0: no limit
c.JupyterHub.active_server_limit = int(ENV.get("MHA_HUB_SERVER_LIMIT", "0"))


# ---- login -----------------------------------------------------------------------------------
def read_learners(path):
    """{name: own password or None} from a file of ``name`` or ``name:password`` lines (# comments)."""
    learners = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, password = line.partition(":")
        name = name.strip().lower()
        if not NAME.match(name):
            raise SystemExit(f"{path}:{number}: {name!r} is not a valid learner name "
                             "(a-z first, then a-z, 0-9, _ or -, at most 31 characters)")
        learners[name] = password.strip() or None
    return learners


LEARNERS = read_learners(ENV["MHA_HUB_LEARNERS"]) if ENV.get("MHA_HUB_LEARNERS") else None


class CourseAuthenticator(SharedPasswordAuthenticator):
    """The workshop password for everyone, or a learner's own password from the learners file."""

    async def authenticate(self, handler, data):
        name = self.normalize_username(data.get("username", ""))
        own = (LEARNERS or {}).get(name)
        if own is not None:
            return name if secrets.compare_digest(data.get("password", ""), own) else None
        return await super().authenticate(handler, data)


c.JupyterHub.authenticator_class = CourseAuthenticator
c.SharedPasswordAuthenticator.user_password = ENV.get("MHA_HUB_PASSWORD") or None
c.Authenticator.username_pattern = NAME.pattern
c.Authenticator.blocked_users = {"root"}
if LEARNERS is not None:
    c.Authenticator.allowed_users = set(LEARNERS)
else:
    c.Authenticator.allow_all = True                   # anyone with the workshop password
if ENV.get("MHA_HUB_ADMIN"):
    c.Authenticator.admin_users = {ENV["MHA_HUB_ADMIN"]}
    c.SharedPasswordAuthenticator.admin_password = ENV.get("MHA_HUB_ADMIN_PASSWORD") or None


# ---- each learner a Unix user, created on first login -----------------------------------------
def ensure_learner_account(name: str) -> None:
    """Create the Unix user ``name`` in GROUP with a private home; refuse a name taken outside GROUP."""
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        subprocess.run([shutil.which("groupadd", path=SBIN) or "groupadd", "--system", GROUP], check=True)
    try:
        account = pwd.getpwnam(name)
    except KeyError:
        subprocess.run([shutil.which("useradd", path=SBIN) or "useradd", "--create-home", "--home-dir", str(HOMES / name), "--gid", GROUP,
                        "--shell", "/bin/bash", "--comment", "mha-course learner", name],
                       check=True, capture_output=True, text=True)
        account = pwd.getpwnam(name)
    if account.pw_gid != grp.getgrnam(GROUP).gr_gid:
        raise ValueError(f"{name!r} is an existing account outside the group {GROUP!r}; "
                         "choose another learner name")
    os.chmod(account.pw_dir, 0o700)


def pre_spawn_hook(spawner):
    ensure_learner_account(spawner.user.name)


c.Spawner.pre_spawn_hook = pre_spawn_hook
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.ip = "127.0.0.1"
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = f"/lab/tree/{COPY}/notebooks/00_overview.ipynb"
c.Spawner.http_timeout = int(ENV.get("MHA_HUB_HTTP_TIMEOUT", "120"))
c.Spawner.start_timeout = int(ENV.get("MHA_HUB_START_TIMEOUT", "180"))
# First login: the student copy, then the server (what z2jh's lifecycleHooks.postStart does too).
c.Spawner.cmd = [
    "/bin/sh", "-c",
    f'ulimit -d {MEMORY_KIB} || exit 1;'  # the memory limit, inherited by every kernel of this server
    f' [ -e "$HOME/{COPY}/notebooks" ] || "{BIN}/mha-course" student "$HOME/{COPY}" >"$HOME/.mha-course-copy.log" 2>&1'
    f' || {{ echo "mha-course student failed: see $HOME/.mha-course-copy.log" >&2; exit 1; }};'
    f' exec "{BIN}/jupyterhub-singleuser" "$@"',
    "mha-course-start",
]
c.Spawner.env_keep = ["LANG", "LC_ALL", "TZ", "JUPYTERHUB_SINGLEUSER_APP"]  # not the hub's PYTHONPATH
c.Spawner.environment = {
    **runtime.thread_env(THREADS),  # every BLAS thread variable, as mha_course.runtime names them
    "MHA_COURSE_THREADS": THREADS, "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
}

# ---- idle culling --------------------------------------------------------------------------------
c.JupyterHub.load_roles = [{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}]
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={CULL_TIMEOUT}",
                f"--cull-every={max(10, min(300, CULL_TIMEOUT // 4))}"],
}]

# ---- a token for the benchmark (benchmarks/bench_hub.py), only when it asks for one -------------
if ENV.get("MHA_HUB_SERVICE_TOKEN"):
    c.JupyterHub.services.append({"name": "mha-bench", "api_token": ENV["MHA_HUB_SERVICE_TOKEN"]})
    c.JupyterHub.load_roles.append({
        "name": "mha-bench",
        "scopes": ["admin:users", "admin:servers", "access:servers", "list:users", "read:users"],
        "services": ["mha-bench"],
    })
