"""Autotuning: pick the fastest configuration of a kernel per problem-size bucket, once, and remember it.

    space = TuneSpace({"BM": [64, 128], "BN": [64, 128, 256], "num_warps": [4, 8]})
    mod.matmul.tune_space = space             # or tle.compile(path, tune={"matmul": {...}})
    mod.matmul[grid](a, b, c)                 # the first call per shape bucket tunes; later calls launch the best

A launch with a tuning space whose plan is not cached yet (runtime/kernel.py) asks `configure()` for the best
configuration of its bucket: an in-memory dict, then one SELECT on the database, then tuning. The plan built from
that configuration is cached per argument signature as any other, so a repeated launch costs what it always did.

The database (SQLite, TLE_TUNE_DB, default ~/.cache/tle/tuning.sqlite or $TLE_CACHE_DIR/tuning.sqlite) has one row
per key. The key is a hash of: the kernel's source fingerprint (the texts of its file and imports), its name, the
constants and launch options that are not tuned (and a fixed grid), the shape bucket (each dim <= 64 exactly,
larger ones rounded up to a power of two; TuneSpace.key_dims picks which dims count), the specialisation facts
(16-divisibility and unit strides, which change the binary), the parameter dtypes, the GPU's name and compute
capability, the tle release version, the backend compilers' versions and the tuned space itself. docs/tuning.md
describes the schema, the pruning rules and the search.

Search: (1) static pruning by a cost model read off the checked kernel (`prune`); (2) parallel compilation in
worker processes with a per-configuration timeout (`compile_configs`); (3) successive halving on the device
(`successive_halving`), every configuration checked against the reference output before its time counts.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import itertools
import json
import math
import os
import pickle
import select
import shutil
import sqlite3
import statistics
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from .. import __version__ as TLE_VERSION
from ..check import OCCUPANCIES
from ..compiler import default_num_warps, largest_tile
from ..diagnostics import TleError
from ..types import BYTES

OPTIONS = ("num_warps", "num_stages", "backend", "occupancy")
BACKENDS = ("auto", "triton", "tileir", "interp")
# The launch options' defaults (num_warps' depends on the kernel: tle.compiler.default_num_warps); occupancy None
# is the Tile IR lowering's own choice
DEFAULT_OPTIONS = {"num_stages": 3, "occupancy": None}


class TuneError(RuntimeError):
    """Tuning could not produce a configuration (nothing compiled, nothing matched the reference)."""


# ---- the space ---------------------------------------------------------------------------------------------------
@dataclass
class TuneSpace:
    """What to search: `params` maps a compile-time constant or a launch option (num_warps, num_stages, backend,
    occupancy) to the values to try; `key_dims` names the symbolic dims whose size buckets key the result (None:
    all of them).
    The rest are settings of the search: a wall-clock budget for one tuning, at most `max_candidates` compiled
    configurations, a per-configuration compile timeout, compile processes (`jobs`, default: CPUs - 1),
    `reference(args) -> [expected output tensors]` (default: the default configuration's outputs) and `timer`
    (config, trial, reps) -> seconds, for tests of the search logic on machines without the real device.
    `on_cpu`: launches on CPU tensors tune too (the interpreter); by default they run the kernel's defaults, since
    the interpreter's speed says nothing of a GPU's and a user's CPU run is a correctness check (`kernel.tune()`
    tunes on whatever tensors it is given)."""
    params: dict
    key_dims: list | None = None
    budget_s: float = 120.0
    max_candidates: int = 128
    compile_timeout_s: float = 60.0
    jobs: int | None = None
    reference: object = None
    timer: object = None
    on_cpu: bool = False

    def __post_init__(self):
        self.check()

    def check(self) -> "TuneSpace":
        """Normalise and check the values and settings. Run when the space is made and again at each tuning, since
        the settings may be changed on an attached space (`mod.matmul.tune_space.budget_s = 60`)."""
        if not isinstance(self.params, dict) or not self.params:
            raise ValueError("TuneSpace: params must be a non-empty dict of name -> list of values")
        self.params = {k: _values(k, v) for k, v in self.params.items()}
        for name, values in self.params.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"TuneSpace: '{name}' is not a name")
            if not values:
                raise ValueError(f"TuneSpace: {name} has no values")
            # by equality, not by spelling: 1 and 1.0 are one value of a float constant
            if any(a == b and (type(a) is bool) == (type(b) is bool) for i, a in enumerate(values) for b in values[:i]):
                raise ValueError(f"TuneSpace: {name} lists a value twice: {values}")
            if name == "num_warps" and not all(type(v) is int and v in (1, 2, 4, 8, 16, 32) for v in values):
                raise ValueError(f"TuneSpace: num_warps must be powers of two from 1 to 32, got {values}")
            if name == "num_stages" and not all(type(v) is int and 1 <= v <= 8 for v in values):
                raise ValueError(f"TuneSpace: num_stages must be ints from 1 to 8 (what a launch takes), got {values}")
            if name == "occupancy" and not all(v is None or type(v) is int and v in OCCUPANCIES for v in values):
                raise ValueError(f"TuneSpace: occupancy must be None or ints from 1 to 32, got {values}")
            if name == "backend" and not all(v in BACKENDS for v in values):
                raise ValueError(f"TuneSpace: backend must be among {', '.join(BACKENDS)}, got {values}")
        if self.key_dims is not None:
            if isinstance(self.key_dims, str) or not all(isinstance(d, str) for d in self.key_dims):
                raise ValueError(f"TuneSpace: key_dims must be a list of dim names (['M', 'N']), got "
                                 f"{self.key_dims!r}")
            self.key_dims = list(self.key_dims)
        for setting in ("budget_s", "max_candidates", "compile_timeout_s", "jobs"):
            v = getattr(self, setting)
            if setting == "jobs" and v is None:
                continue
            whole = setting in ("max_candidates", "jobs")
            if isinstance(v, bool) or not isinstance(v, int if whole else (int, float)) or not v > 0 \
                    or not math.isfinite(v):
                raise ValueError(f"TuneSpace: {setting} must be a positive {'int' if whole else 'number'}, got {v!r}")
        for setting in ("reference", "timer"):
            if getattr(self, setting) is not None and not callable(getattr(self, setting)):
                raise ValueError(f"TuneSpace: {setting} must be a function or None, got "
                                 f"{type(getattr(self, setting)).__name__}")
        if not isinstance(self.on_cpu, bool):
            raise ValueError(f"TuneSpace: on_cpu must be True or False, got {self.on_cpu!r}")
        return self

    @classmethod
    def coerce(cls, value) -> "TuneSpace":
        """A TuneSpace, or a dict of params with optional 'key_dims' and search settings among its keys."""
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            settings = {k: value[k] for k in ("key_dims", "budget_s", "max_candidates", "compile_timeout_s",
                                               "jobs", "reference", "timer", "on_cpu") if k in value}
            return cls({k: v for k, v in value.items() if k not in settings}, **settings)
        raise TypeError(f"a tuning space is a TuneSpace or a dict, not {type(value).__name__}")

    def validate(self, decl) -> "TuneSpace":
        """Check the names and value types against a kernel declaration (tle.ast.Kernel)."""
        consts = {c.name: c.kind for c in decl.const_params}
        read_off = sorted({p.type.dtype for p in decl.params if hasattr(p.type, "dims")} & set(self.params))
        if read_off:  # T: dtype of tensor<T>: a launch reads it off the tensors, whose type the trials cannot change
            raise ValueError(f"TuneSpace: kernel '{decl.name}' reads {', '.join(read_off)} off its tensors' "
                             f"dtypes, so it cannot be tuned: the arguments fix it")
        dims = {d.id for p in decl.params for d in getattr(p.type, "dims", ()) if hasattr(d, "id")}
        unknown = [d for d in (self.key_dims or ()) if d not in dims]
        if unknown:
            raise ValueError(f"TuneSpace.key_dims: kernel '{decl.name}' has no symbolic dim "
                             f"{', '.join(repr(d) for d in unknown)} (its dims: {', '.join(sorted(dims)) or 'none'})")
        for name, values in self.params.items():
            if name in OPTIONS:
                continue
            kind = consts.get(name)
            if kind is None:
                raise ValueError(f"TuneSpace: kernel '{decl.name}' has no compile-time constant '{name}' "
                                 f"(constants: {', '.join(consts) or 'none'}; options: {', '.join(OPTIONS)})")
            from ..types import canonical
            ok = {"int": lambda v: type(v) is int, "bool": lambda v: type(v) is bool,
                  "float": lambda v: type(v) in (int, float),
                  "dtype": lambda v: isinstance(v, str) and canonical(v) is not None}[kind]
            bad = [v for v in values if not ok(v)]
            if bad:
                raise ValueError(f"TuneSpace: '{name}' is a {kind} constant; got {bad}")
        return self

    def configs(self, params: dict | None = None) -> list[dict]:
        params = self.params if params is None else params
        names = list(params)
        return [dict(zip(names, combo)) for combo in itertools.product(*(params[n] for n in names))]


def _values(name, values) -> list:
    """A space's values as a list of plain Python values: a list, tuple, range or numpy array gives its elements
    (numpy scalars become ints, floats, bools), any other single value is a list of one. A set is refused: its
    order is arbitrary, and the first value is the base configuration when the default is not among them."""
    if isinstance(values, (set, frozenset, dict)):
        raise ValueError(f"TuneSpace: {name}: give the values as a list, not a {type(values).__name__}")
    if hasattr(values, "tolist") and not isinstance(values, (str, bytes)):  # a numpy array (or scalar)
        values = values.tolist()
    if not isinstance(values, (list, tuple, range)):
        values = [values]
    return [v.item() if type(v).__module__ == "numpy" and hasattr(v, "item") else v for v in values]


def _ckey(config: dict) -> tuple:
    return tuple(config.items())


def _show(config: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items())


# ---- the database ------------------------------------------------------------------------------------------------
SCHEMA = """
CREATE TABLE IF NOT EXISTS tuned (
    key TEXT PRIMARY KEY,       -- sha256 of the key columns below, as sorted JSON
    kernel TEXT NOT NULL,       -- kernel name
    fingerprint TEXT NOT NULL,  -- hash of the texts of the .tle file and its imports (source_fingerprint)
    fixed TEXT NOT NULL,        -- JSON: constants and launch options that were not tuned
    shape TEXT NOT NULL,        -- JSON: dim -> bucket
    spec TEXT NOT NULL,         -- specialisation facts: arguments divisible by 16, unit strides
    dtypes TEXT NOT NULL,       -- JSON: parameter -> element type
    device TEXT NOT NULL,       -- GPU name ("cpu" on the interpreter)
    capability TEXT NOT NULL,   -- sm_90, ...
    tle_version TEXT NOT NULL,
    backend_versions TEXT NOT NULL,
    space TEXT NOT NULL,        -- hash of the tuned parameters and their values
    config TEXT NOT NULL,       -- JSON: the best configuration
    time_s REAL NOT NULL,       -- its median time
    default_time_s REAL,        -- the default configuration's median time (NULL if it did not run)
    exact_shape TEXT NOT NULL,  -- JSON: the dims the tuning ran on
    stats TEXT NOT NULL,        -- JSON: space size, candidates, compiled, timed, measurements, seconds, pruned
    created TEXT NOT NULL       -- ISO 8601, UTC
);
"""
KEY_COLUMNS = ("kernel", "fingerprint", "fixed", "shape", "spec", "dtypes", "device", "capability", "tle_version",
               "backend_versions", "space")
COLUMNS = ("key",) + KEY_COLUMNS + ("config", "time_s", "default_time_s", "exact_shape", "stats", "created")

SCHEMA_VERSION = 1  # PRAGMA user_version of a database this module made; 0: made before it was set (same table)
# How long SQLite waits for another process's lock: reads (in WAL mode a writer does not block them: they wait only
# in rare moments such as another process recovering the journal after a crash), opening and making the file, and
# the writes of an explicit tuning (kernel.tune, tlec tune), store() and import_(), whose caller asked for the
# result to be kept (a tuning that cost up to its budget_s) and would rather wait than lose it.
BUSY_TIMEOUT_S = 60.0
# How long a launch that tuned waits to write its result. A healthy writer holds the lock for milliseconds (one row:
# 4 ms median, 14 ms at worst over 200 writes on an ext4 disk; an import of 10,000 rows: 0.9 s), so a lock held
# 2 s is a transaction that will not end soon (an interactive `sqlite3` shell inside BEGIN, a stopped process).
# The launch then warns and goes on with its result, rather than stalling the program for a minute, and every
# thread of this process that asks the database with it (they share one connection).
LAUNCH_WRITE_WAIT_S = 2.0


@dataclass
class _Connection:
    """A database's connection in this process, and whether it was opened read-only (lookups only: no write is
    tried on it)."""
    conn: sqlite3.Connection
    read_only: bool


_connections: dict = {}  # (absolute path, pid) -> _Connection
_db_lock = threading.Lock()
_warned: set = set()


class TuneDBError(TuneError):
    """The tuning database cannot be opened, read or written; the message names the file and what to do."""


class TuneImportError(TuneError, ValueError):
    """A file given to import_() cannot be imported (nothing of it was); a ValueError, as it always was."""


def db_path() -> str:
    if os.environ.get("TLE_TUNE_DB"):
        return os.environ["TLE_TUNE_DB"]
    root = os.environ.get("TLE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tle")
    return os.path.join(root, "tuning.sqlite")


def _db_error(path: str, e: Exception, waited_s: float) -> TuneDBError:
    why = str(e) or type(e).__name__
    if isinstance(e, sqlite3.DatabaseError) and "not a database" in why:
        why = "the file is not an SQLite database (garbage or truncated)"
    elif "locked" in why:
        return TuneDBError(f"tuning database {path}: another process held it locked for {waited_s:g} s; set "
                           "TLE_TUNE_DB to another file if that lasts")
    return TuneDBError(f"tuning database {path}: {why}; move it away, or set TLE_TUNE_DB to another file")


@contextlib.contextmanager
def _using(path: str | None = None, write_wait_s: float | None = None):
    """The connection of the database at `path` (default db_path()), opened on first use, for one read or one
    write transaction under this process's lock. Every SQLite or OS error, opening it or in the block, leaves as a
    TuneDBError naming the file (_db_error). With `write_wait_s` the block writes: a database opened read-only is
    refused before anything is tried, and the block waits that long for another process's lock (the busy timeout
    is set for the block and put back after it), where a read waits BUSY_TIMEOUT_S."""
    path = path or db_path()
    waited_s = BUSY_TIMEOUT_S
    with _db_lock:
        try:
            entry = _connection(path)
            if write_wait_s is not None:
                if entry.read_only:
                    raise TuneDBError(f"tuning database {path} is read-only here (lookups only); set TLE_TUNE_DB to a "
                                      "file you can write to store results")
                waited_s = write_wait_s
            if waited_s != BUSY_TIMEOUT_S:
                entry.conn.execute(f"PRAGMA busy_timeout = {round(waited_s * 1000)}")
            try:
                yield entry.conn
            finally:
                if waited_s != BUSY_TIMEOUT_S:
                    entry.conn.execute(f"PRAGMA busy_timeout = {round(BUSY_TIMEOUT_S * 1000)}")
        except (sqlite3.Error, OSError) as e:
            raise _db_error(path, e, waited_s) from None


def _connection(path: str) -> _Connection:
    """One connection per database file and process, opened on first use (_open). Errors are raised as they come:
    _using names the file."""
    key = (os.path.abspath(path) if path != ":memory:" else path, os.getpid())
    entry = _connections.get(key)
    if entry is None:
        entry = _connections[key] = _open(path)
    return entry


def _db(path: str | None = None) -> sqlite3.Connection:
    """The connection of the database at `path` (default db_path()): WAL journal and a BUSY_TIMEOUT_S busy timeout
    when the file can be written; read-only (lookups only) when it cannot. Errors name the file (TuneDBError)."""
    with _using(path) as conn:
        return conn


def _writable(path: str) -> bool:
    """Can this process write the database (and its -wal and -shm files, beside it)?"""
    if path == ":memory:":
        return True
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.exists(path):
        return os.access(path, os.W_OK) and os.access(folder, os.W_OK | os.X_OK)
    return True  # made below; makedirs and connect say why not


def _open(path: str) -> _Connection:
    if os.path.isdir(path):
        raise TuneDBError(f"tuning database {path} is a directory; set TLE_TUNE_DB to a file")
    if path != ":memory:" and os.path.exists(path) and not os.access(path, os.R_OK):
        raise TuneDBError(f"tuning database {path} cannot be read (permissions); fix them, or set TLE_TUNE_DB to "
                          "another file")
    if not _writable(path):
        # read-only: no journal switch and no CREATE, which would fail; mode=ro still needs the -shm file of a WAL
        # database, which a read-only folder may lack, so immutable=1 (no locking: nobody can write it here) is the
        # fallback
        for mode in ("mode=ro", "mode=ro&immutable=1"):
            conn = sqlite3.connect(f"file:{os.path.abspath(path)}?{mode}", uri=True, timeout=BUSY_TIMEOUT_S,
                                   check_same_thread=False)
            try:
                _check_schema(conn, path)
                return _Connection(conn, read_only=True)
            except sqlite3.OperationalError:
                conn.close()
        raise TuneDBError(f"tuning database {path} is read-only and cannot be opened for reading either; set "
                          "TLE_TUNE_DB to another file")
    folder = os.path.dirname(os.path.abspath(path))
    if path != ":memory:":
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            raise TuneDBError(f"tuning database {path}: cannot make its folder {folder} ({e.strerror}); set "
                              "TLE_TUNE_DB to a file in a folder you can write") from None
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {round(BUSY_TIMEOUT_S * 1000)}")
    _while_locked(lambda: conn.execute("PRAGMA journal_mode = WAL"))

    def create():
        with conn:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'tuned'").fetchone():
                conn.executescript(SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    _while_locked(create)
    _check_schema(conn, path)
    return _Connection(conn, read_only=False)


def _check_schema(conn, path: str) -> None:
    """A database made by another version of this module (another table, a newer schema) is refused, not misread."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    columns = tuple(r[1] for r in conn.execute("PRAGMA table_info(tuned)"))
    if version not in (0, SCHEMA_VERSION) or (columns and columns != COLUMNS):
        raise TuneDBError(f"tuning database {path} has another schema (version {version}, columns "
                          f"{', '.join(columns) or 'none'}): written by another tle? Move it away, or set "
                          "TLE_TUNE_DB to another file")


