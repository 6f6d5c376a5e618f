"""JupyterHub for a workshop on one machine (`make hub`; read by deploy/hub/workshop_hub.py).

- Bound to 127.0.0.1 unless MHA_HUB_IP says otherwise; the proxy on MHA_HUB_PORT, its API on
  the next port, the hub itself on the one after, the progress page on the one after that.
  https when MHA_HUB_SSL_CERT and MHA_HUB_SSL_KEY are given (workshop_hub.py refuses any other
  address than loopback without them, unless --insecure).
- **Isolation**: every learner is a Unix user of their own (group ``mha-learners``, home 0700),
  created on first login by the pre-spawn hook below; LocalProcessSpawner runs each learner's
  Jupyter server as that user, so learners cannot read each other's files or signal each
  other's kernels. A name that belongs to an existing account outside the group (``root``,
  ``postgres``) is refused.
- **The course installed once**: every server runs this hub's interpreter (a venv the learners
  can read, with the course installed); on the first login the start command writes the
  learner's student copy, ``mha-course student ~/mha-course``, and opens notebook 00 in it.
  A learner's later logins reuse that copy (``mha-course student`` never overwrites work).
- **Login**: a shared workshop password (MHA_HUB_PASSWORD, at least 10 characters, not a common
  one), and
  optionally a list of learners (MHA_HUB_LEARNERS, a file with one ``name`` or
  ``name:password`` per line; only those names may log in, and a name with its own password
  needs it). An admin (MHA_HUB_ADMIN, MHA_HUB_ADMIN_PASSWORD of 32+ characters) may see the
  admin page and the class's progress page (``/services/progress/``, admins only: a JupyterHub
  service with hub OAuth, deploy/hub/progress_service.py). Reserved and system names (``nobody``,
  ``daemon``, any account outside the group) are refused at login with a message saying so.
- **Threads**: BLAS runs MHA_HUB_THREADS threads per learner (default 1), so 30 learners on a
  few cores do not each start one thread per core.
- **Memory** (MHA_HUB_LIMITS says which is in force; workshop_hub.py decides and the banner says):
  ``systemd``, on a machine with systemd and cgroup v2: jupyterhub-systemdspawner runs each
  learner's server in a unit of its own with MemoryMax and CPUQuota, so all of one learner's
  kernels share one limit (as The Littlest JupyterHub does). ``per-process`` elsewhere: each
  process of a learner (the server, each kernel) may allocate MHA_HUB_MEMORY_KIB KiB
  (``--memory``, default 2 GiB; RLIMIT_DATA, ``ulimit -d`` in the start command, inherited by
  every kernel); past it numpy raises MemoryError in that kernel, naming the array it could not
  make. /dev/shm is bounded too: the learner's processes get a private /dev/shm of that size
  (a mount namespace of their own) where the machine allows it, and no file may grow past it
  (``ulimit -f``) in any case.
- **Only what this hub started**: each process a learner's server starts carries MHA_HUB_ID, this
  hub's own id; workshop_hub.py stops exactly those (and the hub's own children), never another
  hub's learners.
- **Quiet JupyterLab**: no news, no "new version" prompt (settings overrides in the learners' venv,
  written by workshop_hub.py).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workshop_hub import HubError, check_password  # noqa: E402  (one password rule for the launcher and this file)

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
HUB_ID = ENV.get("MHA_HUB_ID", "")                      # marks every process of this hub's learners
LIMITS = ENV.get("MHA_HUB_LIMITS", "per-process")       # "systemd" or "per-process" (workshop_hub.py decides)
CPU_LIMIT = float(ENV.get("MHA_HUB_CPU", "1"))          # cores per learner, with systemd
PRIVATE_SHM = ENV.get("MHA_HUB_PRIVATE_SHM", "0") == "1"
COURSE_NOTEBOOKS = ENV.get("MHA_HUB_NOTEBOOKS", "")     # the course's notebooks/ (for --update at each start)
STATE.mkdir(mode=0o700, parents=True, exist_ok=True)
os.chmod(STATE, 0o700)                                  # the database names every learner and token hash
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
if ENV.get("MHA_HUB_SSL_CERT") and ENV.get("MHA_HUB_SSL_KEY"):
    c.JupyterHub.ssl_cert = ENV["MHA_HUB_SSL_CERT"]
    c.JupyterHub.ssl_key = ENV["MHA_HUB_SSL_KEY"]
c.JupyterHub.cookie_secret_file = str(STATE / "cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True                   # stopping the hub stops every learner's server
c.JupyterHub.cleanup_proxy = True
c.JupyterHub.concurrent_spawn_limit = int(ENV.get("MHA_HUB_SPAWN_LIMIT", "0"))  # 0: no limit
c.JupyterHub.active_server_limit = int(ENV.get("MHA_HUB_SERVER_LIMIT", "0"))


# ---- login -----------------------------------------------------------------------------------
COURSE_LANGS = ("en", "zh_CN")  # the languages a learner's copy can be made in (mha-course student --lang)


def _learner_lines(path):
    """(line number, name, password or None, language or None) of a file of ``name[:password[:lang]]`` lines."""
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, rest = line.partition(":")
        password, _, lang = rest.partition(":")
        name, lang, password = name.strip().lower(), lang.strip() or None, password.strip() or None
        if not NAME.match(name):
            raise SystemExit(f"{path}:{number}: {name!r} is not a valid learner name "
                             "(a-z first, then a-z, 0-9, _ or -, at most 31 characters)")
        if lang is not None and lang not in COURSE_LANGS:
            raise SystemExit(f"{path}:{number}: language {lang!r} for {name}; use one of {COURSE_LANGS} "
                             "(name:password:zh_CN, or name::zh_CN with the shared password)")
        if password is not None:
            try:
                check_password(password, what=f"{path}:{number}: {name}'s own password")
            except HubError as err:
                raise SystemExit(str(err)) from None
        yield number, name, password, lang


def read_learners(path):
    """{name: own password or None} from a file of ``name``, ``name:password`` or ``name:password:lang`` lines."""
    return {name: password for _, name, password, _ in _learner_lines(path)}


def read_languages(path):
    """{name: language} for the learners of that file who asked for one (``name::zh_CN``: a Chinese copy)."""
    return {name: lang for _, name, _, lang in _learner_lines(path) if lang}


LEARNERS = read_learners(ENV["MHA_HUB_LEARNERS"]) if ENV.get("MHA_HUB_LEARNERS") else None
# the language of each learner's copy: their line of the learners file, else the hub's (--lang), else English
LANGUAGES = read_languages(ENV["MHA_HUB_LEARNERS"]) if ENV.get("MHA_HUB_LEARNERS") else {}
DEFAULT_LANG = ENV.get("MHA_HUB_LANG") or "en"
# names a learner may not take: system accounts (whether or not this machine has them) and roles
RESERVED = {"root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy",
            "www-data", "backup", "list", "irc", "gnats", "nobody", "_apt", "messagebus", "sshd", "syslog",
            "systemd-network", "systemd-resolve", "systemd-timesync", "polkitd", "postgres", "mysql", "redis",
            "admin", "administrator", "adm", "wheel", "sudo", "staff", "operator", "ubuntu", "debian", "jupyter",
            "jupyterhub", "hub", "user", "users", "guest", "nogroup", "mha-learners"}


def name_refused(name: str):
    """Why ``name`` cannot be a learner (a sentence), or None: reserved, or an account outside GROUP."""
    if name in RESERVED or name.startswith("systemd-"):
        return f"'{name}' is a reserved or system name on this machine; log in with another name (e.g. your first name)"
    try:
        account = pwd.getpwnam(name)
    except KeyError:
        return None
    try:
        in_group = account.pw_gid == grp.getgrnam(GROUP).gr_gid
    except KeyError:
        in_group = False
    if not in_group or account.pw_uid < 1000:
        return f"'{name}' is an existing account on this machine, not a learner's; log in with another name"
    return None


class CourseAuthenticator(SharedPasswordAuthenticator):
    """The workshop password for everyone, or a learner's own password from the learners file."""

    async def authenticate(self, handler, data):
        from tornado import web

        name = self.normalize_username(data.get("username", ""))
        why = name_refused(name) if NAME.match(name) else None
        if why and name not in self.admin_users:
            raise web.HTTPError(403, why)  # shown on the login page, not "500: Unhandled error" later
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
    why = name_refused(spawner.user.name)
    if why and spawner.user.name not in (c.Authenticator.admin_users or set()):
        raise ValueError(why)
    ensure_learner_account(spawner.user.name)
    lang = LANGUAGES.get(spawner.user.name, DEFAULT_LANG)
    spawner.environment = {**spawner.environment, "MHA_COURSE_COPY_LANG": "" if lang == "en" else lang}


