# The launcher of gpudisk-top.pyz (tools/build_pyz.py puts it at the zip's top as
# pyz_main.py; the zip's __main__.py, tools/pyz_stub.py, checks the whole file, then runs
# this with `say` and `damaged`, the one-line messages it owns, in its globals).  It owns
# three things, in this order, before anything else is imported: the Python version
# check; the isolation from the job's own packages (its site-packages, user site,
# PYTHONPATH, working directory, editable-install finders), so that only the zip's lib/
# and the standard library are seen; and where lib/ is imported from: a cache directory
# keyed by the zip's content where one is ours and writable (Python keeps its compiled
# bytecode there: a start within the installed tool's), else the zip itself.
# Written in the syntax of Python 2.7 and 3.0 onwards, so that a Python too old to run
# gpudisk-top reads this far and says so in one line instead of a SyntaxError.

import os
import sys

NEED = (3, 10)
PROG = "gpudisk-top"
# say(kind, text) and damaged(archive, why) are the stub's (tools/pyz_stub.py), given in
# this file's globals: it prints them before this file can be trusted


if sys.version_info[:2] < NEED:
    say("error", "this is Python %d.%d (%s); gpudisk-top.pyz needs Python %d.%d or newer: "
        "run it with a newer python3 (python3.10, python3.11, ...)"
        % (sys.version_info[0], sys.version_info[1], sys.executable or "python", NEED[0], NEED[1]))
    sys.exit(2)

ARCHIVE = os.path.abspath(os.path.dirname(__file__))
LIB = "lib"


def _foreign_dirs():
    """The paths on sys.path that are the job's, not the standard library's."""
    foreign = set()
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry:
            foreign.add(os.path.abspath(entry))
    try:
        import site
        user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    except Exception:   # a site module a job replaced: its user site is dropped below anyway
        user = None
    if user:
        foreign.add(os.path.abspath(user))
    for entry in sys.path:
        path = os.path.abspath(entry or os.curdir)
        parts = path.split(os.sep)
        if (not entry or path == ARCHIVE or "site-packages" in parts or "dist-packages" in parts):
            foreign.add(path)
    return foreign


def _under(path, dirs):
    path = os.path.abspath(path)
    return any(path == d or path.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)


def _foreign_finder(finder, foreign):
    """An import hook a job's .pth put in (setuptools' editable installs map a package to
    a checkout this way, ahead of sys.path)."""
    module = getattr(finder, "__module__", None) or type(finder).__module__
    origin = getattr(sys.modules.get(module), "__file__", None)
    return (module.startswith("__editable__")
            or (isinstance(origin, str) and _under(origin, foreign)))


def isolate(lib_path):
    """sys.path becomes `lib_path` and the standard library; modules and import hooks that
    came from the job's paths (a .pth's import, an editable install's finder) are dropped,
    so a job's old rich or textual is never imported in place of the zip's."""
    foreign = _foreign_dirs()
    sys.path[:] = [lib_path] + [p for p in sys.path
                                if p and not _under(os.path.abspath(p), foreign)]
    sys.meta_path[:] = [f for f in sys.meta_path if not _foreign_finder(f, foreign)]
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if isinstance(origin, str) and _under(origin, foreign):
            del sys.modules[name]
    sys.path_importer_cache.clear()


# before any other import: a job's PYTHONPATH comes ahead of the standard library, so even
# a module of the standard library (json, tempfile) could be the job's
isolate(os.path.join(ARCHIVE, LIB))

import errno  # noqa: E402
import hashlib  # noqa: E402
import shutil  # noqa: E402
import stat  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import zipfile  # noqa: E402
import zlib  # noqa: E402

DONE = ".complete"   # written last in an extracted copy: without it the copy is not used
KEEP_COPIES = 2
_QUIET_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT)


class _Refused(Exception):
    """A cache directory not to use; its text is the warning's."""