def _while_locked(step):
    """Run `step`, again while SQLite says the database is locked (for BUSY_TIMEOUT_S). Switching a new file to WAL
    can fail at once with "database is locked", without waiting out busy_timeout, when another process opens the
    same new file at the same moment (tests/tuning/test_db.py::test_two_processes_write_at_once, under load)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return step()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _warn_once(message: str) -> None:
    """A database problem is told once per process (every launch of a new bucket would hit it again)."""
    if message not in _warned:
        _warned.add(message)
        import warnings
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def make_key(fields: dict) -> str:
    return hashlib.sha256(json.dumps({k: fields[k] for k in KEY_COLUMNS}, sort_keys=True).encode()).hexdigest()


def lookup_key(key: str, db: str | None = None) -> dict | None:
    """The row stored under `key`, or None. One indexed SELECT."""
    with _using(db) as conn:
        row = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM tuned WHERE key = ?", (key,)).fetchone()
    return _row(row) if row else None


def _row(row) -> dict:
    out = dict(zip(COLUMNS, row))
    for k in ("config", "stats"):
        try:
            out[k] = json.loads(out[k])
        except (TypeError, ValueError):
            out[k] = None  # a row written by hand: _list shows it, a lookup refuses it (_usable)
    return out


def store(row: dict, db: str | None = None, wait_s: float = BUSY_TIMEOUT_S) -> None:
    """INSERT OR REPLACE one row in its own transaction, waiting up to `wait_s` for another process's lock (a
    launch passes LAUNCH_WRITE_WAIT_S); a TuneDBError after that."""
    _store([row], db, wait_s)


def _store(rows_: list, db: str | None = None, wait_s: float = BUSY_TIMEOUT_S) -> None:
    """Write rows in one transaction: all or none."""
    with _using(db, write_wait_s=wait_s) as conn, conn:
        for row in rows_:
            values = [json.dumps(row[c], sort_keys=True) if c in ("config", "stats") else row.get(c) for c in COLUMNS]
            conn.execute(f"INSERT OR REPLACE INTO tuned ({', '.join(COLUMNS)}) VALUES "
                         f"({', '.join('?' * len(COLUMNS))})", values)


def rows(kernel: str | None = None, db: str | None = None) -> list[dict]:
    sql = f"SELECT {', '.join(COLUMNS)} FROM tuned" + (" WHERE kernel = ?" if kernel else "") + " ORDER BY created"
    with _using(db) as conn:
        return [_row(r) for r in conn.execute(sql, (kernel,) if kernel else ())]


def export(path: str, db: str | None = None) -> int:
    """Write every row as JSON ({"tle_tuning": 1, "rows": [...]}); return how many."""
    data = rows(db=db)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"tle_tuning": 1, "rows": data}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise TuneError(f"cannot write the export to {path}: {e.strerror or e}") from None
    return len(data)


def _bad_row(r) -> str | None:
    """Why an imported row cannot be stored, or None."""
    if not isinstance(r, dict):
        return f"a row must be an object, not {type(r).__name__}"
    missing = [c for c in COLUMNS if c not in r and c != "default_time_s"]
    if missing:
        return f"it lacks {', '.join(missing)}"
    extra = sorted(set(r) - set(COLUMNS))
    if extra:
        return f"unknown field{'s' if len(extra) > 1 else ''} {', '.join(extra)}"
    strings = [c for c in ("key",) + KEY_COLUMNS + ("exact_shape", "created") if not isinstance(r[c], str)]
    if strings:
        return f"{', '.join(strings)} must be strings"
    if not isinstance(r["config"], dict) or not r["config"] or not all(
            isinstance(k, str) and k.isidentifier() and (v is None or type(v) in (int, float, bool, str))
            for k, v in r["config"].items()):
        return "config must be an object of parameter names to numbers, booleans, strings or null"
    for c in ("time_s", "default_time_s"):
        v = r.get(c)
        if (v is not None or c == "time_s") and not (type(v) in (int, float) and math.isfinite(v) and v > 0):
            return f"{c} must be a positive finite number, got {v!r}"
    if r["stats"] is not None and not isinstance(r["stats"], dict):
        return "stats must be an object or null"
    if make_key(r) != r["key"]:
        return "its key does not match its key columns"
    return None


def import_(path: str, db: str | None = None) -> int:
    """Store the rows of a file written by export(), all or none; return how many were stored.

    Every row is checked first (fields, types, its key against its key columns); one bad row refuses the whole
    file, naming the row. A key twice in the file: the faster row is taken (then the newer). A key already in the
    database keeps the faster of the two results: an import never replaces a faster local result with a slower
    one (said on stderr when it keeps the local one)."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise TuneImportError(f"cannot import {path}: {why}") from None
    if not isinstance(data, dict) or data.get("tle_tuning") != 1 or type(data.get("tle_tuning")) is not int \
            or not isinstance(data.get("rows"), list):
        raise TuneImportError(f"cannot import {path}: not a tle tuning export ({{\"tle_tuning\": 1, \"rows\": [...]}})")
    chosen: dict = {}
    for i, r in enumerate(data["rows"]):
        why = _bad_row(r)
        if why:
            name = r.get("kernel") if isinstance(r, dict) else None
            shown = f"row {i}" + (f" ({name})" if isinstance(name, str) else "")
            raise TuneImportError(f"cannot import {path}: {shown}: {why}; nothing was imported")
        if r["stats"] is None:
            r = {**r, "stats": {}}
        old = chosen.get(r["key"])
        if old is None or _better(r, old):
            chosen[r["key"]] = r
    kept = []
    for key, r in list(chosen.items()):
        local = lookup_key(key, db)
        if local is not None and local.get("time_s") and not _better(r, local):
            kept.append(r["kernel"])
            del chosen[key]
    if kept:
        print(f"tle: import {path}: kept {len(kept)} local result{'s' if len(kept) > 1 else ''} faster than (or as "
              f"fast as and newer than) the file's ({', '.join(sorted(set(kept)))})", file=sys.stderr)
    _store(list(chosen.values()), db)
    return len(chosen)