def _private_shm_preexec(preexec, size_kib: int):
    """``preexec`` (which drops to the learner's uid), after giving the process a /dev/shm of its own.

    A mount namespace of the learner's own (unshare(CLONE_NEWNS)) with a tmpfs of ``size_kib`` on
    /dev/shm: all of one learner's processes (they inherit it) share that bound, and no learner
    sees another's shared memory. Where the machine refuses (no CAP_SYS_ADMIN) it starts anyway
    with the per-file bound of ``ulimit -f``; the hub checked this before it started.
    """
    import ctypes

    def run():
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(0x00020000) == 0:  # CLONE_NEWNS
            libc.mount(b"none", b"/", None, 0x40000 | 0x4000, None)  # MS_PRIVATE | MS_REC: nothing leaks out
            libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", 0x2 | 0x4 | 0x8,  # nosuid, nodev, noexec
                       f"size={size_kib}k,mode=1777".encode())
        preexec()
    return run


if LIMITS == "systemd":
    # one systemd unit per learner: every kernel of theirs shares MemoryMax and CPUQuota
    c.JupyterHub.spawner_class = "systemdspawner.SystemdSpawner"
    c.SystemdSpawner.mem_limit = f"{MEMORY_KIB // 1024}M"
    c.SystemdSpawner.cpu_limit = CPU_LIMIT
    c.SystemdSpawner.isolate_tmp = True        # a private /tmp and /dev/shm for each learner
    c.SystemdSpawner.isolate_devices = True
    c.SystemdSpawner.disable_user_sudo = True
    c.SystemdSpawner.unit_name_template = f"mha-hub-{HUB_ID}-{{USERNAME}}"
    c.SystemdSpawner.user_workingdir = str(HOMES / "{USERNAME}")
