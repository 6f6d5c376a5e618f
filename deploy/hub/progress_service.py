"""The class's progress as a page on the workshop hub: ``/services/progress/``, for admins only.

A JupyterHub service (started by the hub, see jupyterhub_config.py) behind hub OAuth: only a
user with ``access:services!service=progress`` (the hub's admins) gets in; a learner gets 403.
It asks the hub for its users (its token may list them, nothing more), reads each one's
``~/mha-course/.mha-course/progress.json`` (the checkers write it) and shows learners x
exercises, as ``mha-course progress`` prints it; the page reloads itself every
MHA_HUB_PROGRESS_REFRESH seconds (default 10). ``?format=json`` gives the same as JSON.
"""
from __future__ import annotations

import asyncio
import json
import os
import pwd
import signal
import time
from pathlib import Path

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join
from tornado import httpclient, web

from mha_course.check.progress import MARKER
from mha_course.tools import progress

ENV = os.environ
COPY = ENV.get("MHA_HUB_COPY", "mha-course")
REFRESH_S = int(ENV.get("MHA_HUB_PROGRESS_REFRESH", "10")) or None  # 0: a page that never reloads


async def hub_users() -> list:
    """The names of this hub's users (the hub's API, with the service's own token)."""
    client = httpclient.AsyncHTTPClient()
    resp = await client.fetch(url_path_join(ENV["JUPYTERHUB_API_URL"], "users"),
                              headers={"Authorization": f"token {ENV['JUPYTERHUB_API_TOKEN']}"})
    return sorted(u["name"] for u in json.loads(resp.body))


ADMINS = {n for n in ENV.get("MHA_HUB_ADMIN", "").split(",") if n}


def learner_folders(names) -> tuple:
    """([(name, course folder)] of the users (not the admins) whose home holds a student copy, [the others]).

    The others are the class's names without a copy yet: on a hub with a learners file the hub
    knows every allowed learner from the start, so the page can say who has not logged in.
    """
    found, absent = [], []
    for name in names:
        if name in ADMINS:
            continue
        try:
            folder = Path(pwd.getpwnam(name).pw_dir) / COPY
        except KeyError:
            folder = None  # no Unix account yet: made at the first login
        if folder is not None and (folder / MARKER).is_dir():
            found.append((name, folder))
        else:
            absent.append(name)
    return found, absent


class ProgressPage(HubOAuthenticated, web.RequestHandler):
    @web.authenticated
    async def get(self):
        found, absent = learner_folders(await hub_users())
        table = progress.rows(progress.gather(found), EXERCISES)
        if self.get_argument("format", "") == "json":
            self.set_header("Content-Type", "application/json")
            data = json.loads(progress.as_json(table))
            self.finish(json.dumps({**data, "not_logged_in": absent}, ensure_ascii=False))
            return
        when = time.strftime("%H:%M:%S", time.localtime())
        self.set_header("Cache-Control", "no-store")
        title = f"The class's progress ({len(found)} learners" + (f", {len(absent)} not logged in yet)" if absent else ")")
        self.finish(progress.as_html(table, refresh_s=REFRESH_S, when=when, title=title, absent=absent))


def _exercises() -> list:
    folder = ENV.get("MHA_HUB_NOTEBOOKS")
    notebooks = sorted(Path(folder).glob("*.ipynb")) if folder else []
    from mha_course.tools.student import course_notebooks
    return progress.course_exercises(notebooks or course_notebooks())


EXERCISES = _exercises()


async def main() -> None:
    prefix = ENV.get("JUPYTERHUB_SERVICE_PREFIX", "/services/progress/")
    app = web.Application([
        (prefix, ProgressPage),
        (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
    ], cookie_secret=os.urandom(32))
    url = ENV.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:8003")
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    app.listen(int(port.rstrip("/")), address=host)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # the hub stops a service with SIGINT, then SIGTERM
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