def _better(a: dict, b: dict) -> bool:
    """Of two results of one key: the faster; at equal times, the newer."""
    return (a["time_s"], str(b["created"])) < (b["time_s"], str(a["created"]))


def lookup(kernel, *args, grid=None, **kwargs) -> dict | None:
    """The stored result for launching `kernel[grid](*args, **kwargs)` (its shape bucket), or None (also for a kernel
    with no tuning space: nothing of it was tuned). A fixed grid (a tuple) is part of the key, so give the one the
    launch used; a callable grid keys as no grid (the default), since it follows the configuration. `grid` is a
    keyword, as the launch's grid is no argument: a kernel parameter named `grid` is given by position, as
    `kernel[grid](...)` and kernel.tune() take it."""
    if kernel.tune_space is None:
        return None
    return lookup_key(_Launch(kernel, grid, args, kwargs).key)


# ---- the launch being tuned: binding, key, bucket ------------------------------------------------------------------
def bucket(size: int) -> int:
    """Dims up to 64 exactly; larger ones rounded up to a power of two."""
    return size if size <= 64 else 1 << (size - 1).bit_length()


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _device_info(device) -> tuple[str, str]:
    """(GPU name, compute capability); ("cpu", "cpu") for the interpreter on CPU tensors."""
    if device is None or device.type != "cuda":
        return "cpu", "cpu"
    import torch
    major, minor = torch.cuda.get_device_capability(device)
    return torch.cuda.get_device_name(device), f"sm_{major}{minor}"


def _backend_versions(backends) -> str:
    out = []
    if {"triton", "auto"} & set(backends):
        from ..targets.triton import triton_version
        out.append(f"triton={triton_version()}")
    if {"tileir", "auto"} & set(backends):
        from ..targets.tileir import tileiras_version
        try:
            out.append(f"tileiras={tileiras_version()}")
        except Exception:  # noqa: BLE001 - no tileiras here: auto routes to Triton
            out.append("tileiras=none")
    if "interp" in backends:
        out.append("interp")
    return ";".join(out)


def source_fingerprint(program) -> str:
    """A hash of the texts of the kernel's file and of every file it imports, without their paths: the same kernel
    reached as `examples/x.tle`, `/abs/.../x.tle` or `../x.tle` (tlec tune and tle.compile in other folders) shares
    its results; an edit of any of those files is a new key. (runtime.kernel.program_fingerprint, the binary
    cache's, also hashes the path.)"""
    from .kernel import program_texts
    texts = program_texts(program)
    h = hashlib.sha256()
    for t in sorted(texts):
        h.update(hashlib.sha256(t.encode()).digest())
    return h.hexdigest()[:40]


def _fixed_grid(grid) -> tuple:
    """A fixed grid as the launch sees it: ints, trailing 1s dropped ((8,), (8, 1) and 8 are one grid)."""
    dims = list(grid)
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    return tuple(dims)


class _Launch:
    """One launch's arguments, bound and checked once: the tuned parameters left after what the caller pinned, the
    fixed constants and options, dims, specialisation, device and the database key."""

    def __init__(self, kernel, grid, args, kwargs):
        from ..check import check_kernel
        space = kernel.tune_space
        if space is None:
            raise TuneError(f"kernel '{kernel.name}' has no tuning space (set kernel.tune_space)")
        space.check().validate(kernel.decl)  # its settings may have been changed since it was attached
        self.kernel, self.grid, self.args, self.kwargs, self.space = kernel, grid, args, dict(kwargs), space
        values, constants, options = kernel._bind(args, dict(kwargs))
        self.params = {k: v for k, v in space.params.items() if k not in kwargs}
        fixed = {**{k: v for k, v in constants.items() if k not in self.params},
                 **{k: v for k, v in options.items() if k not in self.params}}
        if "backend" not in self.params:
            fixed.setdefault("backend", kernel.backend)
        self.fixed = fixed
        fixed_consts = {k: v for k, v in fixed.items() if k not in OPTIONS}
        tuned_consts = [k for k in self.params if k not in OPTIONS]
        try:  # the declared defaults of the tuned constants
            checked = check_kernel(kernel.program, kernel.name, fixed_consts)
            defaults = {k: checked.constants[k] for k in tuned_consts}
        except TleError:
            checked = check_kernel(kernel.program, kernel.name,
                                   {**fixed_consts, **{k: self.params[k][0] for k in tuned_consts}})
            defaults = {}
        defaults.update(DEFAULT_OPTIONS, num_warps=default_num_warps(checked), backend=kernel.backend)
        self.base = {k: defaults[k] if defaults.get(k) in vals else vals[0] for k, vals in self.params.items()}
        self.values, self.fixed_consts = values, fixed_consts
        flat, self.device, self.dims = kernel._check_args(checked, values)
        self.spec = kernel._spec(checked, flat)
        self.on_gpu = self.device is not None and self.device.type == "cuda"
        key_dims = space.key_dims if space.key_dims is not None else sorted(self.dims)
        unknown = [d for d in key_dims if d not in self.dims]
        if unknown:
            raise TuneError(f"TuneSpace.key_dims: kernel '{kernel.name}' has no symbolic dim "
                            f"{', '.join(unknown)} (dims: {', '.join(self.dims)})")
        backends = self.params["backend"] if "backend" in self.params else [fixed["backend"]]
        device, capability = _device_info(self.device)
        dtypes = {p.name: p.type.dtype for p in checked.params}
        # The key holds what decides the result, each written one way: every constant that is not tuned with its
        # value (a default given explicitly is the default), options left at None are absent, a fixed grid (a
        # tuple, not a function of the constants) is part of it (which configurations cover the problem depends
        # on it), and the space is hashed with its names and values sorted.
        key_fixed = {**{k: v for k, v in checked.constants.items() if k not in self.params},
                     **{k: v for k, v in fixed.items() if k in OPTIONS and v is not None}}
        if options.get("asserts"):
            key_fixed["asserts"] = True
        if grid is not None and not callable(grid):
            key_fixed["grid"] = list(_fixed_grid(kernel._grid(grid, {})))  # checked as a launch checks it
        space_text = json.dumps({k: sorted(json.dumps(v, default=str) for v in vals)
                                 for k, vals in self.params.items()}, sort_keys=True)
        self.fields = {
            "kernel": kernel.name, "fingerprint": source_fingerprint(kernel.program),
            "fixed": json.dumps(key_fixed, sort_keys=True, default=str),
            "shape": json.dumps({d: bucket(self.dims[d]) for d in key_dims}, sort_keys=True),
            # Without the 8/4/2 divisibility of dims and strides, the launch facts and the overlapping tensors
            # (tle/abi.py): sizes of one bucket that differ only there share a result, as they would have before
            # those facts; the timing uses this launch's facts.
            "spec": dataclasses.replace(self.spec, divisible=frozenset(), inside=frozenset(),
                                        aliases=frozenset()).key(),
            "dtypes": json.dumps(dtypes, sort_keys=True),
            "device": device, "capability": capability,
            # tle's release version alone, not runtime.cache.build_id (the version plus a hash of tle's own source):
            # a tuned configuration stays a valid, checked choice when the compiler is edited, and a development
            # checkout would otherwise tune every bucket again after each edit of any tle file (minutes each).
            # A release retunes; within one, `--force` / tune(force=True) retunes after a change to the lowering.
            "tle_version": TLE_VERSION,
            "backend_versions": _backend_versions(["interp" if b == "auto" and not self.on_gpu else b
                                                   for b in backends]),
            "space": hashlib.sha256(space_text.encode()).hexdigest()[:16],
        }
        self.key = make_key(self.fields)