else:
    from jupyterhub.spawner import LocalProcessSpawner

    class CourseSpawner(LocalProcessSpawner):
        """LocalProcessSpawner, with a private, bounded /dev/shm for each learner where allowed."""

        def make_preexec_fn(self, name):
            preexec = super().make_preexec_fn(name)
            return _private_shm_preexec(preexec, MEMORY_KIB) if PRIVATE_SHM else preexec

    c.JupyterHub.spawner_class = CourseSpawner

c.Spawner.pre_spawn_hook = pre_spawn_hook
c.Spawner.ip = "127.0.0.1"
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = f"/lab/tree/{COPY}/notebooks/00_overview.ipynb"
c.Spawner.http_timeout = int(ENV.get("MHA_HUB_HTTP_TIMEOUT", "120"))
c.Spawner.start_timeout = int(ENV.get("MHA_HUB_START_TIMEOUT", "180"))
# First login: the student copy, then the server (what z2jh's lifecycleHooks.postStart does too);
# a later start brings new and changed notebooks in (student --update never touches an edited one).
# A failed first copy stops the start with the reason in the hub's log; a failed update does not.
_NOTEBOOKS = f' --notebooks "{COURSE_NOTEBOOKS}"/*.ipynb' if COURSE_NOTEBOOKS else ""
_LIMITS = "" if LIMITS == "systemd" else (
    f"ulimit -d {MEMORY_KIB} || exit 1; ulimit -f {2 * MEMORY_KIB} || exit 1;")  # -f counts 512-byte blocks