def _check_dir(path):
    """Raises _Refused where `path` is a symlink, not this user's, or writable by others;
    OSError where it cannot be looked at."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise _Refused("cache directory %s is a symlink" % path)
    if not stat.S_ISDIR(info.st_mode):
        raise _Refused("cache directory %s is not a directory" % path)
    if info.st_uid != os.geteuid():
        raise _Refused("cache directory %s is not yours (owner uid %d)" % (path, info.st_uid))
    if info.st_mode & 0o022:
        raise _Refused("cache directory %s is writable by others" % path)


def cache_root():
    """$XDG_CACHE_HOME/gpudisk-top or ~/.cache/gpudisk-top; None where neither is set to an
    absolute path."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.environ.get("HOME", "")
        base = os.path.join(home, ".cache") if os.path.isabs(home) else ""
    return os.path.join(base, PROG) if base else None


def _digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:20]


def extracted(root):
    """The lib/ of this zip's copy under `root`, made if need be.  Raises _Refused (a
    directory not to use, or a full disk), OSError (one that cannot be made: read-only,
    no permission), zipfile.BadZipFile (a damaged zip)."""
    parent = os.path.dirname(root)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o700)
    try:
        os.mkdir(root, 0o700)
    except OSError as err:
        if err.errno != errno.EEXIST:
            raise
    _check_dir(root)
    final = os.path.join(root, "pyz-" + _digest(ARCHIVE))
    if os.path.lexists(final):
        _check_dir(final)
        if os.path.isfile(os.path.join(final, DONE)):
            _used(final)
            return os.path.join(final, LIB)
        shutil.rmtree(final, ignore_errors=True)   # a copy a crash left unfinished
    tmp = tempfile.mkdtemp(prefix=".partial-", dir=root)
    try:
        with zipfile.ZipFile(ARCHIVE) as zf:
            # zipfile checks each member's CRC as it extracts: a damaged zip is found here
            zf.extractall(tmp, [n for n in zf.namelist() if n.startswith(LIB + "/")])
        open(os.path.join(tmp, DONE), "w").close()
        try:
            os.rename(tmp, final)
        except OSError:   # another start of the same zip finished first: use its copy
            shutil.rmtree(tmp, ignore_errors=True)
            _check_dir(final)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _Refused("cache directory %s is full" % root)
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _forget_old(root, final)
    return os.path.join(final, LIB)


def _used(copy):
    """The copy's marker's time is when it was last started from: _forget_old's order."""
    try:
        os.utime(os.path.join(copy, DONE))
    except OSError:
        pass


def _forget_old(root, keep):
    """Each build of the zip leaves a copy: keep the KEEP_COPIES last started and any
    started within a day (a dashboard of an older build may still be importing from it)."""
    copies = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if name.startswith("pyz-") and path != keep and not os.path.islink(path):
            try:
                copies.append((os.stat(os.path.join(path, DONE)).st_mtime, path))
            except OSError:
                copies.append((0.0, path))
    copies.sort(reverse=True)
    for used_at, path in copies[KEEP_COPIES:]:
        if used_at < time.time() - 86400:
            shutil.rmtree(path, ignore_errors=True)


def choose_lib():
    """Where to import lib/ from: the cache's copy, or the zip where there is none (a
    read-only or full filesystem, no HOME, a directory refused with a warning)."""
    in_zip = os.path.join(ARCHIVE, LIB)
    root = cache_root()
    if root is None or os.environ.get("GPUDISK_TOP_PYZ_CACHE") == "off":
        return in_zip
    try:
        return extracted(root)
    except _Refused as err:
        say("warning", "%s: running from the zip (a slower start)" % err)
    except (zipfile.BadZipFile, zlib.error) as err:   # a CRC or a stream that is wrong
        damaged(ARCHIVE, _why(err))
    except (OSError, EOFError, ValueError) as err:
        if getattr(err, "errno", None) not in _QUIET_ERRNOS:
            say("warning", "cannot use cache directory %s (%s): running from the zip "
                "(a slower start)" % (root, getattr(err, "strerror", None) or err))
    return in_zip


def _why(err):
    text = str(err).splitlines()[0] if str(err) else ""
    return text or type(err).__name__


def run():
    lib = choose_lib()
    if lib != sys.path[0]:
        sys.path[0] = lib
        sys.path_importer_cache.clear()
    try:
        from gpudisk_top.cli import main
    except (ImportError, SyntaxError, EOFError, ValueError, zipfile.BadZipFile,
            zlib.error) as err:   # zipimport's errors are ImportError's
        damaged(ARCHIVE, _why(err))
    sys.argv[0] = PROG
    sys.exit(main())


run()