_key_locks: dict = {}  # tuning key -> the lock its tuning holds in this process
_key_locks_lock = threading.Lock()


def _key_lock(key: str) -> threading.Lock:
    """Threads of one process launching the same new bucket: one tunes, the others wait for it and reuse its result
    (processes are not serialised: both tune, docs/tuning.md)."""
    with _key_locks_lock:
        return _key_locks.setdefault(key, threading.Lock())


def _stored(launch) -> dict | None:
    """The database row of this launch's key, or None; a database that cannot be read is warned about, once, and
    the launch tunes (its result is then kept in this process only)."""
    try:
        row = lookup_key(launch.key)
    except TuneDBError as e:
        _warn_once(f"tle: {e}; tuning '{launch.kernel.name}' without its stored results")
        return None
    if row is not None and not (isinstance(row["config"], dict) and set(row["config"]) == set(launch.params)):
        _warn_once(f"tle: tuning database {db_path()}: the row of '{launch.kernel.name}' (key {launch.key[:12]}) "
                   f"holds config {row['config']!r}, not values of {', '.join(launch.params)}: tuning again")
        return None
    return row


def configure(kernel, grid, args, kwargs) -> dict:
    """The launch hook: kwargs with the best configuration of this launch's bucket merged in (tuning if needed)."""
    launch = _Launch(kernel, grid, args, kwargs)
    if not launch.params or not (launch.on_gpu or launch.space.on_cpu):
        return kwargs  # nothing left to tune, or the interpreter (TuneSpace.on_cpu)
    config = kernel._tuned.get(launch.key)
    if config is None:
        with _key_lock(launch.key):
            config = kernel._tuned.get(launch.key)  # tuned by another thread while this one waited
            if config is None:
                row = _stored(launch)
                # a launch waits only briefly to store its tuning (LAUNCH_WRITE_WAIT_S); kernel.tune() and tlec tune,
                # which were asked for the result, wait as a read does
                config = row["config"] if row is not None else tune(launch, LAUNCH_WRITE_WAIT_S).config
                kernel._tuned[launch.key] = config
    return {**kwargs, **config}


# ---- the cost model ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hardware:
    sms: int  # multiprocessors
    smem: int  # shared memory per block, opt-in maximum (bytes)
    flops: float  # dense f16 matrix rate (for ranking only)
    bandwidth: float  # device memory bytes/s (for ranking only)


HARDWARE = {  # by architecture, when no GPU can be asked (CPU tests, tlec); a real GPU reports its own SMs and smem
    "sm_80": Hardware(108, 166912, 312e12, 2.0e12),
    "sm_86": Hardware(84, 101376, 140e12, 0.9e12),
    "sm_89": Hardware(128, 101376, 330e12, 1.0e12),
    "sm_90": Hardware(132, 232448, 989e12, 4.8e12),
    "sm_100": Hardware(148, 232448, 2250e12, 8.0e12),
    "sm_120": Hardware(170, 101376, 400e12, 1.8e12),
}


def hardware_of(device, arch: str) -> Hardware | None:
    if device is None or device.type != "cuda":
        return None
    import torch
    props = torch.cuda.get_device_properties(device)
    base = HARDWARE.get(arch, HARDWARE["sm_90"])
    smem = getattr(props, "shared_memory_per_block_optin", 0) or base.smem
    return Hardware(props.multi_processor_count, smem, base.flops, base.bandwidth)




@dataclass
class Facts:
    """What the cost model reads off one configuration's checked kernel (per program unless noted)."""
    programs: int = 1
    flops: float = 0.0  # dot flops
    bytes: float = 0.0  # bytes loaded and stored
    smem: int = 0  # estimated shared memory: stages * (tiles loaded per iteration) of loops with a dot, plus the
    #                tiles stored with tma=true (a descriptor store stages its tile in shared memory)
    carried_regs: float = 0.0  # 32-bit registers of loop-carried tiles (accumulators), whole program
    max_tile: int = 1  # elements of the largest tile
    overshoot: float = 1.0  # largest (tile dim / max(16, next_pow2(problem dim))); > 1: the tile exceeds the problem
    has_dot: bool = False
    free_loops: bool = False  # a loop without pipeline(stages=): num_stages matters
    stages_staged: bool = False  # a dot loop with pipeline(stages=) that loads more than its dot's operands: whether
    #                              num_stages equals its depth decides whether those loads are staged too
    launched: int = 1  # programs the grid gives (0: the launch runs nothing)
    grid: tuple = ()  # the grid
    written: set = field(default_factory=set)  # tensors stored, scattered or updated atomically
    read: set = field(default_factory=set)
    atomics: bool = False


def _static(e, dims, grid=None, lets=None):
    """The value of a scalar expression of constants, dims, num_programs (when the grid is known) and the lets
    among `lets` (variable -> its value's expression), or None."""
    from ..typed import Const, Dim, Op, Read
    if isinstance(e, Read) and lets is not None and e.var in lets:
        return _static(lets[e.var], dims, grid, lets)
    if isinstance(e, Const):
        return e.value if isinstance(e.value, (int, float)) and not isinstance(e.value, bool) else None
    if isinstance(e, Dim):
        return dims.get(e.name)
    if isinstance(e, Op) and e.name == "num_programs":
        return grid[e.attrs["axis"]] if grid is not None and e.attrs["axis"] < len(grid) else None
    if isinstance(e, Op) and len(e.args) == 2:
        a, b = (_static(x, dims, grid, lets) for x in e.args)
        if a is None or b is None:
            return None
        ops = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "min": lambda: min(a, b),
               "max": lambda: max(a, b), "div": lambda: a // b if b else None, "cdiv": lambda: -(-a // b) if b else None}
        return ops[e.name]() if e.name in ops else None
    return None