c.Spawner.cmd = [
    "/bin/sh", "-c",
    f"umask 022; {_LIMITS}"  # the memory limit, inherited by every kernel of this server
    f' if [ -e "$HOME/{COPY}/notebooks" ]; then'
    f' "{BIN}/mha-course" student --update "$HOME/{COPY}"{_NOTEBOOKS} ${{MHA_COURSE_COPY_LANG:+--lang "$MHA_COURSE_COPY_LANG"}}'
    f' >>"$HOME/.mha-course-copy.log" 2>&1'
    f' || echo "mha-course student --update failed: see $HOME/.mha-course-copy.log" >&2;'
    f' else "{BIN}/mha-course" student "$HOME/{COPY}"{_NOTEBOOKS} ${{MHA_COURSE_COPY_LANG:+--lang "$MHA_COURSE_COPY_LANG"}}'
    f' >"$HOME/.mha-course-copy.log" 2>&1'
    f' || {{ echo "mha-course student failed: see $HOME/.mha-course-copy.log" >&2; cat "$HOME/.mha-course-copy.log" >&2; exit 1; }};'
    " fi;"
    f' exec "{BIN}/jupyterhub-singleuser" "$@"',
    "mha-course-start",
]
c.Spawner.env_keep = ["LANG", "LC_ALL", "TZ", "JUPYTERHUB_SINGLEUSER_APP"]  # not the hub's PYTHONPATH
c.Spawner.environment = {
    **runtime.thread_env(THREADS),  # every BLAS thread variable, as mha_course.runtime names them
    "MHA_COURSE_THREADS": THREADS, "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
    "MHA_HUB_ID": HUB_ID,  # every process of the learner inherits it: how this hub finds what it started
}

# ---- the class's progress, for admins only (a hub-authenticated service) -----------------------
PROGRESS_PORT = PORT + 3
c.JupyterHub.services = [{
    "name": "progress",
    "url": f"http://127.0.0.1:{PROGRESS_PORT}",
    "command": [sys.executable, str(Path(__file__).resolve().parent / "progress_service.py")],
    "environment": {"MHA_HUB_COPY": COPY, "MHA_HUB_NOTEBOOKS": COURSE_NOTEBOOKS,
                    "MHA_HUB_ADMIN": ENV.get("MHA_HUB_ADMIN", ""),
                    "MHA_HUB_PROGRESS_REFRESH": ENV.get("MHA_HUB_PROGRESS_REFRESH", "10")},
    "oauth_no_confirm": True,
    "display": True,
}]
c.JupyterHub.load_roles = [{
    "name": "progress",
    "scopes": ["list:users", "read:users:name"],  # whose folders to read; access is admins' only
    "services": ["progress"],
}]

# ---- idle culling --------------------------------------------------------------------------------
c.JupyterHub.load_roles.append({
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
})
c.JupyterHub.services.append({
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={CULL_TIMEOUT}",
                f"--cull-every={max(10, min(300, CULL_TIMEOUT // 4))}"],
})

# ---- a token for the benchmark (benchmarks/bench_hub.py), only when it asks for one -------------
if ENV.get("MHA_HUB_SERVICE_TOKEN"):
    c.JupyterHub.services.append({"name": "mha-bench", "api_token": ENV["MHA_HUB_SERVICE_TOKEN"]})
    c.JupyterHub.load_roles.append({
        "name": "mha-bench",
        "scopes": ["admin:users", "admin:servers", "access:servers", "list:users", "read:users"],
        "services": ["mha-bench"],
    })
