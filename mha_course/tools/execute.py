"""``mha-course execute NOTEBOOK...``: re-run notebooks in place, reproducibly, one line per failure.

Re-execution pins BLAS to one thread (``MHA_COURSE_THREADS`` changes that), runs nbclient's own
asynchronous kernel manager on this very interpreter (never a foreign ``python3`` kernelspec),
stops a cell at ``--timeout`` and notices a dead kernel at once (waiting on the kernel's sockets in
slices of POLL_SLICE seconds, so a wake-up pyzmq loses costs half a second, not the whole cell
timeout: the intermittent hang: a reply that sat unread in the shell socket). When a notebook is done (or
stopped), every process its kernel started is killed: the kernel's process group, and any
child that left it (``start_new_session``), so a timed-out ``sleep 301`` does not live on.

The notebook is written back in one step (through a symlink, keeping its mode), and only if the
file still holds what was read: a save that landed while it ran (JupyterLab, an editor) is kept,
and the executed notebook goes beside it (NAME.executed.ipynb), said in one line (``write_back``).
A notebook that cannot be written (a read-only folder, a full disk, a file size limit) is one
line naming the file, and the rest of the batch goes on.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

from .. import runtime
from . import files

__all__ = ["KERNELSPEC", "NotebookRunError", "NotebookChangedError", "read_notebook", "write_back", "beside", "run_client", "execute_notebook",
           "positive_int", "non_negative_int", "add_execute_command"]

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


class NotebookRunError(RuntimeError):
    """A notebook could not be executed or saved: one line naming the notebook (and the cell)."""


class _CellRaised(NotebookRunError):
    """A cell raised: running it again would raise again, so it is never retried."""


class NotebookChangedError(NotebookRunError):
    """The notebook changed on disk while it ran: the save was kept, the result written beside it."""


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (``--timeout``).

    >>> positive_int("3")
    3
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give seconds >= 1, e.g. 600") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1 (0 or less would mean no limit at all); "
                                         "give seconds >= 1, e.g. 600")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: a whole number >= 0 (``--retries``).

    >>> non_negative_int("0")
    0
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give 0 or more, e.g. 1") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; give 0 or more extra attempts, e.g. 1")
    return value


# Why every wait on the kernel's sockets is cut into slices (a lost wake-up of the shell socket, seen at load 14):
# nbclient waits for a cell's reply with ONE asyncio poll of up to --timeout seconds on the shell
# socket. pyzmq wakes that poll from the socket's edge-triggered ZMQ_FD; once in a while that edge is
# lost, and the reply sits in the socket (zmq.EVENTS says POLLIN, seen with gdb on a stalled run)
# while the poll sleeps on. pyzmq reads the socket itself only when the poll's timeout fires, so the
# cell "finished" after 600 s and the run still passed. A poll of at most POLL_SLICE seconds, repeated
# up to the same deadline, bounds what a lost edge costs to one slice.
POLL_SLICE = 0.5


def _sliced_client_class():
    """AsyncKernelClient whose channels wait in slices of POLL_SLICE seconds (see above)."""
    from time import monotonic

    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.channels import AsyncZMQSocketChannel
    from traitlets import Type

    class SlicedChannel(AsyncZMQSocketChannel):
        async def get_msg(self, timeout=None):
            """The next message within ``timeout`` seconds (None: no limit), else queue.Empty."""
            from queue import Empty

            deadline = None if timeout is None else monotonic() + timeout
            while True:
                left = None if deadline is None else max(0.0, deadline - monotonic())
                step = POLL_SLICE if left is None else min(POLL_SLICE, left)
                if await self.socket.poll(int(step * 1000)):  # the end of a slice reads the socket itself
                    return await self._recv()
                if left is not None and left <= step:
                    raise Empty

    class SlicedClient(AsyncKernelClient):
        shell_channel_class = Type(SlicedChannel)
        iopub_channel_class = Type(SlicedChannel)
        stdin_channel_class = Type(SlicedChannel)
        control_channel_class = Type(SlicedChannel)

    return SlicedClient


def _current_env_kernel_manager(workdir: str):
    """An AsyncKernelManager whose kernel is ``sys.executable -m ipykernel_launcher``.

    Asynchronous, as nbclient expects: a blocking manager inside nbclient's event loop cannot
    see a timeout or a dead kernel. The kernelspec and the kernel's IPC sockets live in
    ``workdir`` (a temporary folder).
    """
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    spec_dir = Path(workdir) / "kernels" / "current"
    spec_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "current", "language": "python"}))
    ksm = KernelSpecManager(kernel_dirs=[str(spec_dir.parent)], ensure_native_kernel=False)
    # IPC sockets in ``workdir``, not TCP ports: two kernels started at once can never pick the
    # same port (and so never read each other's messages)
    km = AsyncKernelManager(kernel_name="current", kernel_spec_manager=ksm, transport="ipc",
                            ip=str(Path(workdir) / "kernel"))
    km.client_factory = _sliced_client_class()
    return km


# ---------------------------------------------------------------------------------------
# the kernel's processes: every one it started is killed when the notebook is done
# ---------------------------------------------------------------------------------------

def _children(pid: int) -> list:
    """The direct children of ``pid`` (Linux /proc; [] elsewhere)."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def _start_time(pid: int):
    """The start time of ``pid`` in clock ticks (it tells a process from a later one with its pid)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


class _KernelProcesses:
    """Watches the kernel's descendants while it runs; ``kill()`` ends the kernel's group and all of them."""

    def __init__(self, km):
        self.km, self.seen, self.groups = km, {}, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="mha-course kernel children", daemon=True)
        self._thread.start()

    def _kernel_pid(self):
        return getattr(getattr(self.km, "provisioner", None), "pid", None)

    def snapshot(self) -> None:
        pid = self._kernel_pid()
        if not pid:
            return
        try:
            self.groups.add(os.getpgid(pid))
        except (OSError, AttributeError):  # AttributeError: no process groups (Windows)
            pass
        todo = _children(pid)
        while todo:
            child = todo.pop()
            if child not in self.seen:
                self.seen[child] = _start_time(child)
                todo += _children(child)

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            self.snapshot()

    def kill(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        sigkill = getattr(signal, "SIGKILL", signal.SIGTERM)
        if hasattr(os, "killpg"):
            for group in self.groups - {os.getpgrp(), 0, 1}:
                try:
                    os.killpg(group, sigkill)
                except OSError:
                    pass
        for pid, started in self.seen.items():
            if started is not None and _start_time(pid) == started:
                try:
                    os.kill(pid, sigkill)
                except OSError:
                    pass


# ---------------------------------------------------------------------------------------
# running one notebook
# ---------------------------------------------------------------------------------------

def _cell_name(nb, index) -> str:
    """'cell 7 (`# Exercise 2.1: ...`)': the index and the first line of its source."""
    if index is None or not 0 <= index < len(nb.cells):
        return "kernel start-up"
    first = next((ln for ln in nb.cells[index].source.splitlines() if ln.strip()), "")
    return f"cell {index} (`{first[:60]}`)"


def read_notebook(path, what: str = "notebook", raw: bytes | None = None):
    """nbformat.read (any version Jupyter opens, as version 4); NotebookRunError: one line naming the path.

    ``raw``: the file's bytes, already read (``execute_notebook`` keeps them to see a save made meanwhile).
    """
    import nbformat

    path = Path(path)
    if not path.is_file():
        state = "is a folder" if path.is_dir() else "does not exist"
        raise NotebookRunError(f"{path}: the {what} {state}; give the path of an .ipynb file")
    try:
        nb = nbformat.reads((path.read_bytes() if raw is None else raw).decode("utf-8"), as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("it has no list of cells")
        return nb
    except Exception as err:  # NotJSONError, UnicodeDecodeError, a JSON that is no notebook, ...
        reason = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
        raise NotebookRunError(f"{path}: not a readable {what} ({reason}); restore it from git or "
                               "save it again from JupyterLab") from None


def run_client(nb, path, timeout: int) -> None:
    """Execute ``nb`` in a fresh kernel; NotebookRunError names the notebook and the failing cell.

    Whatever happens, the kernel and every process it started are gone afterwards.
    """
    from nbclient import NotebookClient

    path = Path(path)
    current = {"index": None}
    with tempfile.TemporaryDirectory() as tmp:
        km = _current_env_kernel_manager(tmp)
        client = NotebookClient(
            nb, timeout=timeout, km=km, record_timing=False,
            resources={"metadata": {"path": str(path.parent)}}, shutdown_kernel="immediate",
            on_cell_start=lambda cell, cell_index: current.update(index=cell_index))
        processes = _KernelProcesses(km)
        try:
            client.execute()
        except Exception as err:
            # Ctrl-C / SIGTERM: before the kernel runs, our handler records it; while it runs,
            # nbclient's own handler shuts the kernel down (and leaves this future behind),
            # which would otherwise read as a dead kernel
            if _SIGNALLED or getattr(client, "_async_cleanup_kernel_future", None) is not None:
                raise KeyboardInterrupt from None
            raise _run_error(err, nb, path, timeout, current["index"]) from None
        finally:
            processes.kill()


def _run_error(err: Exception, nb, path: Path, timeout: int, index) -> Exception:
    """The one-line NotebookRunError for what nbclient raised while running cell ``index``."""
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    cell = _cell_name(nb, index)
    if isinstance(err, CellTimeoutError):
        return NotebookRunError(f"{path}: {cell} did not finish within --timeout {timeout} s; it was stopped "
                                "(and every process it started)")
    if isinstance(err, DeadKernelError):
        return NotebookRunError(f"{path}: the kernel died in {cell} (os._exit, a crash or out of memory)")
    if isinstance(err, CellExecutionError):
        evalue = str(getattr(err, "evalue", ""))[:200]
        return _CellRaised(f"{path}: {cell} raised {getattr(err, 'ename', 'an error')}: {evalue}")
    if isinstance(err, RuntimeError):  # the kernel did not start
        return NotebookRunError(f"{path}: the kernel did not start ({err})")
    return err


def _check_limits(timeout, retries) -> None:
    for name, value, low in (("timeout", timeout, 1), ("retries", retries, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name}={value!r} must be a whole number >= {low}"
                             + (" (0 or less would mean no limit)" if name == "timeout" else "")
                             + f", e.g. {name}={600 if name == 'timeout' else 1}")


def execute_notebook(path, timeout: int = 600, retries: int = 0) -> None:
    """Execute the notebook at ``path`` top to bottom and write it back (atomically) with its outputs.

    Cells tagged ``raises-exception`` may raise. Any other error, a cell running past
    ``timeout`` seconds (>= 1), a dead kernel or a file that cannot be written raises
    NotebookRunError naming the notebook (and the cell); the file is then left as it was.
    ``retries`` (>= 0) extra attempts follow a timeout or a dead kernel (not a raising cell,
    which would raise again). A symlink is written through, to the file it points to.
    """
    import nbformat

    _check_limits(timeout, retries)
    path = Path(path)
    os.environ.update(runtime.thread_env())
    os.environ.pop("MPLBACKEND", None)
    for attempt in range(retries + 1):
        try:
            raw = path.read_bytes()
        except OSError:
            raw = None  # read_notebook says what is wrong
        nb = read_notebook(path, raw=raw)
        try:
            run_client(nb, path, timeout)
            break
        except NotebookRunError as err:
            if attempt == retries or isinstance(err, _CellRaised):
                raise
            print(f"{err}; attempt {attempt + 1} of {retries + 1}, trying again", file=sys.stderr)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    try:
        aside = write_back(path, raw, (nbformat.writes(nb) + "\n").encode("utf-8"))
    except OSError as err:
        raise NotebookRunError(f"{path}: it ran, but {files.os_error_line(err, path)}; "
                               "the notebook on disk is unchanged") from None
    if aside is not None:
        raise NotebookChangedError(f"{path}: it changed on disk while it ran (a save from JupyterLab or an "
                                   f"editor?), so that save was kept and the executed notebook was written "
                                   f"beside it, to {aside}; compare the two and keep what you want")


def beside(path) -> Path:
    """A new file next to ``path`` for an executed copy: NAME.executed.ipynb (then -2, -3, ...)."""
    path = Path(path)
    for n in range(1, 1000):
        candidate = path.with_name(f"{path.stem}.executed{'' if n == 1 else f'-{n}'}{path.suffix}")
        if not os.path.lexists(candidate):
            return candidate
    raise OSError(17, "too many executed copies beside it", str(path))


def write_back(path, original: bytes, data: bytes):
    """Write ``data`` at ``path`` only if the file there still holds ``original``; -> None.

    Otherwise (it changed, or it is gone, since it was read) ``data`` goes to ``beside(path)`` and
    that path is returned: a save that landed while the notebook ran is never replaced. The file
    is compared, given a second (hard) link, replaced in one step, and compared again through
    that link: a save written into the file in the meantime is put back, with the result beside.
    Only a save that replaces the file within those few microseconds could still be lost. The
    notebook is at ``path`` at every moment, whatever interrupts this.
    """
    real = files.real_target(path)
    files.remove_stale_temporaries(real.parent)
    try:
        if original is None or real.read_bytes() != original:
            return _write_beside(data, real)
    except FileNotFoundError:
        return _write_beside(data, real)  # deleted while it ran: not brought back
    tmp = files.stage(real, data)
    old = real.with_name(f".{real.name}.pid{os.getpid()}.before{files.TMP_SUFFIX}")
    try:
        try:
            os.link(real, old)  # the file as it is now, under a second name
        except OSError:
            old = None  # no hard links here (or it went): the compare above is all there is
        os.rename(tmp, real)  # one step: a reader sees the old notebook or the new one
        if old is not None and old.read_bytes() != original:  # a save landed in the old file meanwhile
            aside = beside(real)
            os.link(real, aside)
            os.rename(old, real)  # the save back where it was
            return aside
        return None
    finally:
        tmp.unlink(missing_ok=True)
        if old is not None:
            old.unlink(missing_ok=True)


def _write_beside(data: bytes, real: Path) -> Path:
    """``data`` as a new file beside ``real`` (never replacing one); its path."""
    target = beside(real)
    files.exclusive_write(target, data, files.file_mode(real) if real.exists() else None)
    return target


# ---------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------

_SIGNALLED: list = []  # the signals received: what looks like a dead kernel after one is our stop


def _raise_on_signal(signum, frame):
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt(f"signal {signum}")  # unwinds nbclient, which shuts its kernel down


def _cmd_execute(args) -> int:
    try:
        runtime.thread_env()
    except ValueError as err:
        print(f"mha-course execute: {err}", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _raise_on_signal)
    if hasattr(signal, "SIGXFSZ"):  # past `ulimit -f`, a write fails (EFBIG) instead of killing us
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    passed, failed = [], []
    for nb in args.notebooks:
        try:
            execute_notebook(files.check_path_arg(nb, "NOTEBOOK", "notebooks/01_qkv.ipynb"),
                             timeout=args.timeout, retries=args.retries)
        except (NotebookRunError, files.PathError) as err:
            print(f"mha-course execute: {err}", file=sys.stderr)
            failed.append(nb)
            continue
        passed.append(nb)
        print(f"executed {nb}")
    if len(args.notebooks) > 1 or failed:
        print(f"{len(passed)} of {len(args.notebooks)} notebook(s) executed"
              + (f"; passed: {', '.join(map(str, passed))}" if passed else "")
              + (f"; failed: {', '.join(repr(str(f)) if not str(f).strip() else str(f) for f in failed)}"
                 if failed else ""),
              file=sys.stderr if failed else sys.stdout)
    return 1 if failed else 0


def add_execute_command(sub) -> None:
    """Add ``execute NOTEBOOK... [--timeout S] [--retries N]`` to argparse subparsers."""
    ex = sub.add_parser("execute", help="re-execute notebooks in place, reproducibly")
    ex.add_argument("notebooks", nargs="+", help="notebook files to execute")
    ex.add_argument("--timeout", type=positive_int, default=600, help="seconds per cell, >= 1 (default 600)")
    ex.add_argument("--retries", type=non_negative_int, default=0,
                    help="extra attempts after a failure such as a timeout, >= 0 (default 0)")
    ex.set_defaults(func=_cmd_execute)