def analyze(checked, dims: dict, num_stages: int = 3, grid: tuple | None = None) -> Facts:
    """Walk a checked kernel (tle.typed.Kernel) and collect the Facts above. With the launch grid, a persistent
    loop (range(program_id(a), stop, num_programs(a))) counts the trips of an average program."""
    from ..typed import Bind, Eval, For, If, Op
    from ..types import Tile
    f = Facts()

    def elems(t):
        return math.prod(t.shape) if isinstance(t, Tile) else 1

    def overshoot(tile, tensor):
        if len(tile) != len(tensor.type.dims):
            return
        for t, d in zip(tile, tensor.type.dims):
            size = d if isinstance(d, int) else dims.get(d)
            if size:
                f.overshoot = max(f.overshoot, t / max(16, next_pow2(size)))

    def expr(e, trips, loop):
        if not isinstance(e, Op):
            return
        for a in e.args:
            expr(a, trips, loop)
        if e.name in ("load", "gather"):
            b = elems(e.type) * BYTES[e.type.dtype]
            f.bytes += b * trips
            f.read.add(e.tensor.param.name)
            if loop is not None:
                loop["loads"] += b
            if e.name == "load":
                overshoot(e.attrs.get("tile", e.type.shape), e.tensor)
        elif e.name in ("store", "scatter", "atomic"):
            n = max(elems(a.type) for a in e.args if a.type is not None)
            f.bytes += n * BYTES[e.tensor.type.dtype] * trips
            f.written.add(e.tensor.param.name)
            f.atomics |= e.name == "atomic"
            if e.name == "store" and isinstance(e.args[0].type, Tile):
                overshoot(e.args[0].type.shape, e.tensor)
                if e.attrs.get("tma") and len(e.args[0].type.shape) == 2:
                    staged.add((id(e), elems(e.args[0].type) * BYTES[e.tensor.type.dtype]))
        elif e.name == "dot":
            (m, k), n = e.args[0].type.shape[-2:], e.args[1].type.shape[-1]
            f.flops += 2.0 * m * n * k * trips
            f.has_dot = True
            if loop is not None:
                loop["dot"] = True

    lets = {}  # immutable variable -> the expression bound to it, for loop bounds written through lets
    staged = set()  # (store, bytes) of the 2-D tiles stored with tma=true (counted once, not per trip)

    def block(stmts, trips, loop):
        for s in stmts:
            if isinstance(s, Bind):
                if not s.var.mutable:
                    lets[s.var] = s.value
                expr(s.value, trips, loop)
            elif isinstance(s, Eval):
                expr(s.expr, trips, loop)
            elif isinstance(s, If):
                expr(s.cond, trips, loop)
                block(s.then, trips, loop)
                block(s.orelse, trips, loop)
            elif isinstance(s, For):
                start, stop, step = (_static(x, dims, grid, lets) for x in (s.start, s.stop, s.step))
                if start is None and isinstance(s.start, Op) and s.start.name == "program_id":
                    start = 0  # a program's first tile; stop and step decide how many it takes
                n = max(0, -(-(stop - start) // step)) if None not in (start, stop, step) and step > 0 else 1
                inner = {"loads": 0, "dot": False}
                block(s.body, trips * n, inner)
                if s.stages is None:
                    f.free_loops = True
                elif _loads_beside_dot(s.body, lets):
                    f.stages_staged = True
                if inner["dot"]:
                    f.smem = max(f.smem, (s.stages or num_stages) * inner["loads"])
                f.carried_regs = max(f.carried_regs, sum(elems(v.type) * BYTES[v.type.dtype] / 4
                                                         for v in s.carried if isinstance(v.type, Tile)))
                if loop is not None:
                    loop["loads"] += inner["loads"]
                    loop["dot"] |= inner["dot"]

    block(checked.body, 1, None)
    f.smem += sum(b for _, b in staged)
    f.max_tile = largest_tile(checked)
    return f


def _loads_beside_dot(body, lets: dict) -> bool:
    """Does a loop body that holds a dot (among its own statements, as lowering/tle_to_ttir.py's _holds_dot sees
    it) also load a tile that no dot operand is computed from? The native path then stages that load as well when
    the kernel-wide num_stages differs from the loop's pipeline(stages=) (tle_to_ttir's _for), and not when it
    equals it: two binaries, which R0 must not merge. `lets`: immutable variable -> its bound expression."""
    from ..typed import Bind, Eval, If, Op, Read, nodes
    assigned: dict = {}  # var -> every value the body binds to it, its ifs included (a `var` may be reassigned)

    def binds(stmts):
        for s in stmts:
            if isinstance(s, Bind):
                assigned.setdefault(s.var, []).append(s.value)
            elif isinstance(s, If):
                binds(s.then)
                binds(s.orelse)
    binds(body)

    def ops(e, seen):  # the Ops an expression is computed from, through the variables it reads
        if isinstance(e, Read) and e.var not in seen:
            seen.add(e.var)
            for value in assigned.get(e.var) or ([lets[e.var]] if e.var in lets else []):
                yield from ops(value, seen)
        elif isinstance(e, Op):
            yield e
            for a in e.args:
                yield from ops(a, seen)
    own = [o for o in nodes([s for s in body if isinstance(s, (Bind, Eval))]) if isinstance(o, Op)]  # not nested
    dots = [o for o in own if o.name == "dot"]
    if not dots:
        return False
    feeding = {id(o) for d in dots for a in d.args[:2] for o in ops(a, set())}
    return any(o.name in ("load", "gather") and id(o) not in feeding for o in own)


def grid_of(grid, meta) -> tuple:
    """The launch grid as a tuple of ints (a callable grid is called with the constants and dims)."""
    if callable(grid):
        grid = grid(meta)
    if isinstance(grid, int):
        grid = (grid,)
    return tuple(int(g) for g in grid)


def programs_of(grid, meta) -> int:
    return max(1, math.prod(grid_of(grid, meta)))


def predicted_time(f: Facts, threads: int | None, hw: Hardware) -> float:
    """A rough roofline per program times the waves it takes (only used to rank configurations)."""
    occ = hw.smem // max(f.smem, 1)
    if threads:
        occ = min(occ, 2048 // threads, 65536 // (threads * (f.carried_regs / threads + 32)))
    occ = max(1, min(occ, 32))
    per_program = max(f.flops / (hw.flops / hw.sms), f.bytes / (hw.bandwidth / hw.sms))
    return math.ceil(f.programs / (hw.sms * occ)) * occ * per_program


@dataclass
class Pruned:
    kept: list  # configs (dicts), ranked: the base first, then by predicted time
    dropped: dict  # rule -> number of configs it dropped
    facts: dict  # ckey -> Facts
    reasons: dict = field(default_factory=dict)  # rule -> the first message, where there is one (a check error)


def hint_only_constants(program, name: str) -> frozenset:
    """The compile-time constants of kernel `name` used only as `tma=` hints (in the kernel and in every fn of the
    program, which see the kernel's constants): the Tile IR path and the interpreter ignore those hints, so
    configurations that differ only there are one binary on them (rule R0). Any other use keeps a constant."""
    import dataclasses
    from .. import ast
    kernel = program.kernels[name]
    consts = {c.name for c in kernel.const_params}
    uses: dict = {}
    hints: dict = {}

    def walk(node, in_hint=False):
        if isinstance(node, ast.Name) and node.id in consts:
            uses[node.id] = uses.get(node.id, 0) + 1
            if in_hint:
                hints[node.id] = hints.get(node.id, 0) + 1
        if isinstance(node, (list, tuple)):
            for x in node:
                walk(x)
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            hint = isinstance(node, ast.Keyword) and node.name == "tma"
            for f in dataclasses.fields(node):
                walk(getattr(node, f.name), hint and f.name == "value")

    walk(kernel.body)
    for fn in program.fns.values():
        walk(fn.body)
    return frozenset(c for c, n in hints.items() if uses[c] == n)


def prune(program, name: str, configs: list, *, fixed_constants: dict, dims: dict, grid, hw: Hardware | None,
          fixed_backend: str = "triton", base: dict | None = None, max_candidates: int = 128,
          auto_route: str | None = None) -> Pruned:
    """The static rules of docs/tuning.md, in order. `hw` None (the interpreter) applies only rules R0 and R1.
    `auto_route` is the backend "auto" picks for this kernel ("tileir" or "triton"; see `route_of`): without it,
    "auto" configurations are kept as if every option mattered."""
    from ..check import check_kernel
    dropped: dict = {}
    checked_by_consts: dict = {}
    hint_only = hint_only_constants(program, name)
    facts: dict = {}
    threads_of: dict = {}
    errors: dict = {}
    reasons: dict = {}

    def drop(rule, n, why=None):
        if n:
            dropped[rule] = dropped.get(rule, 0) + n
            if why:
                reasons.setdefault(rule, why)

    # R0: one configuration per distinct binary: options a backend ignores are dropped, then duplicates
    seen, cands = set(), []
    for c in configs:
        consts = {**fixed_constants, **{k: v for k, v in c.items() if k not in OPTIONS}}
        ck = tuple(sorted(consts.items()))
        if ck not in checked_by_consts:
            try:
                checked_by_consts[ck] = check_kernel(program, name, consts)
            except TleError as e:
                checked_by_consts[ck] = None
                errors[ck] = str(e)
        checked = checked_by_consts[ck]
        if checked is None:
            drop("does not check", 1, f"{_show(c)}: {errors[ck]}")
            continue
        backend = c.get("backend", fixed_backend)
        if backend == "auto" and auto_route is not None:
            backend = auto_route
        stages = c.get("num_stages", DEFAULT_OPTIONS["num_stages"])
        meta = {**checked.constants, **dims}
        try:
            launch_grid = grid_of(grid, meta)
        except Exception as e:  # noqa: BLE001 - the grid function fails for this configuration: dropped, with why
            drop("grid fails", 1, f"{_show(c)}: the grid raised {type(e).__name__}: {e}")
            continue
        f = analyze(checked, dims, stages, launch_grid)
        ignored = ("num_warps", "num_stages", *hint_only) if backend == "tileir" else \
            ("num_warps", "num_stages", "occupancy", *hint_only) if backend == "interp" else \
            ("occupancy",) if f.free_loops or f.stages_staged else ("occupancy", "num_stages")
        k = _ckey({o: v for o, v in c.items() if o not in ignored})
        if k in seen:
            drop("R0 duplicate (option the backend ignores)", 1)
            continue
        seen.add(k)
        # The one kept of a group of duplicates carries the base's value of each ignored option (when it has one),
        # so that a result reads "num_warps=4" (the kernel's default) rather than the first value of the space,
        # which the binary never saw. The base itself therefore stands for its group.
        if base is not None:
            c = {o: (base[o] if o in ignored and o in base else v) for o, v in c.items()}
        f.programs, f.launched, f.grid = max(1, math.prod(launch_grid)), math.prod(launch_grid), launch_grid
        facts[_ckey(c)] = f
        threads_of[_ckey(c)] = (c.get("num_warps") or default_num_warps(checked)) * 32 if backend == "triton" else None
        cands.append(c)

    def rule(label, keep):
        nonlocal cands
        kept = [c for c in cands if keep(c) or c == base]
        drop(label, len(cands) - len(kept))
        cands = kept

    # R1: tiles far larger than the problem (a tile dim over max(16, next_pow2(dim))); the least bad stay if none fit
    least = min((facts[_ckey(c)].overshoot for c in cands), default=1.0)
    rule("R1 tile larger than the problem", lambda c: facts[_ckey(c)].overshoot <= max(1.0, least))
    if hw is not None:
        # R2: estimated shared memory over the device's per-block limit
        rule("R2 shared memory estimate over the limit", lambda c: facts[_ckey(c)].smem <= hw.smem)
        # R3: loop-carried tiles (accumulators) over 128 registers per thread: they would spill
        rule("R3 accumulator over 128 registers per thread",
             lambda c: threads_of[_ckey(c)] is None or facts[_ckey(c)].carried_regs / threads_of[_ckey(c)] <= 128)
        # R3b: more threads than the largest tile has elements: idle warps
        rule("R3b more threads than tile elements",
             lambda c: threads_of[_ckey(c)] is None or threads_of[_ckey(c)] <= facts[_ckey(c)].max_tile)
        # R4: under a quarter wave over the SMs, when some configuration fills a whole wave
        if any(facts[_ckey(c)].programs >= hw.sms for c in cands):
            rule("R4 under a quarter wave", lambda c: facts[_ckey(c)].programs * 4 >= hw.sms)
        # R5: dot kernels: under a quarter of the best arithmetic intensity (flops per byte moved) left
        dots = [facts[_ckey(c)] for c in cands if facts[_ckey(c)].has_dot and facts[_ckey(c)].bytes]
        if dots:
            best = max(f.flops / f.bytes for f in dots)
            rule("R5 arithmetic intensity under a quarter of the best",
                 lambda c: not facts[_ckey(c)].has_dot or facts[_ckey(c)].flops * 4 >= best * facts[_ckey(c)].bytes)
        cands.sort(key=lambda c: (c != base, predicted_time(facts[_ckey(c)], threads_of[_ckey(c)], hw)))
    else:
        cands.sort(key=lambda c: c != base)
    # R6: at most max_candidates, by predicted time
    drop("R6 over max_candidates (ranked by predicted time)", max(0, len(cands) - max_candidates))
    return Pruned(cands[:max_candidates], dropped, facts, reasons)


def route_of(program, name: str, constants: dict, arch: str) -> str:
    """The backend "auto" takes for this kernel on `arch` (tle/compiler.py `route`), decided once per tuning on the
    base configuration's constants: Tile IR legality depends on the ops a kernel uses and on the tools, not on tile
    sizes, so the other configurations are assumed to route alike. If one does not, its binary still compiles on
    the right path; only R0's merging of ignored options would have been off for it."""
    from ..compiler import compile_kernel, route
    try:
        module = compile_kernel(program, name, constants, stop="tle").module
        return route(module, name, arch, "auto")[0]
    except TleError:
        return "auto"


# ---- parallel compilation ------------------------------------------------------------------------------------------
def _send(stream, obj) -> None:
    data = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _recv_fd(fd: int):
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf
    (n,) = struct.unpack("<Q", exact(8))
    return pickle.loads(exact(n))


_WARM_UP = "kernel warm(x: tensor<f32>[N]) { store(x, load(x, tile=[32], at=[program_id(0)]), at=[program_id(0)]) }"


def _worker() -> None:
    """A compile process (compile_configs starts it): tasks from stdin, answers on the original stdout."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a compiler prints goes to stderr, never into the answers
    from tle.check import load_program
    from tle.compiler import compile_kernel
    try:  # the first compilation of a process loads the backend (seconds): not part of any task's time
        warm = load_program(_WARM_UP, "<warm-up>")
        compile_kernel(warm, "warm", {}, backend="triton", arch="sm_90")
    except Exception:  # noqa: BLE001 - no Triton here: the tasks will say so
        pass
    programs = {}
    _send(out, ("ready",))
    stdin = sys.stdin.buffer
    while True:
        head = stdin.read(8)
        if len(head) < 8:
            return
        (source, filename, name, constants, spec, backend, arch, num_warps, num_stages, occupancy) = \
            pickle.loads(stdin.read(struct.unpack("<Q", head)[0]))
        try:
            program = programs.get((filename, source))
            if program is None:
                program = programs[(filename, source)] = load_program(source, filename)
            compiled = compile_kernel(program, name, constants, spec, backend=backend, arch=arch,
                                      num_warps=num_warps, num_stages=num_stages, occupancy=occupancy)
            binary = compiled.binary
            if compiled.fallback:
                binary.extra["fallback"] = compiled.fallback
            _send(out, ("ok", binary.to_bytes()))
        except TleError as e:
            _send(out, ("error", str(e)))
        except Exception as e:  # noqa: BLE001 - a failing configuration is dropped, with its reason
            _send(out, ("error", f"{type(e).__name__}: {e}"))


@dataclass
class CompileTask:
    constants: dict
    spec: object  # tle.abi.Spec
    backend: str
    arch: str
    num_warps: int | None = None  # None: the kernel's default (tle.compiler.default_num_warps), as a launch has it
    num_stages: int | None = None  # None: the kernel's default (tle.compiler.default_num_stages)
    occupancy: int | None = None  # the Tile IR path's occupancy hint (None: the lowering's choice)


def compile_configs(source: str, filename: str, name: str, tasks: list, *, jobs: int | None = None,
                    timeout_s: float = 60.0, deadline: float | None = None):
    """Compile tasks in `jobs` worker processes; yield (index, status, payload) as each finishes: status "ok"
    (payload: Binary bytes), "error" (the message) or "timeout". A task over timeout_s is killed with its worker.
    At `deadline` (time.monotonic()) the rest is abandoned. Workers are killed when the generator closes."""
    jobs = max(1, min(jobs or max(1, (os.cpu_count() or 2) - 1), len(tasks)))
    queue = list(range(len(tasks)))
    queue.reverse()
    workers = []  # {"proc", "task", "started", "ready"}
    stderr = None if os.environ.get("TLE_DEBUG") else subprocess.DEVNULL

    def spawn():
        proc = subprocess.Popen([sys.executable, "-c", "from tle.runtime.tuning import _worker; _worker()"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        workers.append({"proc": proc, "task": None, "started": 0.0, "ready": False})

    def kill(w):
        w["proc"].kill()
        w["proc"].wait()
        workers.remove(w)

    try:
        for _ in range(jobs):
            spawn()
        while queue or any(w["task"] is not None for w in workers):
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            for w in workers:
                if w["ready"] and w["task"] is None and queue:
                    i = queue.pop()
                    t = tasks[i]
                    w["task"], w["started"] = i, time.monotonic()
                    try:
                        _send(w["proc"].stdin, (source, filename, name, t.constants, t.spec, t.backend, t.arch,
                                                t.num_warps, t.num_stages, t.occupancy))
                    except BrokenPipeError:
                        pass  # it died: EOF below
            waits = [w["started"] + timeout_s - now for w in workers if w["task"] is not None]
            if deadline is not None:
                waits.append(deadline - now)
            fds = {w["proc"].stdout.fileno(): w for w in workers}
            readable, _, _ = select.select(list(fds), [], [], max(0.0, min(waits, default=1.0)))
            for fd in readable:
                w = fds[fd]
                try:
                    msg = _recv_fd(fd)
                except (EOFError, OSError):
                    task, ready = w["task"], w["ready"]
                    kill(w)
                    if not ready:
                        raise RuntimeError("a tuning compile worker died while starting (run with TLE_DEBUG=1 "
                                           f"to see its errors): {sys.executable} cannot import tle?")
                    spawn()
                    if task is not None:
                        yield task, "error", "the compile worker died"
                    continue
                if msg[0] == "ready":
                    w["ready"] = True
                    continue
                task, w["task"] = w["task"], None
                yield task, msg[0], msg[1]
            now = time.monotonic()
            for w in [w for w in workers if w["task"] is not None and now - w["started"] > timeout_s]:
                task = w["task"]
                kill(w)
                spawn()
                yield task, "timeout", f"compiling took over {timeout_s:g} s"
    finally:
        for w in list(workers):
            kill(w)


# ---- timing and search ---------------------------------------------------------------------------------------------
_flush: dict = {}


def cuda_timer(config, trial, reps: int) -> float:
    """Median seconds of `reps` launches, each between two CUDA events, after 3 warm-up launches. Before each the
    L2 cache is flushed (a 256 MiB write) and, for kernels that accumulate into their outputs, the outputs are
    restored; a sleep kernel queued first lets the host queue every launch before the GPU starts them."""
    import torch
    dev = trial.device
    buf = _flush.get(dev)
    if buf is None:
        buf = _flush[dev] = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    for _ in range(3):
        trial.reset()
        trial.run()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(int(2e5 * reps))  # about 0.1 ms a launch at H200 clocks
    for s, e in zip(starts, ends):
        trial.reset()
        buf.zero_()
        s.record()
        trial.run()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) / 1e3


def cpu_timer(config, trial, reps: int) -> float:
    """Median wall-clock seconds of `reps` runs (the interpreter on CPU tensors), after one warm-up run."""
    trial.reset()
    trial.run()
    times = []
    for _ in range(reps):
        trial.reset()
        t0 = time.perf_counter()
        trial.run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@dataclass
class Search:
    best: tuple | None  # ckey
    time_s: float
    times: dict  # ckey -> latest median
    calls: int  # timer calls
    reps: int  # launches timed in all


def successive_halving(configs, measure, *, reps: int = 10, keep: int = 3, max_reps: int = 100,
                       final_rounds: int = 4, deadline: float | None = None, on_time=None, dropped=()) -> Search:
    """Time every configuration with `reps` launches (measure(ckey, reps) -> seconds, inf for a failure), keep the
    fastest third, double the launches, and repeat until at most `keep` are left or the deadline passes. `configs`
    may be a generator (configurations arriving as they compile).

    The finalists are then timed against each other in `final_rounds` interleaved rounds of max_reps / 2 launches,
    in alternating order (A B C, C B A, ...), and ranked by their mean over the rounds. Timed one after another, as
    the earlier rounds are, near-equal finalists are ranked by the GPU's clock drift as much as by their code
    (docs/tuning.md); with an even number of alternating rounds a drift linear in time adds the same to each.

    `dropped`: configurations found wrong after they were timed (a container the caller fills as it goes); they
    leave the search wherever they are."""
    times: dict = {}
    alive: list = []
    calls = total = 0

    def timed(c, n):
        nonlocal calls, total
        t = measure(c, n)
        calls, total = calls + 1, total + n
        times[c] = t
        if on_time is not None:
            on_time(c, t)
        return t

    def over():
        return deadline is not None and time.monotonic() >= deadline

    for c in configs:
        if math.isfinite(timed(c, reps)):
            alive.append(c)
    alive = [c for c in alive if c not in dropped]
    while len(alive) > keep and not over():
        alive.sort(key=times.get)
        alive = alive[:max(1, math.ceil(len(alive) / keep))]
        if len(alive) <= keep:
            break
        reps = min(max_reps, reps * 2)
        for c in alive:
            if over():
                break
            timed(c, reps)
        alive = [c for c in alive if math.isfinite(times[c]) and c not in dropped]
    if len(alive) > 1 and not over():
        samples: dict = {c: [] for c in alive}
        for r in range(final_rounds):
            for c in (alive if r % 2 == 0 else alive[::-1]):
                if over():
                    break
                samples[c].append(timed(c, max(1, max_reps // 2)))
        for c in alive:
            if samples[c]:
                times[c] = statistics.fmean(samples[c]) if all(map(math.isfinite, samples[c])) else math.inf
        alive = [c for c in alive if math.isfinite(times[c])]
    alive = [c for c in alive if c not in dropped]
    if not alive:
        return Search(None, math.inf, times, calls, total)
    best = min(alive, key=times.get)
    return Search(best, times[best], times, calls, total)


class Progress:
    """One self-rewriting line on stderr; silent when stderr is not a terminal or TLE_TUNE_QUIET=1."""

    def __init__(self, name: str, total: int):
        self.name, self.total, self.t0, self.last = name, total, time.monotonic(), 0.0
        self.enabled = sys.stderr.isatty() and os.environ.get("TLE_TUNE_QUIET", "0") != "1"
        self.compiled = self.failed = self.timed = 0
        self.best = None

    def update(self, force: bool = False, **kw) -> None:
        for k, v in kw.items():
            setattr(self, k, v)
        now = time.monotonic()
        if not self.enabled or (not force and now - self.last < 0.1):
            return
        self.last = now
        best = f"  best {self.best[1] * 1e3:.4f} ms {_show(self.best[0])}" if self.best else ""
        line = (f"[tle tune {self.name}] compiled {self.compiled}/{self.total}"
                f"{f' ({self.failed} failed)' if self.failed else ''}  timed {self.timed}{best}  "
                f"{now - self.t0:.0f}s")
        width = shutil.get_terminal_size((120, 20)).columns - 1
        sys.stderr.write("\r" + line[:width].ljust(width))
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            self.update(force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()


# ---- the driver ----------------------------------------------------------------------------------------------------
@dataclass
class TuneResult:
    config: dict
    time_s: float
    default_config: dict
    default_time_s: float | None
    from_db: bool
    key: str
    stats: dict = field(default_factory=dict)


class Trial:
    """One configuration ready to launch on the caller's arguments; reset() restores outputs that must be."""

    def __init__(self, plan, grid, args, kwargs, resets, device):
        self.plan, self.grid, self.args, self.kwargs, self.resets, self.device = plan, grid, args, kwargs, resets, device

    def run(self):
        self.plan(self.grid, self.args, self.kwargs)

    def reset(self):
        for t, saved in self.resets:
            t.copy_(saved)


def _tolerance(dtype) -> float:
    import torch
    return {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-3, torch.float64: 1e-9}.get(dtype, 0.0)


def _matches(got, want) -> str | None:
    """None when `got` matches `want` (NaN where want has NaN, relative error within the dtype's tolerance)."""
    import torch
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    if not got.is_floating_point():
        return None if torch.equal(got, want) else "integer outputs differ"
    g, w = got.double(), want.double()
    if not torch.equal(torch.isnan(g), torch.isnan(w)):
        return "NaN (an unwritten or wrong element) where the reference has none, or the reverse"
    ok = ~torch.isnan(w)
    err = ((g[ok] - w[ok]).norm() / w[ok].norm().clamp_min(1e-30)).item()
    return None if err <= _tolerance(got.dtype) else f"relative error {err:.2e}"


def _expected(reference, args, outputs, names, kernel_name) -> list:
    """TuneSpace.reference(args), checked: one tensor per tensor the kernel writes (a single tensor for one)."""
    import torch
    try:
        got = reference(args)
    except Exception as e:  # noqa: BLE001 - the user's function: say whose error it is
        raise TuneError(f"tuning '{kernel_name}': TuneSpace.reference(args) raised {type(e).__name__}: {e}") from e
    if isinstance(got, torch.Tensor):
        got = [got]
    if not isinstance(got, (list, tuple)) or len(got) != len(outputs) or \
            not all(isinstance(g, torch.Tensor) and g.shape == o.shape for g, o in zip(got, outputs)):
        shown = [tuple(g.shape) if isinstance(g, torch.Tensor) else type(g).__name__ for g in got] \
            if isinstance(got, (list, tuple)) else type(got).__name__
        raise TuneError(f"tuning '{kernel_name}': TuneSpace.reference(args) must return the expected values of "
                        f"the {len(outputs)} tensor(s) the kernel writes, in order: "
                        f"{', '.join(f'{n} {tuple(o.shape)}' for n, o in zip(names, outputs))}; it returned {shown}")
    return [g.detach().to(o.device) for g, o in zip(got, outputs)]


def _covers_more(outs, holes, ref_outs, ref_holes) -> bool:
    """Do `outs` write every element the reference wrote, with its values, and more besides?"""
    more = False
    for o, h, r, rh in zip(outs, holes, ref_outs, ref_holes):
        if h is None or rh is None:
            if _matches(o, r):
                return False
            continue
        if (h & ~rh).any() or _matches(o[~rh], r[~rh]):
            return False
        more |= bool((rh & ~h).any())
    return more


def tune(launch: _Launch, write_wait_s: float = BUSY_TIMEOUT_S) -> TuneResult:
    """Tune one launch's bucket: prune, compile in parallel, check and time by successive halving; store the best,
    waiting up to `write_wait_s` for another process's lock on the database (a launch: LAUNCH_WRITE_WAIT_S)."""
    import torch
    kernel, space, t0 = launch.kernel, launch.space, time.monotonic()
    deadline = t0 + space.budget_s
    configs = space.configs(launch.params)
    fixed_backend = launch.fixed.get("backend", kernel.backend)
    gpu_only = {c.get("backend", fixed_backend) for c in configs} & {"triton", "tileir"}
    if gpu_only and not launch.on_gpu:
        raise TuneError(f"tuning '{kernel.name}': backend {', '.join(sorted(gpu_only))} runs on CUDA tensors, but "
                        "the tensors are on the CPU")
    arch = kernel.arch or (_device_info(launch.device)[1] if launch.on_gpu else "cpu")
    hw = hardware_of(launch.device, arch)
    auto_route = None
    if launch.on_gpu and any(c.get("backend", fixed_backend) == "auto" for c in configs):
        base_consts = {**launch.fixed_consts, **{k: v for k, v in launch.base.items() if k not in OPTIONS}}
        auto_route = route_of(kernel.program, kernel.name, base_consts, arch)
    pruned = prune(kernel.program, kernel.name, configs, fixed_constants=launch.fixed_consts, dims=launch.dims,
                   grid=launch.grid, hw=hw, fixed_backend=fixed_backend, base=launch.base,
                   max_candidates=space.max_candidates, auto_route=auto_route)
    cands = pruned.kept
    if not cands:
        why = "; ".join(f"{rule} ({n}){': ' + pruned.reasons[rule] if rule in pruned.reasons else ''}"
                        for rule, n in pruned.dropped.items())
        raise TuneError(f"tuning '{kernel.name}': every configuration was pruned: {why}")
    facts = pruned.facts
    progress = Progress(kernel.name, len(cands))

    def options_of(c):
        backend = c.get("backend", fixed_backend)
        if not launch.on_gpu and backend == "auto":
            backend = "interp"
        return (backend, c.get("num_warps", launch.fixed.get("num_warps")),  # None: the kernel's default
                c.get("num_stages", launch.fixed.get("num_stages")),  # None: the kernel's default
                c.get("occupancy", launch.fixed.get("occupancy")))  # None: the lowering's choice

    # What a run changes: every tensor some candidate writes (a constant may decide which one: the union over the
    # candidates), saved now and restored at the end. Before its output check a run starts from the saved values
    # where the kernel reads what it writes (atomics, an output it also loads, or an output sharing storage with
    # another argument: an in-place launch), and from poison (NaN, the integer minimum) elsewhere, so that an
    # element no program wrote shows. The timer restores the former before every launch too (Trial.reset).
    written_names = sorted(set().union(*(f.written for f in facts.values())))
    read = set().union(*(f.read for f in facts.values()))
    atomics = any(f.atomics for f in facts.values())
    tensors = {n: v for n, v in launch.values.items() if isinstance(v, torch.Tensor)}
    outputs, out_names = [], []
    for n in written_names:  # the same tensor passed for two outputs is saved and compared once
        if all(launch.values[n] is not t for t in outputs):
            outputs.append(launch.values[n])
            out_names.append(n)

    def shared(name, t):
        return any(m != name and o.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
                   for m, o in tensors.items())
    snapshots = [(t, t.clone()) for t in outputs]
    restored = [atomics or n in read or shared(n, t) for n, t in zip(out_names, outputs)]
    poisoned = [not r and t.dtype != torch.bool for r, t in zip(restored, outputs)]
    resets = [pair for pair, r in zip(snapshots, restored) if r]

    def prepare():
        for (t, saved), r in zip(snapshots, restored):
            if r:
                t.copy_(saved)
        for t, p in zip(outputs, poisoned):
            if p:
                t.fill_(float("nan") if t.is_floating_point() else torch.iinfo(t.dtype).min)

    def holes(outs):  # per output, the elements still holding the poison (None: not poisoned)
        return [(o.isnan() if o.is_floating_point() else o == torch.iinfo(o.dtype).min) if p else None
                for o, p in zip(outs, poisoned)]

    ref = {"outs": None, "holes": None, "holders": []}  # the reference outputs and the configurations that match it
    user_reference = space.reference is not None
    if user_reference:
        ref["outs"] = _expected(space.reference, launch.args, outputs, out_names, kernel.name)
        ref["holes"] = [None] * len(outputs)
    timer = space.timer or (cuda_timer if launch.on_gpu else cpu_timer)
    trials, failures, entries_of = {}, {}, {}
    checked: set = set()
    failure_kinds: dict = {}  # kind -> [count, first message], for stats: why candidates were not timed

    def fail(k, kind, message):
        failures[k] = message
        seen = failure_kinds.setdefault(kind, [0, message[:300]])
        seen[0] += 1

    def make_trial(c):
        before = set(kernel._entries)
        # with the launch's grid, so that a trial runs the binary its configuration gets at that launch (the grid
        # facts: bounds checks dropped, Tile IR's occupancy hint and persistent loop; tle/abi.py)
        plan = kernel._plan(launch.args, {**launch.kwargs, **c}, launch.grid, tune=False)
        entries_of[_ckey(c)] = set(kernel._entries) - before
        return Trial(plan, launch.grid, launch.args, launch.kwargs, resets, launch.device)

    def check(k, outs) -> str | None:
        """Why the outputs of configuration `k` are wrong, or None. Without a user reference the reference is the
        configuration that writes the most: a later one that writes every element an earlier reference wrote,
        alike, and more besides replaces it, and the configurations that matched the old one fail (they leave
        elements unwritten; the base configuration may be one, under a fixed grid that only some tiles cover)."""
        got_holes = holes(outs)
        if ref["outs"] is None:
            ref.update(outs=outs, holes=got_holes, holders=[k])
            return None
        why = next(filter(None, (_matches(g, w) for g, w in zip(outs, ref["outs"]))), None)
        if why is None:
            ref["holders"].append(k)
            return None
        unwritten = [n for n, h, rh in zip(out_names, got_holes, ref["holes"])
                     if h is not None and (h & ~(rh if rh is not None else torch.zeros_like(h))).any()]
        if unwritten:
            return (f"leaves elements of {', '.join(unwritten)} unwritten that the reference writes: its grid or "
                    "tiles do not cover the problem")
        if not user_reference and _covers_more(outs, got_holes, ref["outs"], ref["holes"]):
            for h in ref["holders"]:
                fail(h, "wrong output", f"leaves elements unwritten that {_show(dict(k))} writes: its grid or tiles "
                                        "do not cover the problem")
            ref.update(outs=outs, holes=got_holes, holders=[k])
            return None
        return f"output differs from the reference: {why}"

    def measure(k, reps):
        trial = trials[k]
        if k in failures:  # failed its check after it was first timed (a configuration that writes more came)
            return math.inf
        try:
            if k not in checked:
                if facts[k].launched == 0:
                    fail(k, "no program", f"the grid gives no program for this problem ({facts[k].grid})")
                    return math.inf
                prepare()
                trial.run()
                if launch.on_gpu:
                    torch.cuda.synchronize()
                why = check(k, [t.clone() for t in outputs])
                if why:
                    fail(k, "wrong output", why)
                    return math.inf
                checked.add(k)
            t = timer(dict(k), trial, reps)
        except Exception as e:  # noqa: BLE001 - a configuration that fails to run is dropped
            if isinstance(e, torch.cuda.OutOfMemoryError):
                raise
            fail(k, "run", f"{type(e).__name__}: {e}")
            return math.inf
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and t > 0):
            fail(k, "timer", f"the timer returned {t!r}, not a positive number of seconds")
            return math.inf
        return float(t)

    def ready():
        """Configurations as they become launchable; the base (the reference) before any other."""
        from ..check import check_kernel
        from ..targets.binary import Binary
        base_k = _ckey(launch.base)
        gpu = [c for c in cands if options_of(c)[0] != "interp"]
        for c in cands:
            if options_of(c)[0] == "interp":
                trials[_ckey(c)] = make_trial(c)
                progress.update(compiled=progress.compiled + 1)
                yield _ckey(c)
        if not gpu:
            return
        tasks, binkeys = [], []
        for c in gpu:
            backend, nw, ns, occ = options_of(c)
            consts = {**launch.fixed_consts, **{k: v for k, v in c.items() if k not in OPTIONS}}
            checked_kernel = check_kernel(kernel.program, kernel.name, consts)
            tasks.append(CompileTask(consts, launch.spec, backend, arch, nw, ns, occ))
            binkeys.append(kernel._binary_key(checked_kernel, launch.spec, backend, arch, nw, ns, occ))
        held, base_done, binaries = [], base_k not in {_ckey(c) for c in gpu}, {}
        stream = compile_configs(kernel.program.source, kernel.program.file, kernel.name, tasks, jobs=space.jobs,
                                 timeout_s=space.compile_timeout_s, deadline=t0 + 0.7 * space.budget_s)
        try:
            for i, status, payload in stream:
                k = _ckey(gpu[i])
                base_done |= k == base_k
                if status != "ok":
                    fail(k, f"compile {status}", payload)
                    progress.update(failed=progress.failed + 1)
                    continue
                progress.update(compiled=progress.compiled + 1)
                binary = Binary.from_bytes(payload)
                same = (hashlib.sha256(binary.cubin).hexdigest(), binary.num_threads, facts[k].programs)
                if hw is not None and binary.shared_mem > hw.smem:
                    fail(k, "shared memory", f"needs {binary.shared_mem} bytes of shared memory; the GPU has {hw.smem}")
                    continue
                if same in binaries:
                    fail(k, "same binary", f"the same binary as {_show(dict(binaries[same]))}")
                    continue
                binaries[same] = k
                kernel._prebuilt[binkeys[i]] = payload
                try:
                    trials[k] = make_trial(gpu[i])
                except Exception as e:  # noqa: BLE001 - dropped with its reason
                    fail(k, "run", f"{type(e).__name__}: {e}")
                    continue
                if k == base_k:
                    held.insert(0, k)
                else:
                    held.append(k)
                while base_done and held:
                    yield held.pop(0)
            yield from held
        finally:
            stream.close()

    timed_configs: set = set()

    def on_time(k, t):
        best = progress.best
        if math.isfinite(t) and (best is None or t < best[1]):
            best = (dict(k), t)
        if math.isfinite(t):
            timed_configs.add(k)
        progress.update(timed=len(timed_configs), best=best)  # configurations timed, not timer calls

    arriving = ready()
    try:
        search = successive_halving(arriving, measure, deadline=deadline, on_time=on_time, dropped=failures)
    finally:
        arriving.close()  # stops the compile workers
        progress.close()
        for t, saved in snapshots:
            t.copy_(saved)
        kernel._prebuilt.clear()
    if search.best is None:
        reasons = "; ".join(f"{_show(dict(k))}: {v}" for k, v in list(failures.items())[:5]) or \
            f"the budget of {space.budget_s:g} s ran out before any was timed"
        raise TuneError(f"tuning '{kernel.name}': no configuration compiled, ran and matched the reference "
                        f"({len(cands)} candidates; {reasons})")
    # keep the winner's loaded binary; forget the others
    for k, keys in entries_of.items():
        if k != search.best:
            for mk in keys - entries_of[search.best]:
                kernel._entries.pop(mk, None)
    config = dict(search.best)
    base_k = _ckey(launch.base)
    stats = {"space": len(configs), "candidates": len(cands), "compiled": len(trials), "timed": len(timed_configs),
             "timer_calls": search.calls, "launches_timed": search.reps, "seconds": round(time.monotonic() - t0, 2),
             "pruned": pruned.dropped,
             # "same binary" is not a failure: two configurations compiled to identical bytes and were timed once
             "failed": sum(n for kind, (n, _) in failure_kinds.items() if kind != "same binary"),
             "not_timed": {kind: {"count": n, "first": first} for kind, (n, first) in failure_kinds.items()}}
    default_time = search.times.get(base_k) if base_k not in failures else None
    row = {**launch.fields, "key": launch.key, "config": config, "time_s": search.time_s,
           "default_time_s": default_time if default_time is not None and math.isfinite(default_time) else None,
           "exact_shape": json.dumps(launch.dims, sort_keys=True), "stats": stats,
           "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        store(row, wait_s=write_wait_s)
    except TuneDBError as e:  # the tuning is not lost for this process: the launch takes it, others tune again
        _warn_once(f"tle: the tuning of '{kernel.name}' could not be saved ({e}); this process uses it, other "
                   "processes will tune again")
    import logging
    logging.getLogger("tle").info("tle: tuned %s in %.1f s: %s, %.4g ms (%d of %d configurations timed)",
                                  kernel.name, stats["seconds"], _show(config), search.time_s * 1e3,
                                  stats["timed"], stats["space"])
    return TuneResult(config, search.time_s, dict(launch.base), row["default_time_s"], False, launch.key, stats)


def tune_kernel(kernel, grid, args, kwargs, force: bool = False) -> TuneResult:
    """Kernel.tune: the stored result of this bucket (from_db=True), or a fresh tuning (always with force=True)."""
    if grid is None:
        raise TuneError(f"{kernel.name}.tune(grid, *args): give the launch's grid (a tuple, or a function of the "
                        "constants and dims), as a launch `kernel[grid](...)` has it")
    launch = _Launch(kernel, grid, args, kwargs)
    if not launch.params:
        raise TuneError(f"every tuned parameter of '{kernel.name}' is given by the call: nothing to tune")
    with _key_lock(launch.key):
        if not force:
            row = _stored(launch)
            if row is not None:
                kernel._tuned[launch.key] = row["config"]
                return TuneResult(row["config"], row["time_s"], dict(launch.base), row["default_time_s"], True,
                                  launch.key, row["stats"] or {})
        result = tune(launch)
        kernel._tuned[launch.key] = result.config
    return result


# ---- python -m tle.runtime.tuning ------------------------------------------------------------------------------------
def _list(db: str | None = None) -> str:
    lines = []
    for r in rows(db=db):  # a row written by hand may hold anything: show what is there
        stats = r["stats"] if isinstance(r["stats"], dict) else {}
        config = _show(r["config"]) if isinstance(r["config"], dict) else repr(r["config"])
        default = f"  default {_ms(r['default_time_s'])}" if r["default_time_s"] else ""
        lines.append(f"{r['created']}  {r['kernel']}  {r['device']} {r['capability']}  shape {r['shape']}  "
                     f"fixed {r['fixed']}\n    best {config}: {_ms(r['time_s'])}{default}  "
                     f"({stats.get('timed', '?')} of {stats.get('space', '?')} timed, "
                     f"{stats.get('seconds', '?')} s)  key {str(r['key'])[:12]}")
    return "\n".join(lines)


def _ms(t) -> str:
    return f"{t * 1e3:.4f} ms" if type(t) in (int, float) else f"{t!r} (not a time)"


def main(argv=None) -> int:
    import argparse
    prog = "python -m tle.runtime.tuning"
    p = argparse.ArgumentParser(prog=prog, description=f"The tle tuning database (TLE_TUNE_DB; now {db_path()}).",
                                epilog="exit codes: 0 ok; 1 the database cannot be read or written; 2 a bad "
                                       "command line (a flag, a file it names)", allow_abbrev=False)
    p.add_argument("--list", action="store_true", help="print every stored result")
    p.add_argument("--export", metavar="FILE", help="write every result to FILE as JSON")
    p.add_argument("--import", dest="import_", metavar="FILE", help="add the results of FILE (from --export)")
    args = p.parse_args(argv)
    try:
        if args.import_:
            try:
                n = import_(args.import_)
            except TuneImportError as e:
                p.error(f"--import: {e}")
            print(f"imported {n} results from {args.import_}", file=sys.stderr)
        if args.export:
            try:
                n = export(args.export)
            except TuneDBError:
                raise
            except TuneError as e:
                p.error(f"--export: {e}")
            print(f"exported {n} results to {args.export}", file=sys.stderr)
        if args.list or not (args.import_ or args.export):
            text = _list() if os.path.exists(db_path()) else ""
            print(text if text else f"no tuning results in {db_path()}")
    except TuneDBError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
